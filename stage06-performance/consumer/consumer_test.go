package consumer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

// TestReadsBackWhatFranzGoProduced: records produced by franz-go, in
// batches of every codec, come back from our stage 02 broker and from
// kfake with their keys, values, headers and offsets, in order per
// partition, nothing missing and nothing twice.
func TestReadsBackWhatFranzGoProduced(t *testing.T) {
	for _, cluster := range []struct {
		name  string
		start func(testing.TB) string
	}{{"stage02", startBroker}, {"kfake", func(t testing.TB) string { return startFake(t, 1) }}} {
		t.Run(cluster.name, func(t *testing.T) {
			addr := cluster.start(t)
			for _, codec := range []struct {
				name string
				kgo  kgo.CompressionCodec
			}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
				{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
				t.Run(codec.name, func(t *testing.T) {
					topic := "read-" + codec.name
					createTopic(t, addr, topic, 3)
					want := produce(t, addr, topic, 3000, codec.kgo)
					c := newConsumer(t, config(t, addr, map[string]string{"max.poll.records": "77"}))
					require.NoError(t, c.Assign(deadline(t, 10*time.Second), partitions(topic, 3)...))
					got := pollUntil(t, deadline(t, 30*time.Second), c, 3000)
					require.Equal(t, want, got)
				})
			}
		})
	}
}

// TestPollStartsWhereAutoOffsetResetSays: without a committed offset, a
// partition starts at its log start (earliest) or its end (latest), and
// a position past the end (OFFSET_OUT_OF_RANGE) resets the same way.
func TestPollStartsWhereAutoOffsetResetSays(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, addr, "reset", 1)
	want := produce(t, addr, "reset", 10, kgo.NoCompression())[0]
	tp := consumer.TopicPartition{Topic: "reset", Partition: 0}

	early := newConsumer(t, config(t, addr, nil))
	require.NoError(t, early.Assign(deadline(t, 10*time.Second), tp))
	require.NoError(t, early.Seek(tp, 1000)) // out of range
	got := pollUntil(t, deadline(t, 20*time.Second), early, 10)
	require.Equal(t, want, got[0], "reset to the earliest offset after OFFSET_OUT_OF_RANGE")

	late := newConsumer(t, config(t, addr, map[string]string{"auto.offset.reset": "latest"}))
	require.NoError(t, late.Assign(deadline(t, 10*time.Second), tp))
	require.Eventually(t, func() bool { p, ok := late.Position(tp); return ok && p == 10 }, 10*time.Second, 5*time.Millisecond)
	more := produce(t, addr, "reset", 5, kgo.NoCompression())[0]
	got = pollUntil(t, deadline(t, 20*time.Second), late, 5)
	require.Equal(t, more, got[0], "latest: only what was produced after the start")
}

// TestParseConfigNamesTheBadKeyAndValue: a bad config says which key and
// which value.
func TestParseConfigNamesTheBadKeyAndValue(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"bootstrap.servers": "h:1", "fetch.max.wait.ms": "soon"}, `fetch.max.wait.ms="soon"`},
		{map[string]string{"bootstrap.servers": "h:1", "auto.offset.reset": "smallest"}, "auto.offset.reset=smallest"},
		{map[string]string{"bootstrap.servers": "h:1", "enable.auto.commit": "yes please"}, `enable.auto.commit="yes please"`},
		{map[string]string{"bootstrap.servers": "h:1", "max.poll.records": "0"}, "max.poll.records=0"},
		{map[string]string{"bootstrap.servers": "h:1", "partition.assignment.strategy": "sticky"}, "partition.assignment.strategy=sticky"},
		{map[string]string{"bootstrap.servers": "h:1", "fetch.max.wait": "500"}, `unknown key "fetch.max.wait"`},
		{map[string]string{"bootstrap.servers": "h:1", "heartbeat.interval.ms": "50000"}, "heartbeat.interval.ms=50000"},
		{map[string]string{"bootstrap.servers": "h:1", "max.poll.interval.ms": "0"}, "max.poll.interval.ms=0"},
		{map[string]string{"bootstrap.servers": "h:1", "isolation.level": "read_dirty"}, "isolation.level=read_dirty"},
		{map[string]string{}, "bootstrap.servers"},
	} {
		_, err := consumer.ParseConfig(tc.props)
		require.ErrorIs(t, err, consumer.ErrConfig)
		require.ErrorContains(t, err, tc.want)
	}
	cfg, err := consumer.ParseConfig(map[string]string{"bootstrap.servers": "a:1, b:2", "group.id": "g",
		"partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor,range", "fetch.max.wait.ms": "250"})
	require.NoError(t, err)
	require.Equal(t, []string{"a:1", "b:2"}, cfg.BootstrapServers)
	require.Equal(t, 250*time.Millisecond, cfg.FetchMaxWait)
	require.Equal(t, 500, cfg.MaxPollRecords, "Kafka's default")
}

// TestALeaderChangeMovesPartitionsToTheNewLeadersFetcher: when every
// partition's leader moves to another broker, the old leader answers
// NOT_LEADER_OR_FOLLOWER, the consumer refreshes its metadata, and the
// new leaders' fetchers continue each partition where it was: every
// record once, in order.
func TestALeaderChangeMovesPartitionsToTheNewLeadersFetcher(t *testing.T) {
	fake := startFakeCluster(t, 3)
	addr := fake.ListenAddrs()[0]
	const topic = "moving"
	createTopic(t, addr, topic, 3)
	want := produce(t, addr, topic, 900, kgo.NoCompression())
	c := newConsumer(t, config(t, addr, map[string]string{"max.poll.records": "50"}))
	require.NoError(t, c.Assign(deadline(t, 10*time.Second), partitions(topic, 3)...))
	got := pollUntil(t, deadline(t, 20*time.Second), c, 300)

	for p := range int32(3) {
		from := fake.LeaderFor(topic, p)
		require.NoError(t, fake.MoveTopicPartition(topic, p, (from+1)%3))
	}
	more := produce(t, addr, topic, 900, kgo.NoCompression())
	for p, recs := range more {
		want[p] = append(want[p], recs...)
	}
	left := 1800
	for _, recs := range got {
		left -= len(recs)
	}
	rest := pollUntil(t, deadline(t, 30*time.Second), c, left)
	for p, recs := range rest {
		got[p] = append(got[p], recs...)
	}
	require.Equal(t, want, got)
}
