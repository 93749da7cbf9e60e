// Command consumer-perf reads records as fast as it can and prints what
// Kafka's kafka-consumer-perf-test prints, with our consumer or
// franz-go's, against any Kafka-protocol broker:
//
//	consumer-perf --bootstrap-server 127.0.0.1:9092 --topic t --messages 1000000 \
//	    [--group perf-consumer-1234] [--timeout 10000] [--reporting-interval 5000] \
//	    [--fetch-size 1048576] [--from-latest] [-client ours|franz-go] [--fetch-ahead 4] \
//	    [--cpuprofile file]
//
// It joins the group (Kafka's tool always subscribes with a group; the
// default group is perf-consumer-<random>), reads from the earliest
// offset unless --from-latest, and stops after --messages records or when
// no record came for --timeout ms. Every --reporting-interval ms it
// prints a progress line; at the end, perf.ConsumerHeader and
// perf.ConsumerLine.
//
// --cpuprofile writes a CPU profile of the run (go tool pprof reads it):
// where the client's time goes. --fetch-ahead is ours alone (Kafka has no such key): how many fetch
// responses may wait for Poll (consumer.Config.BufferedFetches), the depth
// of the fetchers' run ahead of the application.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
	"github.com/kafkaworkbook/workbook/stage06-performance/perf"
)

type options struct {
	bootstrap string
	topic     string
	messages  int64
	group     string
	timeout   time.Duration // the longest wait for the next record
	interval  time.Duration // between progress lines
	fetchSize int           // max.partition.fetch.bytes
	latest    bool
	client    string
	ahead     int    // consumer.Config.BufferedFetches
	profile   string // a file for a CPU profile, "" for none
}

func main() {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap-server", "", "the brokers to bootstrap from: host:port[,host:port…] (required)")
	flag.StringVar(&o.topic, "topic", "", "the topic to consume (required)")
	flag.Int64Var(&o.messages, "messages", 0, "how many records to consume (required)")
	flag.StringVar(&o.group, "group", fmt.Sprintf("perf-consumer-%d", rand.IntN(100000)), "the consumer group")
	timeout := flag.Int("timeout", 10000, "stop when no record came for this many ms")
	interval := flag.Int("reporting-interval", 5000, "ms between progress lines")
	flag.IntVar(&o.fetchSize, "fetch-size", 1<<20, "max.partition.fetch.bytes")
	flag.BoolVar(&o.latest, "from-latest", false, "start at the end of the log when the group has no committed offset")
	flag.StringVar(&o.client, "client", "ours", "the consumer: ours or franz-go")
	flag.IntVar(&o.ahead, "fetch-ahead", 4, "with -client ours: fetch responses that may wait for Poll")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	o.timeout = time.Duration(*timeout) * time.Millisecond
	o.interval = time.Duration(*interval) * time.Millisecond
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consumer-perf:", err)
		os.Exit(1)
	}
}

// counters are the run's figures, written by the consuming loop and read
// by the reporter.
type counters struct {
	records atomic.Int64
	bytes   atomic.Int64 // keys and values, as Kafka's tool counts
}

// A client is one of the two consumers, reduced to what the tool needs.
type client interface {
	// poll returns the records and bytes of the next poll.
	poll(ctx context.Context) (records, bytes int64, err error)
	// assigned reports whether the first assignment arrived.
	assigned() bool
	close()
}

