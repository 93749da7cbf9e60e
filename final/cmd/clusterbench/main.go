// Command clusterbench measures the speed of the final broker's
// containerized cluster (final/cluster: three ZooKeeper servers and three
// brokers in Docker containers, the clients in this process on the
// brokers' published 127.0.0.1 ports), for issue 15's two aims:
//
//   - Throughput: one producer, 100-byte records, a topic with
//     replication factor 3 and min.insync.replicas=2, acks=all, as fast as
//     the producer takes records; with the course's producer
//     (stage06-performance/producer) and with franz-go's. The aim is
//     421,823 records/s, Kafka's 2014 figure for one producer with three-way
//     synchronous replication on three 6-core machines.
//   - Latency: a producer at a fixed 10,000 records/s and a consumer in
//     this process reading the same RF3 topic; from the moment a record is
//     handed to the producer to the moment the consumer's poll returns
//     it. The aim is a p99 of 5 ms.
//
// Each has a baseline measured in the same run on the same cluster: the
// same clients on a replication-factor-1 topic with acks=1. Their ratio
// is what replication costs here, and it holds better than either figure
// from one run to the next on a shared machine.
//
// Usage:
//
//	clusterbench [flags]
//	  --brokers containers|processes  where the brokers run (containers)
//	  --cluster NAME            measure a running cluster (else start and remove one, --name)
//	  --down                    remove the cluster --name names (a killed run's) and exit
//	  --rounds N                run every measurement N times, interleaved (1)
//	  --warmup D, --duration D  each measurement's warm-up and measured window (5s, 15s)
//	  --partitions N            partitions of each topic (6)
//	  --record-size N           bytes of each record's value (100)
//	  --rate R                  records per second of the latency runs (10000)
//	  --min-sleep D             pace them as Kafka's ThroughputThrottler: sleep only when D ahead (2ms); 0: before every record
//	  --only throughput|latency one kind of measurement
//	  --baseline=false          skip the RF1 acks=1 baselines
//	  --cdf FILE                append the latency distributions to FILE (stage06's cmd/plots draws them)
//	  --producer-prop key=value one of Kafka's producer keys for ours (repeatable)
//
// Without --cluster it starts a cluster of its own (named --name), and
// removes it at the end, or at Ctrl-C; with --cluster it measures the
// running cluster of that name (`make cluster` starts "kafkaworkbook")
// and leaves it up. Each measurement gets a new topic, deleted after it,
// and a warm-up that is not measured. With --rounds N every measurement
// runs N times, interleaved: the tables give the medians (throughput) or
// the merged histograms (latency). --producer-prop is there to try what
// the tables suggest (linger.ms=5, max.in.flight.requests.per.connection=1).
//
// With --brokers processes the ZooKeeper ensemble still runs in
// containers, but the three brokers run as processes on this machine,
// listening on 127.0.0.1 themselves (the same final broker, built with go
// build, and the same settings): no Docker proxy, bridge or network
// namespace between the clients and the brokers, nor between the brokers.
// The two runs side by side say what the brokers cost and what Docker
// adds.
//
// A measurement that fails (a record not acknowledged within
// delivery.timeout.ms, or not read back) writes every broker's view of its
// topic and the brokers' last log lines to a file in the temp directory,
// whose name it prints, before the topic and the cluster go.
//
// It prints three tables: throughput, latency, and where the CPU went
// during each measured window (this process, the brokers, ZooKeeper,
// Docker's userland proxies, the rest of the machine, and what was idle),
// which says what the figures are bound by.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// aims are issue 15's.
const (
	aimRecordsPerSec = 421823 // Kafka 2014: one producer, 3× synchronous replication, 100-byte records
	aimP99           = 5 * time.Millisecond
)

// stderr takes the progress lines and the clients' warnings; stdout
// the tables.
var stderr io.Writer = os.Stderr

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	attach     string // --cluster: measure this running cluster
	brokers    string // --brokers: containers or processes
	name       string // --name: the cluster to start otherwise
	down       bool   // --down: remove the cluster called name, and stop
	rounds     int
	w          window
	partitions int
	size       int
	rate       float64
	only       string
	baseline   bool              // measure each setup's RF1 acks=1 baseline too
	cdf        string            // --cdf: append the latency distributions to this file
	brokerEnv  []string          // --broker-env: KEY=value for the brokers' processes
	props      map[string]string // --producer-prop: Kafka keys for ours
}

