package server_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// compactionProps: the brokers' cleaners look for work every 100 ms, and
// __consumer_offsets rolls a segment every 4 KiB, so that these tests
// see cleaning within seconds.
var compactionProps = map[string]string{"log.cleaner.backoff.ms": "100", "offsets.topic.segment.bytes": "4096",
	"group.initial.rebalance.delay.ms": "0"}

// cleanedTo waits until broker id's cleaner has cleaned tp up to at least
// offset least and returns its checkpoint: the records below it are
// cleaned.
func cleanedTo(t *testing.T, c *brokertest.Cluster, id int32, tp commitlog.TopicPartition, least int64) int64 {
	t.Helper()
	var point int64
	require.Eventually(t, func() bool {
		points, err := commitlog.ReadOffsetCheckpoint(filepath.Join(c.Broker(id).LogDir(), commitlog.CleanerOffsetCheckpointFile))
		point = points[tp]
		return err == nil && point >= least
	}, 60*time.Second, 20*time.Millisecond, "broker %d cleans %s up to offset %d", id, tp, least)
	return point
}

// TestCompactedTopicKeepsTheLatestValuePerKey: a topic created with
// cleanup.policy=compact and small segments gets 50 rounds of updates to
// 20 keys. The leader's cleaner compacts it on its own; a consumer
// reading from the start then sees, below the cleaner's checkpoint,
// exactly the last record of each key there, and above it every record
// as produced: nothing above the cleaned range is lost, and each key's
// latest value is the last one written.
func TestCompactedTopicKeepsTheLatestValuePerKey(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, compactionProps)
	createTopic(t, c, "profiles", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"segment.bytes": kadm.StringPtr("2048"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.01")})
	p := client(t, c, kgo.DefaultProduceTopic("profiles"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type produced struct{ key, value string }
	at := map[int64]produced{}
	for round := range 50 {
		var recs []*kgo.Record
		for k := range 20 {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "user-%02d", k), Value: fmt.Appendf(nil, "v%02d", round)})
		}
		res := p.ProduceSync(ctx, recs...)
		require.NoError(t, res.FirstErr())
		for _, r := range res {
			at[r.Record.Offset] = produced{string(r.Record.Key), string(r.Record.Value)}
		}
	}
	zk := observer(t, ens)
	state, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: "profiles"})
	require.NoError(t, err)
	tp := commitlog.TopicPartition{Topic: "profiles"}
	point := cleanedTo(t, c, state.Leader, tp, int64(len(at))/2)
	got := readOffsets(t, ctx, c, "profiles", int64(len(at))-1, func(r *kgo.Record) {
		require.Equal(t, at[r.Offset], produced{string(r.Key), string(r.Value)}, "offset %d holds what was produced there", r.Offset)
	})
	// The cleaner may run again while the consumer reads, so its
	// checkpoint does not say where the cleaned range ended for this read:
	// the records read must split at some offset into a cleaned head, with
	// at most one record per key and that key's last one in the head, and
	// a tail holding every record produced from there on.
	tail := len(got)
	for tail > 0 && got[tail-1] == int64(len(at))-(int64(len(got))-int64(tail))-1 {
		tail--
	}
	boundary := int64(len(at))
	if tail < len(got) {
		boundary = got[tail]
	}
	head := map[string]int64{}
	for _, off := range got[:tail] {
		key := at[off].key
		_, twice := head[key]
		require.False(t, twice, "key %s appears twice in the cleaned range", key)
		head[key] = off
		for later := off + 1; later < boundary; later++ {
			require.NotEqual(t, key, at[later].key, "offset %d of key %s was kept, but %d superseded it", off, key, later)
		}
	}
	require.LessOrEqual(t, len(got), len(at)-int(point)+20, "below the checkpoint, at most one record for each of the 20 keys")
	lastRead := map[string]string{}
	for _, off := range got {
		lastRead[at[off].key] = at[off].value
	}
	for k := range 20 {
		require.Equal(t, "v49", lastRead[fmt.Sprintf("user-%02d", k)], "every key's last value survives")
	}
	t.Logf("every record from offset %d on (cleaner checkpoint %d) of %d: a consumer reads %d records", boundary, point, len(at), len(got))
}

