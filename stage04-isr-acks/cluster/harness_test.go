package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// testLogger is quiet unless WORKBOOK_LOG=1.
func testLogger() *slog.Logger {
	if os.Getenv("WORKBOOK_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testCluster is a three-broker cluster with one topic, "orders", of one
// partition on all three, led by broker 0.
type testCluster struct {
	*Cluster
	t  *testing.T
	tp commitlog.TopicPartition
}

// lagMax is the tests' replica.lag.time.max.ms: short enough for a test
// to watch a follower leave, long enough that a follower slowed only by
// the race detector stays in.
const lagMax = 1500 * time.Millisecond

func startCluster(t *testing.T, props map[string]string) *testCluster {
	t.Helper()
	all := map[string]string{server.KeyLagTimeMax: fmt.Sprint(lagMax.Milliseconds()),
		// ISR change notifications within a tenth of a second, not
		// Kafka's 5 to 7.5 s: Metadata shows a change soon after it.
		server.KeyIsrChangePropagationCheckInterval: "10", server.KeyIsrChangePropagationLinger: "50",
		server.KeyIsrChangePropagationMaxDelay: "1000"}
	for k, v := range props {
		all[k] = v
	}
	c, err := Start(3, Options{Dir: t.TempDir(), Props: all, Logger: testLogger()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	tc := &testCluster{Cluster: c, t: t, tp: commitlog.TopicPartition{Topic: "orders", Partition: 0}}
	require.NoError(t, c.Controller.CreateTopic("orders", 1, 3))
	tc.waitISR(0, 1, 2)
	return tc
}

// waitISR waits until the stored ISR is want (in that order) and returns
// its version.
func (tc *testCluster) waitISR(want ...int32) int32 {
	tc.t.Helper()
	var got []int32
	var version int32
	require.Eventuallyf(tc.t, func() bool {
		var err error
		got, version, err = tc.ISR(tc.tp)
		return err == nil && slices.Equal(got, want)
	}, 20*time.Second, 10*time.Millisecond, "ISR %v, want %v", &got, want)
	return version
}

// server returns a running broker's server.
func (tc *testCluster) server(id int32) *server.Server {
	tc.t.Helper()
	s, ok := tc.Server(id)
	require.True(tc.t, ok, "broker %d is not running", id)
	return s
}

// logEnd is a broker's log end offset for the partition.
func (tc *testCluster) logEnd(id int32) int64 {
	p, ok := tc.server(id).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
	require.True(tc.t, ok)
	return p.Log.EndOffset()
}

// client is a franz-go client of the cluster that produces with acks to
// partition 0, without idempotence (stage 04 part 2) and with few retries,
// so that a refusal shows.
func (tc *testCluster) client(acks kgo.Acks, opts ...kgo.Opt) *kgo.Client {
	tc.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tc.Addrs()...), kgo.RequiredAcks(acks),
		kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(tc.tp.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
	require.NoError(tc.t, err)
	tc.t.Cleanup(cl.Close)
	return cl
}

// produceRaw sends one batch of values straight to broker leader with acks
// and returns the partition's error code and base offset: exactly what the
// broker answered, with no client retrying for us.
func (tc *testCluster) produceRaw(leader int32, acks int16, timeout time.Duration, values ...string) (int16, int64) {
	tc.t.Helper()
	b := record.NewBatch(time.Now().UnixMilli())
	for i, v := range values {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	batch, err := record.AppendBatch(nil, b)
	require.NoError(tc.t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, int32(timeout.Milliseconds())
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: tc.tp.Partition, Records: batch}}}}
	// franz-go rewrites a raw produce's acks to its own setting: match it.
	clientAcks := map[int16]kgo.Acks{-1: kgo.AllISRAcks(), 0: kgo.NoAck(), 1: kgo.LeaderAck()}[acks]
	cl := tc.client(clientAcks, kgo.ProduceRequestTimeout(timeout))
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(leader)).Request(ctx, req)
	require.NoError(tc.t, err)
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

// readAll consumes partition 0 from its start up to its high watermark and
// returns the values in offset order.
func (tc *testCluster) readAll() []string { return tc.readPartition(tc.tp) }

// readPartition reads a partition from its start to its high watermark.
func (tc *testCluster) readPartition(tp commitlog.TopicPartition) []string {
	tc.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.Addrs()...), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().AtStart()}}))
	require.NoError(tc.t, err)
	defer cl.Close()
	var values []string
	next, hw := int64(0), int64(-1)
	deadline := time.Now().Add(60 * time.Second)
	for hw < 0 || next < hw {
		require.True(tc.t, time.Now().Before(deadline), "%s: read %d of %d records", tp, next, hw)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil {
				return
			}
			hw = p.HighWatermark
			for _, r := range p.Records {
				values = append(values, string(r.Value))
				next = r.Offset + 1
			}
		})
	}
	return values
}

// values names n records: prefix-0, prefix-1, ...
func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// produceAll produces vals one by one with cl and returns the ones
// acknowledged and the first error.
func produceAll(cl *kgo.Client, vals []string) (acked []string, err error) {
	for _, v := range vals {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)})
		cancel()
		if err := res.FirstErr(); err != nil {
			return acked, err
		}
		acked = append(acked, v)
	}
	return acked, nil
}