func parseArgs(args []string) (options, error) {
	o := options{props: map[string]string{}}
	fs := flag.NewFlagSet("clusterbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.brokers, "brokers", "containers", "where the brokers run: containers, or processes on this machine (ZooKeeper in containers either way)")
	fs.StringVar(&o.attach, "cluster", "", "measure the running cluster of this name (make cluster's is kafkaworkbook) instead of starting one")
	fs.StringVar(&o.name, "name", "clusterbench", "the name of the cluster to start and remove")
	fs.BoolVar(&o.down, "down", false, "remove the cluster called --name (left by a killed run) and exit")
	fs.IntVar(&o.rounds, "rounds", 1, "run every measurement this many times, interleaved")
	fs.DurationVar(&o.w.warmup, "warmup", 5*time.Second, "each measurement's warm-up, not measured")
	fs.DurationVar(&o.w.length, "duration", 15*time.Second, "each measurement's measured window")
	// Six partitions, as Kafka's 2014 benchmark: two leaders on each of
	// the three brokers, so every broker leads and follows and the
	// producer's requests go to all three at once.
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of each topic")
	fs.IntVar(&o.size, "record-size", 100, "bytes of each record's value (at least 16: the latency run's send time and sequence number)")
	fs.Float64Var(&o.rate, "rate", 10000, "records per second of the latency run")
	fs.DurationVar(&o.w.minSleep, "min-sleep", 2*time.Millisecond, "the latency runs' pacing: sleep only when this far ahead of the schedule (Kafka's ThroughputThrottler: 2ms); 0 sleeps before every record")
	fs.StringVar(&o.only, "only", "", "run only the throughput or the latency measurements")
	fs.StringVar(&o.cdf, "cdf", "", "append each latency run's distribution (quantiles, ms) to this file, for cmd/plots -kind latencycdf")
	fs.BoolVar(&o.baseline, "baseline", true, "measure the RF1 acks=1 baselines too (the ratios' denominators)")
	fs.Func("broker-env", "with --brokers processes, a KEY=value for the brokers' environment, such as GOMAXPROCS=1 (repeat it)", func(kv string) error {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("%q is not KEY=value", kv)
		}
		o.brokerEnv = append(o.brokerEnv, kv)
		return nil
	})
	fs.Func("producer-prop", "a Kafka producer key=value for ours and ours-1MB, over the defaults (repeat it)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		o.props[k] = v
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.rounds < 1 || o.partitions < 1 || o.rate <= 0 || o.w.length <= 0 || o.w.warmup < 0:
		return o, errors.New("--rounds, --partitions, --rate and --duration must be positive, --warmup not negative")
	case o.size < 16:
		return o, errors.New("--record-size must be at least 16")
	case o.brokers != "containers" && o.brokers != "processes":
		return o, fmt.Errorf("--brokers %q: containers or processes", o.brokers)
	case o.brokers == "processes" && o.attach != "":
		return o, errors.New("--cluster measures a cluster in containers; --brokers processes starts its own")
	case o.only != "" && o.only != "throughput" && o.only != "latency":
		return o, fmt.Errorf("--only %q: throughput or latency", o.only)
	}
	return o, nil
}

// A setup is a topic's replication and the producers' acks.
type setup struct {
	name string
	rf   int
	acks string
}

// setups: the measured one first, then its baseline.
var setups = []setup{{"RF3 acks=all", 3, "all"}, {"RF1 acks=1", 1, "1"}}

