package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// The producers under test, by the name the tables give them:
//
//   - ours: the course's producer (stage06-performance/producer) with
//     Kafka's defaults: batch.size 16 KiB, linger.ms 0, five requests in
//     flight, idempotence with acks=all;
//   - ours-1MB: the same with batch.size 1 MiB, franz-go's batch limit, so
//     that both may build batches as big (chapter 6, §2.2.1, found that
//     the batch size decides RF3 acks=all);
//   - franz-go: kgo with its defaults but two, set as Kafka's producer
//     has them: no compression (kgo's default is snappy) and linger.ms 0
//     (kgo's default is 10 ms, which would be most of the latency run's
//     p50).
var producerNames = []string{"ours", "ours-1MB", "franz-go"}

// A producerClient is one producer, reduced to what a measurement needs.
type producerClient interface {
	// produce hands value to the producer, which may keep it until the
	// record is acknowledged (the caller does not change it). It
	// blocks only while the producer's buffer is full.
	produce(ctx context.Context, value []byte) error
	flush(ctx context.Context) error
	close()
}

// ackFunc hears each record once it is acknowledged or has failed, on
// the producer's own goroutines: it must be quick and safe for
// concurrent use.
type ackFunc func(value []byte, err error)

// newProducer starts the producer called name against servers, for
// topic, with acks ("all" or "1"); ours takes extra, Kafka's producer
// keys, over the rest.
func newProducer(name string, servers []string, topic, acks string, extra map[string]string, onAck ackFunc) (producerClient, error) {
	switch name {
	case "ours", "ours-1MB":
		props := map[string]string{"bootstrap.servers": strings.Join(servers, ","), "acks": acks}
		if name == "ours-1MB" {
			props["batch.size"] = strconv.Itoa(1 << 20)
		}
		maps.Copy(props, extra)
		cfg, err := producer.ParseConfig(props)
		if err != nil {
			return nil, err
		}
		p, err := producer.New(cfg, producer.Options{Logger: quietLogger()})
		if err != nil {
			return nil, err
		}
		return &ourProducer{p: p, topic: topic, cb: func(r *producer.Record, err error) { onAck(r.Value, err) }}, nil
	case "franz-go":
		opts := []kgo.Opt{kgo.SeedBrokers(servers...),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0)}
		if acks == "1" {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		} else {
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		return &franzProducer{cl: cl, topic: topic, promise: func(r *kgo.Record, err error) { onAck(r.Value, err) }}, nil
	}
	return nil, fmt.Errorf("no producer called %q (%v)", name, producerNames)
}

// ourProducer is the course's producer.
type ourProducer struct {
	p     *producer.Producer
	topic string
	cb    func(*producer.Record, error) // one callback for every record: no closure per record
}

func (o *ourProducer) produce(ctx context.Context, value []byte) error {
	// A new Record per call, as an application writes it: the producer
	// keeps it until the callback.
	return o.p.Produce(ctx, &producer.Record{Topic: o.topic, Value: value, Timestamp: time.Now()}, o.cb)
}

func (o *ourProducer) flush(ctx context.Context) error { return o.p.Flush(ctx) }
func (o *ourProducer) close()                          { o.p.Close(context.Background()) }

// franzProducer is franz-go's kgo.
type franzProducer struct {
	cl      *kgo.Client
	topic   string
	promise func(*kgo.Record, error)
}

func (f *franzProducer) produce(ctx context.Context, value []byte) error {
	f.cl.Produce(ctx, &kgo.Record{Topic: f.topic, Value: value}, f.promise)
	return nil // a failure comes to the promise
}

func (f *franzProducer) flush(ctx context.Context) error { return f.cl.Flush(ctx) }
func (f *franzProducer) close()                          { f.cl.Close() }

// A consumerClient reads every partition of one topic from its start,
// without a group.
type consumerClient interface {
	// poll waits for records and calls f with each value; the value is
	// valid only during the call.
	poll(ctx context.Context, f func(value []byte)) error
	close()
}

// newConsumer starts the consumer that goes with producer name: ours
// (stage06-performance/consumer, Kafka's defaults: fetch.min.bytes 1,
// fetch.max.wait.ms 500) for ours, kgo's for franz-go.
func newConsumer(ctx context.Context, name string, servers []string, topic string, partitions int) (consumerClient, error) {
	if name == "franz-go" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(servers...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return nil, err
		}
		return franzConsumer{cl}, nil
	}
	cfg, err := consumer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(servers, ","), "auto.offset.reset": "earliest"})
	if err != nil {
		return nil, err
	}
	c, err := consumer.New(cfg, quietLogger())
	if err != nil {
		return nil, err
	}
	var parts []consumer.TopicPartition
	for i := range partitions {
		parts = append(parts, consumer.TopicPartition{Topic: topic, Partition: int32(i)})
	}
	if err := c.Assign(ctx, parts...); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return ourConsumer{c}, nil
}

type ourConsumer struct{ c *consumer.Consumer }

func (o ourConsumer) poll(ctx context.Context, f func([]byte)) error {
	recs, err := o.c.Poll(ctx)
	for i := range recs {
		f(recs[i].Value)
	}
	return err
}

func (o ourConsumer) close() { o.c.Close(context.Background()) }

type franzConsumer struct{ cl *kgo.Client }

func (fc franzConsumer) poll(ctx context.Context, f func([]byte)) error {
	fetches := fc.cl.PollFetches(ctx)
	fetches.EachRecord(func(r *kgo.Record) { f(r.Value) })
	if err := ctx.Err(); err != nil {
		return err
	}
	return fetches.Err0()
}

func (fc franzConsumer) close() { fc.cl.Close() }

// quietLogger keeps the clients' warnings (a leader moved, a retry) and
// drops their informational lines, which would interleave with the
// tables.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
