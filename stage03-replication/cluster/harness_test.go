package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
)

var quietLogger = slog.New(slog.DiscardHandler)

// testCluster wraps a cluster with test verbs that fail the test.
type testCluster struct {
	*cluster.Cluster
	t *testing.T
}

func startCluster(t *testing.T, n int, props ...string) *testCluster {
	t.Helper()
	p := map[string]string{}
	for i := 0; i+1 < len(props); i += 2 {
		p[props[i]] = props[i+1]
	}
	c, err := cluster.Start(n, cluster.Options{Dir: t.TempDir(), Props: p, Logger: quietLogger})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &testCluster{Cluster: c, t: t}
}

func tp(topic string, p int32) commitlog.TopicPartition {
	return commitlog.TopicPartition{Topic: topic, Partition: p}
}

func (c *testCluster) createTopic(topic string, partitions, rf int) {
	c.t.Helper()
	require.NoError(c.t, c.Controller.CreateTopic(topic, partitions, rf))
}

func (c *testCluster) stop(id int32) {
	c.t.Helper()
	require.NoError(c.t, c.StopBroker(id))
	require.NoError(c.t, c.Controller.BrokerStopped(id))
}

func (c *testCluster) start(id int32) {
	c.t.Helper()
	require.NoError(c.t, c.StartBroker(id))
	require.NoError(c.t, c.Controller.BrokerStarted(id))
}

func (c *testCluster) elect(p commitlog.TopicPartition, leader int32) {
	c.t.Helper()
	require.NoError(c.t, c.Controller.ElectLeader(p, leader))
}

// client is a franz-go client over the running brokers.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
	require.NoError(c.t, err)
	c.t.Cleanup(cl.Close)
	return cl
}

// produce produces values to a partition and waits for each; acks is
// kgo.AllISRAcks() or kgo.LeaderAck().
func (c *testCluster) produce(p commitlog.TopicPartition, acks kgo.Acks, values ...string) {
	c.t.Helper()
	opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl := c.client(opts...)
	for _, v := range values {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: p.Topic, Partition: p.Partition, Value: []byte(v)}).FirstErr()
		cancel()
		require.NoError(c.t, err, "produce %q", v)
	}
}

// consume reads a partition from its start until it has n records.
func (c *testCluster) consume(p commitlog.TopicPartition, n int) []string {
	c.t.Helper()
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.Topic: {p.Partition: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(c.t, ctx.Err(), "consumed %d of %d: %v", len(out), n, out)
		for _, r := range fs.Records() {
			out = append(out, string(r.Value))
		}
	}
	return out
}

// batch is what a replica's log holds at one position.
type batch struct {
	BaseOffset, LastOffset int64
	Epoch                  int32
	CRC                    uint32
}

// logOf lists the batches of a running broker's replica of p.
func (c *testCluster) logOf(id int32, p commitlog.TopicPartition) []batch {
	c.t.Helper()
	s, ok := c.Broker(id)
	require.True(c.t, ok, "broker %d is not running", id)
	part, ok := s.Store().Partition(p.Topic, p.Partition)
	require.True(c.t, ok, "broker %d has no replica of %s", id, p)
	var out []batch
	for off := part.Log.StartOffset(); off < part.Log.EndOffset(); {
		r, err := part.Log.Read(off, 1<<20)
		require.NoError(c.t, err)
		data, err := r.Bytes()
		require.NoError(c.t, err)
		for len(data) > 0 {
			h, err := record.Validate(data)
			if err != nil {
				break
			}
			out = append(out, batch{h.BaseOffset, h.LastOffset(), h.PartitionLeaderEpoch, h.CRC})
			off = h.NextOffset()
			data = data[h.Size():]
		}
	}
	return out
}

// waitInSync waits until every running replica of p has the leader's log
// end offset and high watermark, then checks their logs are identical
// batch for batch: offsets, CRCs and leader epochs.
func (c *testCluster) waitInSync(p commitlog.TopicPartition) []batch {
	c.t.Helper()
	st, ok := c.Controller.State(p)
	require.True(c.t, ok)
	var replicas []int32
	for _, id := range st.Replicas {
		if _, ok := c.Broker(id); ok {
			replicas = append(replicas, id)
		}
	}
	require.Eventually(c.t, func() bool {
		leader, ok := c.Broker(st.Leader)
		if !ok {
			return false
		}
		lp, ok := leader.Replicas.Partition(p.Topic, p.Partition)
		if !ok {
			return false
		}
		end := lp.Log.EndOffset()
		for _, id := range replicas {
			b, _ := c.Broker(id)
			rp, ok := b.Replicas.Partition(p.Topic, p.Partition)
			if !ok || rp.Log.EndOffset() != end || rp.HighWatermark() != end {
				return false
			}
		}
		return true
	}, 30*time.Second, 5*time.Millisecond, "replicas %v of %s never caught up with leader %d", replicas, p, st.Leader)
	want := c.logOf(replicas[0], p)
	for _, id := range replicas[1:] {
		require.Equal(c.t, want, c.logOf(id, p), "broker %d's log differs from broker %d's", id, replicas[0])
	}
	return want
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// cluster_Crash builds a cluster.Crash.
func cluster_Crash(loseAfter, highWatermarks map[commitlog.TopicPartition]int64) cluster.Crash {
	return cluster.Crash{LoseAfter: loseAfter, HighWatermarks: highWatermarks}
}
