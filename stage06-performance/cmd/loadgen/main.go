// Command loadgen is a Produce load that costs its machine almost nothing:
// pre-encoded requests of one uncompressed batch each (package ceiling),
// pipelined over a few connections to one broker, with the output of
// Kafka's kafka-producer-perf-test:
//
//	loadgen -addr 127.0.0.1:9092 -topic load -partitions 4 -conns 4 -inflight 8 \
//	        -batch 1000 -record-size 100 -duration 30s -acks 1
//
// It connects to -addr and nowhere else (no metadata-driven discovery):
// every partition of the topic must be led by that broker. With -create
// (the default) it creates the topic there if it does not exist, with
// -partitions and -replication-factor; the broker must then be the
// controller, as a single broker is. A progress line is printed every
// -reporting-interval, and the run lasts a whole number of them (at
// least -duration). At the end it checks with ListOffsets that the
// partitions grew by the records acknowledged: the load generator reads
// only the responses' correlation ids, not their error codes.
//
// Records and MB are counted as Kafka's tool counts them: records of
// -record-size bytes, MB = 1024 × 1024 bytes of values. Latency is a
// request's, from its write to its response, and every record of the
// request shares it; with -inflight > 1 it includes the wait behind the
// requests before it on the connection.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage06-performance/ceiling"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	addr       string
	topic      string
	partitions int
	rf         int
	create     bool
	conns      int
	inFlight   int
	batch      int
	recordSize int
	duration   time.Duration
	interval   time.Duration
	acks       int16
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:9092", "the broker's host:port; the only address connected to")
	fs.StringVar(&o.topic, "topic", "loadgen", "topic to produce to")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions 0..n-1 get one request each in turn")
	fs.IntVar(&o.rf, "replication-factor", 1, "replication factor, if -create creates the topic")
	fs.BoolVar(&o.create, "create", true, "create the topic at -addr if it does not exist")
	fs.IntVar(&o.conns, "conns", 4, "connections")
	fs.IntVar(&o.inFlight, "inflight", 8, "requests outstanding per connection (max.in.flight.requests.per.connection)")
	fs.IntVar(&o.batch, "batch", 1000, "records per batch; one batch per request")
	fs.IntVar(&o.recordSize, "record-size", 100, "bytes of each record's value")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long to run, rounded up to whole reporting intervals")
	fs.DurationVar(&o.interval, "reporting-interval", 5*time.Second, "time between progress lines")
	acks := fs.String("acks", "1", "1 (the leader appended) or all (-1: every in-sync replica has it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *acks {
	case "1":
		o.acks = 1
	case "all", "-1":
		o.acks = -1
	default:
		return o, fmt.Errorf("-acks %s: 1 or all (acks=0 gets no response to pace the load)", *acks)
	}
	if o.partitions < 1 || o.conns < 1 || o.inFlight < 1 || o.batch < 1 || o.recordSize < 0 || o.duration <= 0 || o.interval <= 0 {
		return o, errors.New("-partitions, -conns, -inflight, -batch, -duration and -reporting-interval must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	p, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: o.topic, Partitions: int32(o.partitions),
		Records: o.batch, RecordSize: o.recordSize, Acks: o.acks})
	if err != nil {
		return err
	}
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	admin, err := protocol.Dial(setup, o.addr, "loadgen-admin")
	if err != nil {
		return err
	}
	defer admin.Close()
	if o.create {
		if err := createTopic(setup, admin, o); err != nil {
			return err
		}
	}
	before, err := waitForLeadership(setup, admin, o)
	if err != nil {
		return err
	}
	load, err := loadgen.Dial(ctx, loadgen.Config{Addr: o.addr, Conns: o.conns, InFlight: o.inFlight,
		Duration: o.interval, AppendRequest: p.AppendRequest})
	if err != nil {
		return err
	}
	defer load.Close()

	perRequest := float64(p.Records())
	mb := func(r loadgen.Result) float64 {
		return float64(r.Requests) * perRequest * float64(o.recordSize) / (1 << 20)
	}
	var total loadgen.Result
	for total.Elapsed < o.duration && ctx.Err() == nil {
		w, err := load.Run(ctx)
		total = total.Merge(w)
		if err != nil && ctx.Err() == nil {
			return err
		}
		secs := w.Elapsed.Seconds()
		fmt.Fprintf(out, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
			int64(float64(w.Requests)*perRequest), float64(w.Requests)*perRequest/secs, mb(w)/secs, ms(w.Mean), ms(w.Max))
	}
	secs := total.Elapsed.Seconds()
	fmt.Fprintf(out, "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.0f ms 50th, %.0f ms 95th, %.0f ms 99th, %.0f ms 99.9th.\n",
		int64(float64(total.Requests)*perRequest), float64(total.Requests)*perRequest/secs, mb(total)/secs,
		ms(total.Mean), ms(total.Max), ms(total.Quantile(0.50)), ms(total.Quantile(0.95)), ms(total.Quantile(0.99)), ms(total.Quantile(0.999)))

	check, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after, err := ceiling.EndOffsets(check, admin, o.topic, int32(o.partitions))
	if err != nil {
		return err
	}
	acked, appended := total.Requests*int64(p.Records()), ceiling.Appended(before, after)
	switch {
	case appended < acked:
		return fmt.Errorf("%d records acknowledged but %d appended: the broker answered some requests with an error", acked, appended)
	case appended > acked:
		fmt.Fprintf(out, "%d records appended, %d more than acknowledged (an interrupted request, or another producer).\n", appended, appended-acked)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// createTopic creates the topic at the broker, which must be the
// controller; a topic that exists is left as it is.
func createTopic(ctx context.Context, c *protocol.Client, o options) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = o.topic, int32(o.partitions), int16(o.rf)
	req.Topics = append(req.Topics, t)
	resp, err := c.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", o.topic, err)
	}
	for _, rt := range resp.(*kmsg.CreateTopicsResponse).Topics {
		switch err := kerr.ErrorForCode(rt.ErrorCode); {
		case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		case errors.Is(err, kerr.NotController):
			return fmt.Errorf("create topic %s: %s is not the controller: create it there, or with kafka-topics, and run with -create=false", o.topic, o.addr)
		default:
			return fmt.Errorf("create topic %s: %w", o.topic, err)
		}
	}
	return nil
}

// waitForLeadership polls until the broker leads every partition (its
// ListOffsets answers for all) and returns their end offsets. A topic
// just created may take a moment to reach the broker; one that was not
// created here and is unknown is an error at once.
func waitForLeadership(ctx context.Context, c *protocol.Client, o options) ([]int64, error) {
	for {
		offsets, err := ceiling.EndOffsets(ctx, c, o.topic, int32(o.partitions))
		if err == nil {
			return offsets, nil
		}
		if !o.create && errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("%w (every partition of %s must be led by %s: the load goes nowhere else)", err, o.topic, o.addr)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (every partition of %s must be led by %s: the load goes nowhere else)", err, o.topic, o.addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
