// Command producer-perf measures a producer as Kafka's
// kafka-producer-perf-test does, with the same flags and the same output,
// driving either this stage's producer or franz-go's against any
// Kafka-protocol broker:
//
//	producer-perf --topic T --num-records N --record-size S --throughput R
//	              [--producer-props k=v ...] [--bootstrap-server host:port]
//	              [-client ours|franz-go]
//
// --throughput -1 produces as fast as the producer takes records;
// otherwise it paces to R records per second. --producer-props takes
// Kafka's producer keys (bootstrap.servers among them); for franz-go,
// acks, linger.ms, batch.size, compression.type, enable.idempotence and
// client.id are translated to its options. A progress line every five
// seconds, and a summary with percentiles at the end; latency is from
// Produce to the callback.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/perf"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "producer-perf:", err)
		os.Exit(1)
	}
}

// options are the command line, parsed.
type options struct {
	topic      string
	records    int64
	size       int
	throughput float64 // records per second; <= 0: unlimited
	props      map[string]string
	client     string
	interval   time.Duration
}

// parseArgs reads Kafka's flags: --name value or --name=value, and
// --producer-props followed by any number of key=value words.
func parseArgs(args []string) (options, error) {
	o := options{records: -1, size: -1, throughput: -1, props: map[string]string{}, client: "ours", interval: 5 * time.Second}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		next := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", args[i])
			}
			i++
			return args[i], nil
		}
		var err error
		var v string
		switch name {
		case "producer-props":
			words := []string{}
			if hasValue {
				words = append(words, value)
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				words = append(words, args[i])
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return o, fmt.Errorf("--producer-props: %q is not key=value", w)
				}
				o.props[k] = v
			}
			continue
		case "topic", "num-records", "record-size", "throughput", "bootstrap-server", "client", "reporting-interval":
			if v, err = next(); err != nil {
				return o, err
			}
		default:
			return o, fmt.Errorf("unknown flag %s", args[i])
		}
		switch name {
		case "topic":
			o.topic = v
		case "num-records":
			o.records, err = strconv.ParseInt(v, 10, 64)
		case "record-size":
			o.size, err = strconv.Atoi(v)
		case "throughput":
			o.throughput, err = strconv.ParseFloat(v, 64)
		case "bootstrap-server":
			o.props["bootstrap.servers"] = v
		case "client":
			o.client = v
		case "reporting-interval":
			var ms int
			ms, err = strconv.Atoi(v)
			o.interval = time.Duration(ms) * time.Millisecond
		}
		if err != nil {
			return o, fmt.Errorf("--%s %q: %w", name, v, err)
		}
	}
	switch {
	case o.topic == "":
		return o, errors.New("--topic is required")
	case o.records < 0:
		return o, errors.New("--num-records is required")
	case o.size < 0:
		return o, errors.New("--record-size is required")
	case o.props["bootstrap.servers"] == "":
		return o, errors.New("--bootstrap-server (or bootstrap.servers in --producer-props) is required")
	case o.client != "ours" && o.client != "franz-go":
		return o, fmt.Errorf("-client %q: ours or franz-go", o.client)
	}
	return o, nil
}

// A sender is one of the two producers; its callbacks report each
// record's send time, size and error.
type sender interface {
	send(ctx context.Context, value []byte) error
	flush(ctx context.Context) error
	close()
}

func run(args []string, out io.Writer) error {
	o, err := parseArgs(args)
	if err != nil {
		return err
	}
	w := perf.NewWindow()
	var failed atomic.Int64
	var firstErr atomic.Pointer[error]
	onDone := func(sent time.Time, size int, err error) {
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, &err)
			return
		}
		w.Record(time.Since(sent), size)
	}
	var s sender
	if o.client == "ours" {
		s, err = newOurs(o, onDone)
	} else {
		s, err = newFranz(o, onDone)
	}
	if err != nil {
		return err
	}
	defer s.close()

	payload := make([]byte, o.size) // Kafka's tool: random uppercase letters
	for i := range payload {
		payload[i] = byte('A' + rand.IntN(26))
	}
	stop := make(chan struct{})
	reported := make(chan struct{})
	go func() { perf.Report(out, w, o.interval, stop); close(reported) }()
	ctx := context.Background()
	start := time.Now()
	for i := range o.records {
		if o.throughput > 0 { // Kafka's ThroughputThrottler: wait when ahead of the target
			if ahead := time.Duration(float64(i)/o.throughput*float64(time.Second)) - time.Since(start); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
		}
		if err := s.send(ctx, payload); err != nil {
			return err
		}
	}
	err = s.flush(ctx)
	close(stop)
	<-reported
	fmt.Fprintln(out, perf.SummaryLine(w.Total()))
	if err != nil {
		return err
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d records failed, the first with: %w", n, *firstErr.Load())
	}
	return nil
}

// ours drives this stage's producer.
type ours struct {
	p     *producer.Producer
	topic string
	cb    func(*producer.Record, error)
}

func newOurs(o options, done func(time.Time, int, error)) (*ours, error) {
	cfg, err := producer.ParseConfig(o.props)
	if err != nil {
		return nil, err
	}
	p, err := producer.New(cfg, producer.Options{})
	if err != nil {
		return nil, err
	}
	return &ours{p: p, topic: o.topic, cb: func(r *producer.Record, err error) { done(r.Timestamp, len(r.Value), err) }}, nil
}

func (s *ours) send(ctx context.Context, value []byte) error {
	return s.p.Produce(ctx, &producer.Record{Topic: s.topic, Value: value, Timestamp: time.Now()}, s.cb)
}

func (s *ours) flush(ctx context.Context) error { return s.p.Flush(ctx) }
func (s *ours) close()                          { s.p.Close(context.Background()) }

// franz drives franz-go's kgo producer.
type franz struct {
	cl      *kgo.Client
	topic   string
	promise func(*kgo.Record, error)
}

func newFranz(o options, done func(time.Time, int, error)) (*franz, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(o.props["bootstrap.servers"], ",")...), kgo.DefaultProduceTopic(o.topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.AllowAutoTopicCreation()} // as Kafka's producer
	for k, v := range o.props {
		switch k {
		case "bootstrap.servers":
		case "acks":
			switch v {
			case "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			default:
				return nil, fmt.Errorf("acks=%q", v)
			}
		case "linger.ms":
			ms, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("linger.ms=%q: %w", v, err)
			}
			opts = append(opts, kgo.ProducerLinger(time.Duration(ms)*time.Millisecond))
		case "batch.size":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("batch.size=%q: %w", v, err)
			}
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)))
		case "compression.type":
			codec := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
				"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
			c, ok := codec[v]
			if !ok {
				return nil, fmt.Errorf("compression.type=%q", v)
			}
			opts = append(opts, kgo.ProducerBatchCompression(c))
		case "enable.idempotence":
			if v == "false" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
		case "client.id":
			opts = append(opts, kgo.ClientID(v))
		default:
			return nil, fmt.Errorf("%s: not translated for franz-go", k)
		}
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &franz{cl: cl, topic: o.topic, promise: func(r *kgo.Record, err error) { done(r.Timestamp, len(r.Value), err) }}, nil
}

// send sets the record's timestamp, as for ours: the callback measures the
// latency from it (franz-go keeps a timestamp it is given).
func (s *franz) send(ctx context.Context, value []byte) error {
	s.cl.Produce(ctx, &kgo.Record{Value: value, Timestamp: time.Now()}, s.promise)
	return nil
}

func (s *franz) flush(ctx context.Context) error { return s.cl.Flush(ctx) }
func (s *franz) close()                          { s.cl.Close() }
