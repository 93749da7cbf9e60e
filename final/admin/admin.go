package admin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// usage is `admin help`.
const usage = `admin: manage a Kafka cluster (this workbook's brokers or Kafka's own)

Usage:
  admin <command> --bootstrap-server host:port [--command-config file] [flags]

Commands:
  topics    list, describe, create, delete topics and add partitions  (kafka-topics.sh)
  groups    list, describe, delete consumer groups and reset offsets (kafka-consumer-groups.sh)
  configs   describe and alter topic, broker and user (SCRAM) configs (kafka-configs.sh)
  reassign  move partitions' replicas to other brokers, list the moves (kafka-reassign-partitions.sh)
  cluster   show the cluster id, the controller and the brokers
  help      show this text, or a command's: admin help topics

Flags every command takes:
  --bootstrap-server host:port[,host:port...]
        the brokers to connect to first (required)
  --command-config file
        Kafka client properties for TLS and SASL: security.protocol,
        ssl.truststore.location (PEM), ssl.keystore.location (PEM),
        sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sasl.jaas.config
  --timeout duration
        how long the command may take (default 30s)

Errors go to standard error and the exit status is 1. Run 'admin <command> -h'
for a command's flags and examples.
`

// Run runs the admin command with args (the words after the program's
// name), writing results to stdout and errors to stderr, and returns the
// process's exit status: 0, or 1 after any error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 1
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			if c := lookup(rest[0]); c != nil {
				fmt.Fprint(stdout, c.usage)
				return 0
			}
			fmt.Fprintf(stderr, "admin: no command %q\n\n%s", rest[0], usage)
			return 1
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "admin: no command %q\n\n%s", name, usage)
		return 1
	}
	err := c.run(ctx, rest, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, c.usage)
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "admin %s: %v\nRun 'admin %s -h' for usage.\n", name, err, name)
		return 1
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	return 1
}

// command is one subcommand.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func lookup(name string) *command {
	for _, c := range []*command{
		{"topics", topicsUsage, runTopics},
		{"groups", groupsUsage, runGroups},
		{"configs", configsUsage, runConfigs},
		{"reassign", reassignUsage, runReassign},
		{"cluster", clusterUsage, runCluster},
	} {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usageError is a mistake in the command line, answered with a pointer
// to -h.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// connFlags are the flags every command takes to reach the cluster.
type connFlags struct {
	bootstrap     string
	commandConfig string
	timeout       time.Duration
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap-server", "", "")
	fs.StringVar(&c.commandConfig, "command-config", "", "")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "")
}

// newFlagSet is a flag set that reports its errors to its caller rather
// than printing Go's default usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args; a mistake becomes a usageError, -h stays
// flag.ErrHelp, and a word that is not a flag is refused (Kafka's tools
// take no positional arguments).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// session is a connected command: the output writers and the clients.
type session struct {
	out, errOut io.Writer
	cl          *kgo.Client
	adm         *kadm.Client
	cancel      context.CancelFunc // the command's --timeout

	// versions is the first broker's ApiVersions answer, asked once.
	versions *kmsg.ApiVersionsResponse
}

// connect opens clients to the cluster that c names. The context bounds
// the command (--timeout) until the caller closes the session.
func (c *connFlags) connect(ctx context.Context, stdout, stderr io.Writer) (*session, context.Context, error) {
	if c.bootstrap == "" {
		return nil, nil, usagef("--bootstrap-server is required")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.bootstrap, ",")...), kgo.ClientID("kafkaworkbook-admin")}
	if c.commandConfig != "" {
		cfg, err := ReadClientConfig(c.commandConfig)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range cfg.Unknown {
			fmt.Fprintf(stderr, "WARN: the configuration '%s' was supplied but isn't a known config.\n", k)
		}
		opts = append(opts, cfg.Opts()...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(min(c.timeout, 60*time.Second).Milliseconds()))
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	return &session{out: stdout, errOut: stderr, cl: cl, adm: adm, cancel: cancel}, ctx, nil
}

func (s *session) close() {
	s.cl.Close()
	s.cancel()
}

// serves reports whether the brokers serve the API key at all, by one
// broker's ApiVersions answer (the brokers of a cluster serve the same
// set). It lets a missing API be named rather than surface as a client
// library's retry error.
func (s *session) serves(ctx context.Context, key int16) (bool, error) {
	if s.versions == nil {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kafkaworkbook-admin", "1.0"
		resp, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			return false, reach(err)
		}
		s.versions = resp
	}
	for _, k := range s.versions.ApiKeys {
		if k.ApiKey == key {
			return true, nil
		}
	}
	return false, nil
}

// require fails with a message naming the API when the brokers do not
// serve it.
func (s *session) require(ctx context.Context, key int16, what string) error {
	ok, err := s.serves(ctx, key)
	if err != nil || ok {
		return err
	}
	return &unsupportedError{key: key, what: what}
}

// unsupportedError says that the cluster lacks an API a command needs.
type unsupportedError struct {
	key  int16
	what string
}

func (e *unsupportedError) Error() string {
	return fmt.Sprintf("%s needs the %s API (key %d), which these brokers do not serve (UNSUPPORTED_VERSION)",
		e.what, kafkaAPIName(e.key), e.key)
}

// kafkaAPIName is the API's name as Kafka's protocol guide spells it
// (kmsg's names differ in case for a few).
func kafkaAPIName(key int16) string {
	switch key {
	case 50:
		return "DescribeUserScramCredentials"
	case 51:
		return "AlterUserScramCredentials"
	}
	return kmsg.NameForKey(key)
}

// reach words an error from talking to the cluster at all.
func reach(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from the cluster in time (--timeout): %w", err)
	case errors.Is(err, io.EOF) && err.Error() == io.EOF.Error(): // a bare EOF; franz-go explains some itself
		return fmt.Errorf("the broker closed the connection (%w): brokers do so after a failed SASL login, "+
			"or when security.protocol does not match the listener's; check --command-config", err)
	}
	return err
}