// setups are the ones measured: without --baseline, the first only.
func (b *bench) setups() []setup {
	if !b.o.baseline {
		return setups[:1]
	}
	return setups
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseArgs(args)
	if err != nil {
		return err
	}
	if o.down {
		return cluster.Down(ctx, o.name)
	}
	var c *cluster.Cluster
	if o.attach != "" {
		if c, err = cluster.Attach(ctx, o.attach); err != nil {
			return err
		}
	} else {
		what := "3 ZooKeeper, 3 brokers"
		if o.brokers == "processes" {
			what = "3 ZooKeeper; the brokers as processes"
		}
		fmt.Fprintf(stderr, "starting cluster %s (%s)\n", o.name, what)
		c, err = cluster.Up(ctx, cluster.Config{Name: o.name, ZooKeeperOnly: o.brokers == "processes"})
		if errors.Is(err, cluster.ErrExists) {
			// Not ours to remove: another clusterbench may be measuring it.
			return fmt.Errorf("%w; if no other clusterbench runs, `clusterbench --down` removes it", err)
		}
		// Down runs even when Up failed half-way or the run was
		// interrupted: Up removes what it started only on its own
		// errors, not on a cancelled context after it returned.
		defer func() {
			fmt.Fprintf(stderr, "removing cluster %s\n", o.name)
			if err := cluster.Down(context.Background(), o.name); err != nil {
				fmt.Fprintln(stderr, err)
			}
		}()
		if err != nil {
			return err
		}
	}
	var procs *processes
	if o.brokers == "processes" {
		if procs, err = startProcesses(ctx, c.ZooKeeperConnect(), 3, o.brokerEnv); err != nil {
			return err
		}
		defer procs.stop()
	}
	b, err := newBench(ctx, c, procs, o)
	if err != nil {
		return err
	}
	defer b.adm.Close()
	printMachine(out, c, procs)
	if o.only != "latency" {
		if err := b.throughputs(ctx, out); err != nil {
			return err
		}
	}
	if o.only != "throughput" {
		if err := b.latencies(ctx, out); err != nil {
			return err
		}
	}
	b.printCPU(out)
	return nil
}

// bench holds a run's cluster, options and results.
type bench struct {
	o       options
	c       *cluster.Cluster // the containers (ZooKeeper's only, with procs)
	procs   *processes       // the brokers, when they run as processes
	servers []string
	adm     *kadm.Client
	meter   *cpuMeter
	topics  int // topics made so far, for unique names

	cpuRows []string            // the CPU table's rows, in the order measured
	cpu     map[string][]cpuUse // by row
}

// newBench measures c's brokers, or procs' when they run as processes.
func newBench(ctx context.Context, c *cluster.Cluster, procs *processes, o options) (*bench, error) {
	meter, err := newCPUMeter(ctx, c, procs)
	if err != nil {
		return nil, err
	}
	servers := c.BootstrapServers()
	if procs != nil {
		servers = procs.addrs
	}
	cl, err := c.Client(kgo.SeedBrokers(servers...))
	if err != nil {
		return nil, err
	}
	return &bench{o: o, c: c, procs: procs, servers: servers, adm: kadm.NewClient(cl), meter: meter, cpu: map[string][]cpuUse{}}, nil
}

// throughputs runs every producer against every setup, rounds times,
// and prints the table.
func (b *bench) throughputs(ctx context.Context, out io.Writer) error {
	results := map[string][]float64{} // records/s by setup and producer
	key := func(s setup, p string) string { return s.name + " " + p }
	for round := range b.o.rounds {
		for _, p := range producerNames {
			for _, s := range b.setups() {
				topic, err := b.newTopic(ctx, s.rf)
				if err != nil {
					return err
				}
				newP := func(ack ackFunc) (producerClient, error) {
					return newProducer(p, b.servers, topic, s.acks, b.o.props, ack)
				}
				res, err := measureThroughput(ctx, newP, b.o.size, b.o.w, b.meter)
				if err != nil {
					b.diagnose(topic, err)
				}
				b.deleteTopic(topic)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", s.name, p, err)
				}
				fmt.Fprintf(stderr, "round %d/%d: %s, %s: %.0f records/s\n", round+1, b.o.rounds, s.name, p, res.perSec())
				results[key(s, p)] = append(results[key(s, p)], res.perSec())
				b.addCPU("throughput "+key(s, p), res.cpu)
			}
		}
	}

	fmt.Fprintf(out, "\nThroughput: one producer as fast as it goes, %d-byte records, %d partitions; median of %d round(s) of %s after %s of warm-up\n",
		b.o.size, b.o.partitions, b.o.rounds, b.o.w.length, b.o.w.warmup)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tproducer\trecords/s\tMB/s\t× its RF1 acks=1\t× franz-go\t× aim (421,823)\t")
	for _, s := range b.setups() {
		for _, p := range producerNames {
			r := median(results[key(s, p)])
			vsBase, vsAim := "", ""
			if s.rf != 1 {
				vsAim = fmt.Sprintf("%.2f", r/aimRecordsPerSec)
				if b.o.baseline {
					vsBase = fmt.Sprintf("%.2f", r/median(results[key(setups[1], p)]))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t%.2f\t%s\t\n", s.name, p, r, r*float64(b.o.size)/(1<<20),
				vsBase, r/median(results[key(s, "franz-go")]), vsAim)
		}
	}
	return tw.Flush()
}