// readOffsets reads topic from its start with a new consumer until offset
// last, calling check on each record, and returns the offsets read.
func readOffsets(t *testing.T, ctx context.Context, c *brokertest.Cluster, topic string, last int64, check func(*kgo.Record)) []int64 {
	t.Helper()
	cons := client(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cons.Close()
	var got []int64
	for len(got) == 0 || got[len(got)-1] < last {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read up to offset %v", got)
		fs.EachRecord(func(r *kgo.Record) {
			check(r)
			got = append(got, r.Offset)
		})
	}
	return got
}

// TestCommitsSurviveCompactionOfTheOffsetsTopic: a consumer commits its
// position 400 times; the partition of __consumer_offsets holding its
// group rolls small segments, and the coordinator's cleaner compacts them
// to the latest commit per partition. The coordinator is then killed
// (kill -9): the new one loads the compacted log and answers the last
// commit, not an older one.
func TestCommitsSurviveCompactionOfTheOffsetsTopic(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, compactionProps)
	createTopic(t, c, "clicks", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, c))
	var last kadm.Offsets
	for i := range int64(400) {
		last = kadm.Offsets{}
		last.AddOffset("clicks", 0, i, -1)
		last.AddOffset("clicks", 1, 2*i, -1)
		r, err := adm.CommitOffsets(ctx, "clickers", last)
		if err == nil {
			err = r.Error()
		}
		require.NoError(t, err, "commit %d", i)
	}
	coordinators := adm.FindGroupCoordinators(ctx, "clickers")
	require.NoError(t, coordinators.Error())
	coordinator := coordinators["clickers"].NodeID
	offsetsTP := commitlog.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor("clickers", 50)}
	point := cleanedTo(t, c, coordinator, offsetsTP, 1)
	t.Logf("the coordinator's cleaner compacted %s up to offset %d of 400 commits (800 records)", offsetsTP, point)

	c.Broker(coordinator).Kill()
	zk := observer(t, ens)
	waitLeaders(t, zk, group.Topic, 50, func(id int32) bool { return id != coordinator })
	var (
		mu      sync.Mutex // got and lastErr: written by Eventually's goroutine
		got     kadm.OffsetResponses
		lastErr error
	)
	answered := assert.Eventually(t, func() bool {
		// A new client each time: a broker whose metadata does not yet
		// know the new leader answers FindCoordinator with the dead one,
		// as Kafka's would, and franz-go keeps a coordinator it cannot
		// reach (it forgets one only on NOT_COORDINATOR and its kin).
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RequestRetries(1))
		require.NoError(t, err)
		defer cl.Close()
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		offsets, err := kadm.NewClient(cl).FetchOffsets(actx, "clickers")
		if err == nil {
			err = offsets.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		got, lastErr = offsets, err
		return err == nil
	}, 60*time.Second, 200*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.True(t, answered, "the new coordinator answers; its last error: %v", lastErr)
	for _, o := range last.Sorted() {
		r, ok := got.Lookup(o.Topic, o.Partition)
		require.True(t, ok)
		require.Equal(t, o.At, r.At, "partition %d: the last commit", o.Partition)
	}
}

// TestATopicConfigChangedInZooKeeperReachesTheLiveLogs: a topic created
// with the default cleanup.policy=delete is changed, as an admin tool
// would (the config znode and a /config/changes notification), to
// compact with small segments; every broker applies it to the topic's
// logs already open: the leader refuses keyless records from then on, and
// each replica's cleaner compacts the partition.
func TestATopicConfigChangedInZooKeeperReachesTheLiveLogs(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, compactionProps)
	createTopic(t, c, "accounts", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := client(t, c, kgo.DefaultProduceTopic("accounts"))
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: []byte("no key, allowed while delete")}).FirstErr())

	zk := observer(t, ens)
	require.NoError(t, zk.SetTopicConfig("accounts", map[string]string{"cleanup.policy": "compact",
		"segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}))
	require.Eventually(t, func() bool {
		err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
		return errors.Is(err, kerr.InvalidRecord)
	}, 30*time.Second, 50*time.Millisecond, "the leader's log is compacted now: a keyless record is refused")
	for round := range 40 {
		var recs []*kgo.Record
		for k := range 10 {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "account-%d", k), Value: fmt.Appendf(nil, "balance %d", round)})
		}
		require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
	}
	for id := range int32(3) {
		point := cleanedTo(t, c, id, commitlog.TopicPartition{Topic: "accounts"}, 1)
		t.Logf("broker %d cleaned accounts-0 up to offset %d", id, point)
	}
}