func run(o options, out io.Writer) error {
	if o.bootstrap == "" || o.topic == "" || o.messages <= 0 {
		flag.Usage()
		return errors.New("--bootstrap-server, --topic and --messages are required")
	}
	reset := "earliest"
	if o.latest {
		reset = "latest"
	}
	var cl client
	var err error
	switch o.client {
	case "ours":
		cl, err = newOurs(o, reset)
	case "franz-go":
		cl, err = newFranz(o, reset)
	default:
		return fmt.Errorf("-client %q: ours or franz-go", o.client)
	}
	if err != nil {
		return err
	}
	defer cl.close()
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var n counters
	start := time.Now()
	stop := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		progress(out, &n, o.interval, stop)
	}()
	var rebalance time.Duration
	last := time.Now()
	for n.records.Load() < o.messages {
		ctx, cancel := context.WithDeadline(context.Background(), last.Add(o.timeout))
		recs, bytes, err := cl.poll(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "WARNING: Exiting before consuming the expected number of messages: timeout (%d ms) exceeded.\n", o.timeout.Milliseconds())
			break
		}
		if err != nil {
			return err
		}
		if rebalance == 0 && cl.assigned() {
			rebalance = time.Since(start)
		}
		if recs > 0 {
			last = time.Now()
			n.records.Add(recs)
			n.bytes.Add(bytes)
		}
	}
	end := time.Now()
	close(stop)
	<-reported
	fmt.Fprintln(out, perf.ConsumerHeader)
	fmt.Fprintln(out, perf.ConsumerLine(start, end, n.records.Load(), n.bytes.Load(), rebalance))
	return nil
}

// progress prints a line every interval: the records and MB of the
// interval and their rates, then the totals.
func progress(out io.Writer, n *counters, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var records, bytes int64
	prev := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			r, b := n.records.Load(), n.bytes.Load()
			secs := now.Sub(prev).Seconds()
			fmt.Fprintf(out, "%d records consumed, %.1f records/sec (%.2f MB/sec), %d records in total.\n",
				r-records, float64(r-records)/secs, float64(b-bytes)/(1<<20)/secs, r)
			records, bytes, prev = r, b, now
		}
	}
}

// ours is this stage's consumer.
type ours struct{ c *consumer.Consumer }

func newOurs(o options, reset string) (*ours, error) {
	cfg, err := consumer.ParseConfig(map[string]string{
		consumer.KeyBootstrapServers:       o.bootstrap,
		consumer.KeyGroupID:                o.group,
		consumer.KeyAutoOffsetReset:        reset,
		consumer.KeyMaxPartitionFetchBytes: strconv.Itoa(o.fetchSize),
		consumer.KeyClientID:               "consumer-perf",
	})
	if err != nil {
		return nil, err
	}
	cfg.BufferedFetches = o.ahead
	c, err := consumer.New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(o.topic); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return &ours{c}, nil
}

func (c *ours) poll(ctx context.Context) (int64, int64, error) {
	recs, err := c.c.Poll(ctx)
	var bytes int64
	for i := range recs {
		bytes += int64(len(recs[i].Key) + len(recs[i].Value))
	}
	return int64(len(recs)), bytes, err
}

func (c *ours) assigned() bool { return len(c.c.Assignment()) > 0 }

func (c *ours) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.c.Close(ctx)
}

// franz is franz-go's consumer, the reference.
type franz struct {
	cl   *kgo.Client
	seen atomic.Bool
}

func newFranz(o options, reset string) (*franz, error) {
	f := &franz{}
	start := kgo.NewOffset().AtStart()
	if reset == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...), kgo.ClientID("consumer-perf"),
		kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(o.topic), kgo.ConsumeResetOffset(start),
		kgo.FetchMaxPartitionBytes(int32(o.fetchSize)),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { f.seen.Store(true) }))
	if err != nil {
		return nil, err
	}
	f.cl = cl
	return f, nil
}

func (f *franz) poll(ctx context.Context) (int64, int64, error) {
	fs := f.cl.PollFetches(ctx)
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	if err := fs.Err0(); err != nil {
		return 0, 0, err
	}
	var records, bytes int64
	fs.EachRecord(func(r *kgo.Record) {
		records++
		bytes += int64(len(r.Key) + len(r.Value))
	})
	return records, bytes, nil
}

func (f *franz) assigned() bool { return f.seen.Load() }

func (f *franz) close() { f.cl.Close() }