// latencies runs each producer with its consumer at the fixed rate, on
// an RF3 acks=all topic and on its RF1 acks=1 baseline, rounds times, and
// prints the table.
func (b *bench) latencies(ctx context.Context, out io.Writer) error {
	pairs := []string{"ours", "franz-go"} // producer and consumer of the same client
	results := map[string]*latency{}      // by setup and pair
	key := func(s setup, p string) string { return s.name + " " + p }
	for round := range b.o.rounds {
		for _, p := range pairs {
			for _, s := range b.setups() {
				topic, err := b.newTopic(ctx, s.rf)
				if err != nil {
					return err
				}
				newP := func(ack ackFunc) (producerClient, error) {
					return newProducer(p, b.servers, topic, s.acks, b.o.props, ack)
				}
				newC := func() (consumerClient, error) { return newConsumer(ctx, p, b.servers, topic, b.o.partitions) }
				res, err := measureLatency(ctx, newP, newC, b.o.size, b.o.rate, b.o.w, b.meter)
				if err != nil {
					b.diagnose(topic, err)
				}
				b.deleteTopic(topic)
				if err != nil {
					return fmt.Errorf("latency, %s, %s: %w", s.name, p, err)
				}
				fmt.Fprintf(stderr, "round %d/%d: latency, %s, %s: p99 %s at %.0f records/s\n", round+1, b.o.rounds, s.name, p, res.e2e.Quantile(0.99), res.rate)
				b.addCPU("latency "+key(s, p), res.cpu)
				if all := results[key(s, p)]; all == nil {
					results[key(s, p)] = &res
				} else { // merge the rounds
					all.e2e.Merge(&res.e2e)
					all.ack.Merge(&res.ack)
					all.rate = (all.rate*float64(round) + res.rate) / float64(round+1)
					all.acked += res.acked
					all.consumed += res.consumed
					all.duplicates += res.duplicates
				}
			}
		}
	}

	if b.o.cdf != "" {
		if err := b.writeCDF(results, pairs); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nLatency: %.0f records/s for %s after %s of warm-up, %d round(s) merged; from the Produce call to the consumer's poll (end to end) and to the acknowledgement (ack); ms\n",
		b.o.rate, b.o.w.length, b.o.w.warmup, b.o.rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tproducer+consumer\trecords/s\trecords\tp50\tp99\tp99.9\tmax\tack p50\tack p99\tp99 × its RF1 acks=1\tp99 × aim (5 ms)\t")
	for _, s := range b.setups() {
		for _, p := range pairs {
			r := results[key(s, p)]
			p99 := r.e2e.Quantile(0.99)
			vsBase, vsAim := "", ""
			if s.rf != 1 {
				vsAim = fmt.Sprintf("%.2f", float64(p99)/float64(aimP99))
				if b.o.baseline {
					vsBase = fmt.Sprintf("%.2f", float64(p99)/float64(results[key(setups[1], p)].e2e.Quantile(0.99)))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", s.name, p, r.rate, r.consumed,
				ms(r.e2e.Quantile(0.5)), ms(p99), ms(r.e2e.Quantile(0.999)), ms(r.e2e.Max()),
				ms(r.ack.Quantile(0.5)), ms(r.ack.Quantile(0.99)), vsBase, vsAim)
		}
	}
	return tw.Flush()
}

// writeCDF appends the latency runs' distributions to o.cdf, a line per
// quantile: where the brokers ran, the setup, the clients, e2e or ack,
// the quantile and its latency in ms, tab-separated (stage06's cmd/plots
// -kind latencycdf reads them).
func (b *bench) writeCDF(results map[string]*latency, pairs []string) error {
	f, err := os.OpenFile(b.o.cdf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	var qs []float64
	for i := 1; i < 100; i++ {
		qs = append(qs, float64(i)/100)
	}
	qs = append(qs, 0.995, 0.999, 0.9995, 0.9999)
	pace := "kafka"
	if b.o.w.minSleep == 0 {
		pace = "every-record"
	}
	for _, s := range b.setups() {
		for _, p := range pairs {
			r := results[s.name+" "+p]
			for _, kind := range []string{"e2e", "ack"} {
				h := &r.e2e
				if kind == "ack" {
					h = &r.ack
				}
				for _, q := range qs {
					fmt.Fprintf(f, "%s\t%s\t%s\t%s\t%s\t%g\t%.4f\n", b.o.brokers, pace, s.name, p, kind, q, ms(h.Quantile(q)))
				}
			}
		}
	}
	return f.Close()
}

func (b *bench) addCPU(row string, u cpuUse) {
	if _, ok := b.cpu[row]; !ok {
		b.cpuRows = append(b.cpuRows, row)
	}
	b.cpu[row] = append(b.cpu[row], u)
}

// printCPU prints the CPU table: the cores each part kept busy, on
// average over each measured window and over the rounds.
func (b *bench) printCPU(out io.Writer) {
	if b.meter.off != nil {
		fmt.Fprintf(out, "\nCPU: not measured (%v)\n", b.meter.off)
		return
	}
	fmt.Fprintf(out, "\nCPU during the measured windows: cores busy on average (this machine has %d), mean of the rounds\n", runtime.NumCPU())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\t"+strings.Join(cpuGroups, "\t")+"\tidle\t")
	for _, row := range b.cpuRows {
		fmt.Fprintf(tw, "%s\t", row)
		for _, g := range append(slices.Clone(cpuGroups), "idle") {
			var sum float64
			n := 0
			for _, u := range b.cpu[row] {
				if u.cores == nil {
					continue
				}
				n++
				if g == "idle" {
					sum += u.idle
				} else {
					sum += u.cores[g]
				}
			}
			if n == 0 {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%.2f\t", sum/float64(n))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// newTopic creates a topic of o.partitions with replication factor rf
// (min.insync.replicas 2 for RF3, 1 for RF1), and waits until every
// partition has a leader and a full ISR.
func (b *bench) newTopic(ctx context.Context, rf int) (string, error) {
	b.topics++
	topic := fmt.Sprintf("clusterbench-%d-rf%d-%d", os.Getpid(), rf, b.topics)
	minISR := "2"
	if rf == 1 {
		minISR = "1"
	}
	res, err := b.adm.CreateTopic(ctx, int32(b.o.partitions), int16(rf), map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return "", fmt.Errorf("create topic %s: %w", topic, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		md, err := b.adm.Metadata(ctx, topic)
		if err == nil && ready(md.Topics[topic], b.o.partitions, rf) {
			return topic, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", fmt.Errorf("topic %s: no leader and full ISR on every partition within a minute (last error: %v)", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ready says whether t has n partitions, each with a leader and rf
// replicas in its ISR.
func ready(t kadm.TopicDetail, n, rf int) bool {
	if t.Err != nil || len(t.Partitions) != n {
		return false
	}
	for _, p := range t.Partitions {
		if p.Err != nil || p.Leader < 0 || len(p.ISR) != rf {
			return false
		}
	}
	return true
}

// deleteTopic deletes a measured topic, so that the next measurement
// does not share the disk and the page cache with gigabytes nobody reads.
func (b *bench) deleteTopic(topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.adm.DeleteTopics(ctx, topic); err != nil {
		fmt.Fprintf(stderr, "delete topic %s: %v\n", topic, err)
	}
}

// printMachine says what was measured where: the figures mean little
// without it.
func printMachine(out io.Writer, c *cluster.Cluster, procs *processes) {
	fmt.Fprintf(out, "clusterbench %s\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(out, "date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(out, "machine: %d CPUs (%s), %s; %s\n", runtime.NumCPU(), cpuModel(), loadAverage(), runtime.Version())
	if procs != nil {
		fmt.Fprintf(out, "cluster %s: %d ZooKeeper in containers, %d brokers as processes on this machine; PLAINTEXT on %s\n",
			c.Name(), len(c.ZooKeepers()), len(procs.addrs), strings.Join(procs.addrs, ", "))
		return
	}
	fmt.Fprintf(out, "cluster %s: %d ZooKeeper, %d brokers in containers; PLAINTEXT on %s\n",
		c.Name(), len(c.ZooKeepers()), len(c.Brokers()), strings.Join(c.BootstrapServers(), ", "))
}

// cpuModel is /proc/cpuinfo's first model name.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown model"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

// loadAverage is /proc/loadavg's three load averages, before the run: on
// a shared machine, what else was running.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return "load average " + strings.Join(f[:3], " ")
	}
	return "load average unknown"
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
