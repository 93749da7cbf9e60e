package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/final/security"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

const configsUsage = `admin configs: describe and alter topic, broker and user configs
(Kafka's kafka-configs.sh, with the same flags and output)

Usage:
  admin configs --bootstrap-server host:port --describe --entity-type topics|brokers|users
                [--entity-name name | --entity-default] [--all]
  admin configs --bootstrap-server host:port --alter --entity-type topics|brokers
                (--entity-name name | --entity-default)
                [--add-config k=v[,k2=v2...]] [--delete-config k[,k2...]]
  admin configs --bootstrap-server host:port --alter --entity-type users --entity-name alice
                --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
                [--delete-config SCRAM-SHA-512]
  admin configs --zookeeper host:2181 --alter --entity-type users --entity-name alice
                --add-config 'SCRAM-SHA-256=[password=alice-secret]'

Actions (exactly one):
  --describe      print the configs set on each entity, as kafka-configs does:
                    Dynamic configs for topic orders are:
                      retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}
                  with --all, every config with its value and where it comes from.
                  For users: the SCRAM mechanisms each has a credential for.
  --alter         set (--add-config) and remove (--delete-config) configs
                  (IncrementalAlterConfigs); for users, create, change or delete SCRAM
                  credentials (AlterUserScramCredentials, Kafka 2.7+)

Options:
  --entity-type t     topics, brokers or users
  --entity-name n     a topic name, a broker id or a user name; --describe without it
                      describes every topic, broker or user
  --entity-default    brokers: the cluster-wide default every broker inherits
  --add-config list   k=v pairs separated by commas; a value with commas goes in
                      square brackets: k=[a,b]. For users, SCRAM-SHA-256 or SCRAM-SHA-512
                      with [password=p] or [iterations=n,password=p] (4096 <= n <= 16384)
  --delete-config l   config names separated by commas (for users: mechanisms)
  --all               --describe: every config, not only those set on the entity
  --zookeeper h:p     users only, instead of --bootstrap-server: write the credential
                      into ZooKeeper (/config/users/<user>), for ZooKeeper-mode brokers
                      that do not serve AlterUserScramCredentials
  --bootstrap-server, --command-config, --timeout: see 'admin help'

Examples:
  admin configs --bootstrap-server localhost:9092 --alter --entity-type topics \
      --entity-name orders --add-config retention.ms=3600000,cleanup.policy=compact
  admin configs --bootstrap-server localhost:9092 --describe --entity-type brokers --entity-name 0
  admin configs --bootstrap-server localhost:9092 --alter --entity-type users \
      --entity-name alice --add-config 'SCRAM-SHA-512=[password=alice-secret]'
`

// SCRAMChange is one change to a user's SCRAM credentials.
type SCRAMChange struct {
	User       string
	Mechanism  string // SCRAM-SHA-256 or SCRAM-SHA-512
	Iterations int    // 0 for the default, 4096
	Password   string // empty when Delete
	Delete     bool
}

