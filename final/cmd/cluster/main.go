// Command cluster runs the final broker's cluster in Docker containers:
// three ZooKeeper servers, three brokers and Prometheus on one network
// (final/cluster is the launcher; `make images` builds the images).
//
//	cluster up      start it in the background; return once every broker answers
//	cluster status  each broker's address and state, each partition's leader and ISR
//	cluster demo    the course's final demo (`make run`): produce and consume
//	                through a leader's kill -9, then leave the cluster up until Ctrl-C
//	cluster down    remove every container, the network and every volume
//
// Flags (before or after the verb): -name (default kafkaworkbook), -ports
// (the brokers' PLAINTEXT ports on 127.0.0.1, default 9092,9093,9094),
// -prometheus-port (default 9090).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	name           string
	ports          []int
	prometheusPort int
	// demo only: how long each act lasts, and whether to wait for Ctrl-C
	// at the end (a test does not).
	act  time.Duration
	wait bool
}

const usage = `usage: cluster [flags] up|status|demo|down

  up      start 3 ZooKeeper servers, 3 brokers and Prometheus in containers;
          return once every broker answers
  status  the brokers, the controller, each partition's leader and ISR
  demo    start the cluster, produce and consume through a leader's kill -9,
          then leave it up until Ctrl-C, which removes it (make run)
  down    remove the cluster's containers, network and volumes

flags:
`

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, usage); fs.PrintDefaults() }
	var o options
	var ports string
	fs.StringVar(&o.name, "name", "kafkaworkbook", "the cluster's name: prefix of its containers, network and volumes")
	fs.StringVar(&ports, "ports", "9092,9093,9094", "the brokers' PLAINTEXT ports on 127.0.0.1, by broker id (0: a free port)")
	fs.IntVar(&o.prometheusPort, "prometheus-port", 9090, "Prometheus's port on 127.0.0.1 (0: a free port)")
	fs.DurationVar(&o.act, "act", 8*time.Second, "demo: how long each act lasts")
	fs.BoolVar(&o.wait, "wait", true, "demo: leave the cluster up until Ctrl-C (false: remove it at once)")
	// The verb may come first (cluster up -name x) or last (cluster -name x up).
	var verb string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		verb, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if verb == "" && fs.NArg() > 0 {
		verb = fs.Arg(0)
	}
	for _, p := range strings.Split(ports, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("-ports %q: want port numbers separated by commas", ports)
		}
		o.ports = append(o.ports, n)
	}
	switch verb {
	case "up":
		c, err := up(ctx, o, out)
		if err != nil {
			return err
		}
		tryThis(out, c)
		return nil
	case "status":
		c, err := cluster.Attach(ctx, o.name)
		if err != nil {
			return err
		}
		return status(ctx, c, out)
	case "demo":
		return demo(ctx, o, out)
	case "down":
		if err := cluster.Down(ctx, o.name); err != nil {
			return err
		}
		fmt.Fprintf(out, "cluster %s: removed (containers, network, volumes)\n", o.name)
		return nil
	case "":
		fs.Usage()
		return errors.New("no verb: up, status, demo or down")
	default:
		fs.Usage()
		return fmt.Errorf("unknown verb %q: up, status, demo or down", verb)
	}
}

// up starts the cluster, saying what it does.
func up(ctx context.Context, o options, out io.Writer) (*cluster.Cluster, error) {
	fmt.Fprintf(out, "cluster %s: starting 3 ZooKeeper servers, 3 brokers and Prometheus in containers\n", o.name)
	c, err := cluster.Up(ctx, cluster.Config{Name: o.name, BrokerPorts: o.ports, Prometheus: true,
		PrometheusPort: o.prometheusPort, Logf: func(f string, a ...any) { fmt.Fprintf(out, "  "+f+"\n", a...) }})
	if errors.Is(err, cluster.ErrExists) {
		return nil, fmt.Errorf("%w; `cluster status` shows it, `make cluster-down` removes it", err)
	}
	return c, err
}

// tryThis prints what a reader can do with a running cluster.
func tryThis(out io.Writer, c *cluster.Cluster) {
	b0 := c.Broker(0)
	boot := strings.Join(c.BootstrapServers(), ",")
	fmt.Fprintf(out, `
The cluster is up. Try this:
  kcat -b %[1]s -L                                     brokers, topics, leaders, ISRs
  echo hello | kcat -b %[1]s -P -t greetings           produce (the topic is created: RF 3)
  kcat -b %[1]s -C -t greetings -e                     consume
  go run ./final/cmd/admin topics describe --bootstrap-server %[1]s
  docker exec %[2]s admin cluster --bootstrap-server %[2]s:%[3]d
  go run ./final/cmd/cluster -name %[4]s status         leaders and ISRs
  docker kill %[2]s                                    kill -9 a broker, then: docker start %[2]s
`, boot, b0.Name, cluster.InternalPort, c.Name())
	if p, ok := c.Prometheus(); ok {
		fmt.Fprintf(out, "  http://%s/graph?g0.expr=kafka_server_replicamanager_underreplicatedpartitions   Prometheus\n", p.Addr)
	}
	fmt.Fprintf(out, "  make cluster-down                                    remove it all\n")
}

// status prints the brokers and every partition's leader and ISR.
func status(ctx context.Context, c *cluster.Cluster, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tADDRESS\tRUNNING")
	for _, n := range append(append(c.ZooKeepers(), c.Brokers()...), promNode(c)...) {
		running, err := c.Running(ctx, n.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\n", n.Name, n.Addr, running)
	}
	tw.Flush()
	cl, err := c.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	fmt.Fprintf(out, "\ncontroller: broker %d\n", md.Controller)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR")
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%v\n", t.Topic, p.Partition, p.Leader, p.Replicas, sorted(p.ISR))
		}
	}
	return tw.Flush()
}

func promNode(c *cluster.Cluster) []cluster.Node {
	if p, ok := c.Prometheus(); ok {
		return []cluster.Node{p}
	}
	return nil
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
