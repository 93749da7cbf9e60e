package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

// startBroker starts stage 02's single broker in this process, on
// 127.0.0.1 and a temporary directory.
func startBroker(t testing.TB) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	cfg, err := broker.ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "logs"),
	}, quiet)
	require.NoError(t, err)
	b, err := broker.New(cfg, broker.Options{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b.Addr().String()
}

// startFake starts franz-go's in-memory cluster (consumer groups
// included) and returns a broker's address.
func startFake(t testing.TB, brokers int) string {
	t.Helper()
	return startFakeCluster(t, brokers).ListenAddrs()[0]
}

func startFakeCluster(t testing.TB, brokers int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.Ports(make([]int, brokers)...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func deadline(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with partitions on the cluster at addr.
func createTopic(t testing.TB, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopics(deadline(t, 30*time.Second), partitions, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created[topic].Err)
}

// sent is a record as franz-go produced it: what a consumer must read back.
type sent struct {
	Offset  int64
	Key     string
	Value   string
	Headers string // k=v pairs, in order
}

// produce writes n records round-robin over topic's partitions with
// franz-go (keys, values, a header each; codec for every batch) and
// returns them per partition in offset order.
func produce(t testing.TB, addr, topic string, n int, codec kgo.CompressionCodec) map[int32][]sent {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d of %s", i, topic),
			Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "null"}}}
	}
	res := cl.ProduceSync(deadline(t, 60*time.Second), recs...)
	require.NoError(t, res.FirstErr())
	out := map[int32][]sent{}
	for _, r := range res {
		out[r.Record.Partition] = append(out[r.Record.Partition], toSent(r.Record.Offset, r.Record.Key, r.Record.Value, r.Record.Headers))
	}
	for p := range out {
		require.IsIncreasing(t, offsetsOf(out[p]))
	}
	return out
}

func toSent(off int64, key, value []byte, headers []kgo.RecordHeader) sent {
	s := sent{Offset: off, Key: string(key), Value: string(value)}
	for _, h := range headers {
		s.Headers += fmt.Sprintf("%s=%q;", h.Key, h.Value)
	}
	return s
}

func received(r *consumer.Record) sent {
	hs := make([]kgo.RecordHeader, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = kgo.RecordHeader{Key: string(h.Key), Value: h.Value}
	}
	return toSent(r.Offset, r.Key, r.Value, hs)
}

func offsetsOf(s []sent) []int64 {
	out := make([]int64, len(s))
	for i := range s {
		out[i] = s[i].Offset
	}
	return out
}

// config is a consumer config for tests: from the earliest offset, quick
// heartbeats and retries.
func config(t testing.TB, addr string, props map[string]string) consumer.Config {
	t.Helper()
	all := map[string]string{
		"bootstrap.servers":     addr,
		"auto.offset.reset":     "earliest",
		"heartbeat.interval.ms": "100",
		"session.timeout.ms":    "6000",
		"retry.backoff.ms":      "20",
		"fetch.max.wait.ms":     "100",
	}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := consumer.ParseConfig(all)
	require.NoError(t, err)
	return cfg
}

func newConsumer(t testing.TB, cfg consumer.Config) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// pollUntil polls c until it has n records (copied out) or ctx ends.
func pollUntil(t testing.TB, ctx context.Context, c *consumer.Consumer, n int) map[int32][]sent {
	t.Helper()
	got := map[int32][]sent{}
	for total := 0; total < n; {
		recs, err := c.Poll(ctx)
		require.NoError(t, err, "after %d of %d records", total, n)
		for i := range recs {
			got[recs[i].Partition] = append(got[recs[i].Partition], received(&recs[i]))
		}
		total += len(recs)
	}
	return got
}

func partitions(topic string, n int32) []consumer.TopicPartition {
	out := make([]consumer.TopicPartition, n)
	for i := range out {
		out[i] = consumer.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	return out
}