// zooKeeperSCRAM writes SCRAM credentials straight into ZooKeeper's
// /config/users/<user>, with a /config/changes notification, the way
// kafka-configs --zookeeper does, for ZooKeeper-mode brokers without
// AlterUserScramCredentials (before Kafka 2.7 every cluster's first SCRAM
// user was made this way). Package security writes Kafka's format; every
// broker's SASL listeners follow the notification, so the user can log in
// at once.
func zooKeeperSCRAM(ctx context.Context, zkConnect string, changes []SCRAMChange) error {
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	zk, err := kafkazk.Connect(zkConnect, kafkazk.Options{SessionTimeout: kafkazk.DefaultSessionTimeout, ConnectionTimeout: timeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer zk.Close()
	for _, c := range changes {
		if c.Delete {
			err = security.DeleteScramCredential(zk, c.User, c.Mechanism)
		} else {
			err = security.AddScramCredential(zk, c.User, c.Mechanism, c.Password, c.Iterations)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// configsFlags are the flags of admin configs.
type configsFlags struct {
	conn                        connFlags
	describe, alter, all, deflt bool
	entityType, entityName      string
	add                         keyValues
	del                         names
	zookeeper                   string
}

func runConfigs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f configsFlags
	fs := newFlagSet("configs")
	f.conn.register(fs)
	actions := map[string]*bool{"describe": &f.describe, "alter": &f.alter}
	boolFlags(fs, actions)
	boolFlags(fs, map[string]*bool{"all": &f.all, "entity-default": &f.deflt})
	fs.StringVar(&f.entityType, "entity-type", "", "")
	fs.StringVar(&f.entityName, "entity-name", "", "")
	fs.Var(&f.add, "add-config", "")
	fs.Var(&f.del, "delete-config", "")
	fs.StringVar(&f.zookeeper, "zookeeper", "", "")
	if _, _, err := parseAction(fs, args, actions); err != nil {
		return err
	}
	switch {
	case !slices.Contains([]string{"topics", "brokers", "users"}, f.entityType):
		return usagef("--entity-type must be topics, brokers or users")
	case f.deflt && f.entityType != "brokers":
		return usagef("--entity-default goes with --entity-type brokers")
	case f.deflt && f.entityName != "":
		return usagef("--entity-name and --entity-default exclude each other")
	case f.entityType == "brokers" && f.entityName != "":
		if _, err := strconv.ParseInt(f.entityName, 10, 32); err != nil {
			return usagef("--entity-name %q: a broker is named by its id", f.entityName)
		}
	}
	if f.alter {
		switch {
		case f.entityName == "" && !f.deflt:
			return usagef("--alter needs --entity-name (or --entity-default for brokers)")
		case len(f.add) == 0 && len(f.del) == 0:
			return usagef("--alter needs --add-config or --delete-config")
		}
	} else if len(f.add) > 0 || len(f.del) > 0 {
		return usagef("--add-config and --delete-config go with --alter")
	}
	if f.zookeeper != "" {
		return runConfigsZooKeeper(ctx, f, stdout)
	}

	s, ctx, err := f.conn.connect(ctx, stdout, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	switch {
	case f.describe && f.entityType == "users":
		return s.describeUsers(ctx, f.entityName)
	case f.describe:
		return s.describeConfigs(ctx, f)
	case f.entityType == "users":
		changes, err := scramChanges(f)
		if err != nil {
			return err
		}
		return s.alterUsers(ctx, changes)
	default:
		return s.alterConfigs(ctx, f)
	}
}

func (s *session) describeConfigs(ctx context.Context, f configsFlags) error {
	if err := s.require(ctx, 32, "--describe"); err != nil {
		return err
	}
	var rcs kadm.ResourceConfigs
	var err error
	if f.entityType == "topics" {
		topics := []string{f.entityName}
		if f.entityName == "" {
			list, err := s.adm.ListTopicsWithInternal(ctx)
			if err != nil {
				return reach(err)
			}
			topics = list.Names()
		}
		rcs, err = s.adm.DescribeTopicConfigs(ctx, topics...)
	} else {
		var ids []int32
		switch {
		case f.entityName != "":
			id, _ := strconv.ParseInt(f.entityName, 10, 32)
			ids = []int32{int32(id)}
		case !f.deflt:
			brokers, err := s.adm.ListBrokers(ctx)
			if err != nil {
				return reach(err)
			}
			ids = brokers.NodeIDs()
		}
		rcs, err = s.adm.DescribeBrokerConfigs(ctx, ids...)
	}
	if err != nil {
		return reach(err)
	}
	kind := strings.TrimSuffix(f.entityType, "s")
	for _, rc := range rcs {
		if rc.Err != nil {
			return kafkaError(kind, rc.Name, "describe the configs of", rc.Err, rc.ErrMessage)
		}
		which := "Dynamic configs"
		if f.all {
			which = "All configs"
		}
		if rc.Name == "" {
			fmt.Fprintf(s.out, "Default configs for brokers in the cluster are:\n")
		} else {
			fmt.Fprintf(s.out, "%s for %s %s are:\n", which, kind, rc.Name)
		}
		for _, c := range rc.Configs {
			if !f.all && !dynamic(c.Source) {
				continue
			}
			var syn []string
			for _, sy := range c.Synonyms {
				v := "null"
				if sy.Value != nil && !c.Sensitive {
					v = *sy.Value
				}
				syn = append(syn, fmt.Sprintf("%s:%s=%s", sy.Source, sy.Key, v))
			}
			fmt.Fprintf(s.out, "  %s=%s sensitive=%t synonyms={%s}\n", c.Key, configValue(c), c.Sensitive, strings.Join(syn, ", "))
		}
	}
	return nil
}

// dynamic reports whether a config was set on the entity itself (or, for
// brokers, on the cluster default) rather than in a file or by Kafka.
func dynamic(src kmsg.ConfigSource) bool {
	switch src {
	case kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicBrokerConfig,
		kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return true
	}
	return false
}

func (s *session) alterConfigs(ctx context.Context, f configsFlags) error {
	if err := s.require(ctx, 44, "--alter"); err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for _, kv := range f.add {
		v := kv.value
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv.key, Value: &v})
	}
	for _, k := range f.del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	var res kadm.AlterConfigsResponses
	var err error
	kind, done := "topic", "topic "+f.entityName
	if f.entityType == "topics" {
		res, err = s.adm.AlterTopicConfigs(ctx, alters, f.entityName)
	} else {
		kind, done = "broker", "broker "+f.entityName
		var ids []int32
		if f.deflt {
			done = "default config for brokers in the cluster"
		} else {
			id, _ := strconv.ParseInt(f.entityName, 10, 32)
			ids = []int32{int32(id)}
		}
		res, err = s.adm.AlterBrokerConfigs(ctx, alters, ids...)
	}
	if err != nil {
		return reach(err)
	}
	for _, r := range res {
		if r.Err != nil {
			return kafkaError(kind, f.entityName, "alter the configs of", r.Err, r.ErrMessage)
		}
	}
	if f.deflt {
		fmt.Fprintf(s.out, "Completed updating %s.\n", done)
	} else {
		fmt.Fprintf(s.out, "Completed updating config for %s.\n", done)
	}
	return nil
}

// scramChanges reads --add-config and --delete-config for users.
func scramChanges(f configsFlags) ([]SCRAMChange, error) {
	var changes []SCRAMChange
	for _, kv := range f.add {
		if kv.key != "SCRAM-SHA-256" && kv.key != "SCRAM-SHA-512" {
			return nil, usagef("--add-config %s: for users this tool sets SCRAM-SHA-256 and SCRAM-SHA-512 credentials only", kv.key)
		}
		c := SCRAMChange{User: f.entityName, Mechanism: kv.key}
		for _, item := range splitOutsideBrackets(kv.value, ',') {
			k, v, _ := strings.Cut(item, "=")
			switch strings.TrimSpace(k) {
			case "password":
				c.Password = v
			case "iterations":
				n, err := strconv.Atoi(v)
				if err != nil || n < 4096 || n > 16384 {
					return nil, usagef("--add-config %s: iterations=%s is not a number from 4096 to 16384", kv.key, v)
				}
				c.Iterations = n
			default:
				return nil, usagef("--add-config %s: %q is not password=... or iterations=...", kv.key, k)
			}
		}
		if c.Password == "" {
			return nil, usagef("--add-config %s needs [password=...]", kv.key)
		}
		changes = append(changes, c)
	}
	for _, m := range f.del {
		if m != "SCRAM-SHA-256" && m != "SCRAM-SHA-512" {
			return nil, usagef("--delete-config %s: for users this tool deletes SCRAM-SHA-256 and SCRAM-SHA-512 credentials only", m)
		}
		changes = append(changes, SCRAMChange{User: f.entityName, Mechanism: m, Delete: true})
	}
	return changes, nil
}

func (s *session) alterUsers(ctx context.Context, changes []SCRAMChange) error {
	if err := s.require(ctx, 51, "setting a SCRAM credential"); err != nil {
		return fmt.Errorf("%w; brokers in ZooKeeper mode read credentials from ZooKeeper: "+
			"admin configs --zookeeper host:2181 --alter --entity-type users ... writes them there", err)
	}
	var del []kadm.DeleteSCRAM
	var up []kadm.UpsertSCRAM
	for _, c := range changes {
		mech := kadm.ScramSha256
		if c.Mechanism == "SCRAM-SHA-512" {
			mech = kadm.ScramSha512
		}
		if c.Delete {
			del = append(del, kadm.DeleteSCRAM{User: c.User, Mechanism: mech})
		} else {
			up = append(up, kadm.UpsertSCRAM{User: c.User, Mechanism: mech, Iterations: int32(c.Iterations), Password: c.Password})
		}
	}
	res, err := s.adm.AlterUserSCRAMs(ctx, del, up)
	if err != nil {
		return reach(err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			return kafkaError("user", r.User, "alter the SCRAM credentials of", r.Err, r.ErrMessage)
		}
	}
	fmt.Fprintf(s.out, "Completed updating config for user %s.\n", changes[0].User)
	return nil
}

func (s *session) describeUsers(ctx context.Context, user string) error {
	if err := s.require(ctx, 50, "describing SCRAM credentials"); err != nil {
		return err
	}
	var users []string
	if user != "" {
		users = []string{user}
	}
	res, err := s.adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return reach(err)
	}
	for _, u := range res.Sorted() {
		if u.Err != nil {
			return kafkaError("user", u.User, "describe the SCRAM credentials of", u.Err, u.ErrMessage)
		}
		var creds []string
		for _, c := range u.CredInfos {
			creds = append(creds, fmt.Sprintf("%s=iterations=%d", c.Mechanism, c.Iterations))
		}
		fmt.Fprintf(s.out, "SCRAM credential configs for user-principal '%s' are %s\n", u.User, strings.Join(creds, ", "))
	}
	return nil
}

// runConfigsZooKeeper is --zookeeper: SCRAM credentials written into
// ZooKeeper by zooKeeperSCRAM.
func runConfigsZooKeeper(ctx context.Context, f configsFlags, stdout io.Writer) error {
	switch {
	case f.entityType != "users" || !f.alter:
		return usagef("--zookeeper goes with --alter --entity-type users only")
	case f.conn.bootstrap != "":
		return usagef("--zookeeper and --bootstrap-server exclude each other")
	}
	changes, err := scramChanges(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.conn.timeout)
	defer cancel()
	if err := zooKeeperSCRAM(ctx, f.zookeeper, changes); err != nil {
		return fmt.Errorf("write the SCRAM credentials of user %s into ZooKeeper: %w", f.entityName, err)
	}
	fmt.Fprintf(stdout, "Completed updating config for user %s.\n", f.entityName)
	return nil
}
