package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// TestRebuildStartsAtTheLatestSnapshotAndEndsWhereTheWholeLogWould: a
// state built from a snapshot at a segment's base offset plus the batches
// after it is the state built from the whole log, and the log is read
// from the snapshot on; a snapshot past the log end (the tail it covered
// was lost in a crash) is passed over for an older one.
func TestRebuildStartsAtTheLatestSnapshotAndEndsWhereTheWholeLogWould(t *testing.T) {
	cfg := commitlog.DefaultConfig()
	cfg.SegmentBytes = 1024
	dir := t.TempDir()
	l, err := commitlog.Open(dir, cfg, commitlog.Options{Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	live := producer.NewState()
	snapshotAt := map[int64]bool{}
	seqs := map[int64]int32{}
	for i := range 60 {
		pid := int64(1000 + i%3)
		b := record.NewBatch(time.Now().UnixMilli(), record.Record{Value: fmt.Appendf(nil, "p%d-%d", pid, seqs[pid])},
			record.Record{OffsetDelta: 1, Value: []byte("x")})
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seqs[pid]
		seqs[pid] += 2
		data, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		_, _, err = l.AppendAsLeader(data, 0)
		require.NoError(t, err)
		observe(live, l, data, slog.Default())
		// What recorded does after a roll.
		if base := l.ActiveBaseOffset(); base > 0 && !snapshotAt[base] {
			snapshotAt[base] = true
			require.NoError(t, writeSnapshot(live, dir, base))
		}
	}
	require.Greater(t, len(snapshotAt), 2, "the log rolled")
	latest := l.ActiveBaseOffset()

	whole := producer.NewState()
	require.NoError(t, readBatches(whole, l, 0, slog.Default()))

	built := producer.NewState()
	from, err := rebuild(built, l, discard())
	require.NoError(t, err)
	require.Equal(t, latest, from, "read from the newest snapshot on")
	for pid := range seqs {
		want, ok := whole.Entry(pid)
		require.True(t, ok)
		got, ok := built.Entry(pid)
		require.True(t, ok)
		require.Equal(t, want.LastSeq(), got.LastSeq(), "producer %d", pid)
		require.Equal(t, want.Batches[len(want.Batches)-1], got.Batches[len(got.Batches)-1], "producer %d", pid)
	}

	// A crash lost the tail: the newest snapshot is past the log end.
	_, err = l.TruncateTo(latest - 1)
	require.NoError(t, err)
	from, err = rebuild(producer.NewState(), l, discard())
	require.NoError(t, err)
	require.Less(t, from, latest, "an older snapshot, not one past the log end")
	require.True(t, snapshotAt[from])
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestServer builds a single broker (id 0) over dir, not listening:
// its partitions are driven with the replica manager's LeaderAndIsr and
// StopReplica, as the controller's requests do, and produced to through
// AppendRecords, the produce handler's path. shutdown stops it cleanly
// (the test's cleanup does, if the test has not).
func newTestServer(t *testing.T, dir string, props map[string]string) (s *Server, shutdown func()) {
	t.Helper()
	all := map[string]string{"broker.id": "0", "log.dirs": dir, "listeners": "PLAINTEXT://127.0.0.1:0"}
	maps.Copy(all, props)
	cfg, err := ParseConfig(all, discard())
	require.NoError(t, err)
	s, err = New(cfg, Options{Logger: discard(), States: isr.NewMemoryStore()})
	require.NoError(t, err)
	var once sync.Once
	shutdown = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, s.Shutdown(ctx))
		})
	}
	t.Cleanup(shutdown)
	return s, shutdown
}

// lead makes broker 0 the leader of each partition, replicas [0].
func lead(t *testing.T, s *Server, tps ...commitlog.TopicPartition) []*replica.Partition {
	t.Helper()
	states := map[commitlog.TopicPartition]replica.LeaderAndIsrState{}
	for _, tp := range tps {
		states[tp] = replica.LeaderAndIsrState{Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}
	}
	errs, err := s.Replicas.LeaderAndIsr(0, states, nil)
	require.NoError(t, err)
	var out []*replica.Partition
	for _, tp := range tps {
		require.NoError(t, errs[tp])
		p, ok := s.Replicas.Partition(tp.Topic, tp.Partition)
		require.True(t, ok)
		out = append(out, p)
	}
	return out
}

// produce appends one batch of values (producer pid from seq, or no
// producer if pid is -1) with acks=1 and returns the partition's answer.
func produce(t *testing.T, s *Server, tp commitlog.TopicPartition, pid int64, seq int32, values ...string) *kmsg.ProduceResponseTopicPartition {
	t.Helper()
	var recs []record.Record
	for i, v := range values {
		recs = append(recs, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	b := record.NewBatch(time.Now().UnixMilli(), recs...)
	if pid >= 0 {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seq
	}
	data, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	out := &kmsg.ProduceResponseTopicPartition{Partition: tp.Partition, BaseOffset: -1, LogStartOffset: -1}
	done := make(chan struct{})
	s.AppendRecords(1, 10*time.Second, []broker.ProducePartition{{Topic: tp.Topic,
		Request: &kmsg.ProduceRequestTopicPartition{Partition: tp.Partition, Records: data}, Response: out}}, func() { close(done) })
	<-done
	return out
}

// TestBuildingOnePartitionsProducerStateDoesNotHoldUpAnother: the first
// idempotent produce to a partition builds its producer state from the
// log (up to a segment's reading). While one partition's build is held
// (a slow disk), an idempotent produce to another partition is answered,
// and once the build ends the first produce is answered too.
func TestBuildingOnePartitionsProducerStateDoesNotHoldUpAnother(t *testing.T) {
	s, _ := newTestServer(t, t.TempDir(), nil)
	a, b := commitlog.TopicPartition{Topic: "t", Partition: 0}, commitlog.TopicPartition{Topic: "t", Partition: 1}
	parts := lead(t, s, a, b)
	reading, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the shutdown, should the test fail
	var builds atomic.Int32
	s.producers.rebuild = func(st *producer.State, l *commitlog.Log, logger *slog.Logger) (int64, error) {
		if l == parts[0].Log {
			builds.Add(1)
			close(reading)
			<-release
		}
		return rebuild(st, l, logger)
	}

	answeredA := make(chan *kmsg.ProduceResponseTopicPartition, 2)
	go func() { answeredA <- produce(t, s, a, 1000, 0, "a0") }()
	<-reading
	go func() { answeredA <- produce(t, s, a, 1001, 0, "a1") }() // waits for the same build

	answeredB := make(chan *kmsg.ProduceResponseTopicPartition, 1)
	go func() { answeredB <- produce(t, s, b, 2000, 0, "b0") }()
	select {
	case out := <-answeredB:
		require.Zero(t, out.ErrorCode)
	case <-time.After(10 * time.Second):
		t.Fatal("an idempotent produce to t-1 waited for t-0's producer state to be built")
	}

	releaseOnce.Do(func() { close(release) })
	for range 2 {
		select {
		case out := <-answeredA:
			require.Zero(t, out.ErrorCode)
		case <-time.After(10 * time.Second):
			t.Fatal("t-0's produces were not answered once its state was built")
		}
	}
	require.Equal(t, int32(1), builds.Load(), "built once, for both produces")
	st, built, err := s.ProducerState(parts[0])
	require.NoError(t, err)
	require.False(t, built)
	require.Equal(t, 2, st.Len())
}

// TestADeletedPartitionCreatedAgainKnowsNoneOfTheOldProducers: an
// idempotent producer writes to t-0 until its log has rolled; the
// controller deletes the partition (StopReplica with delete_partitions)
// and creates it again; plain records fill the new log. The old
// partition's producer state is forgotten: the clean shutdown writes no
// snapshot of it into the new partition's directory, where a restart
// would load it and refuse the producer's sequence 0 as out of order.
// After the restart, sequence 0 is accepted.
func TestADeletedPartitionCreatedAgainKnowsNoneOfTheOldProducers(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.segment.bytes": "1024"}
	s, shutdown := newTestServer(t, dir, props)
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	old := lead(t, s, tp)[0]
	for seq := range int32(30) {
		require.Zero(t, produce(t, s, tp, 1000, seq, fmt.Sprintf("old-%d", seq)).ErrorCode)
	}
	require.Positive(t, old.Log.ActiveBaseOffset(), "the log rolled")

	errs, err := s.Replicas.StopReplica(0, []commitlog.TopicPartition{tp}, true)
	require.NoError(t, err)
	require.NoError(t, errs[tp])
	s.producers.mu.Lock()
	_, kept := s.producers.states[tp]
	s.producers.mu.Unlock()
	assert.False(t, kept, "the deleted partition's producer state is forgotten")
	_, _, err = s.producers.entry(old) // a produce that looked it up before the delete
	require.ErrorIs(t, err, replica.ErrNotReplica)
	s.producers.mu.Lock()
	_, kept = s.producers.states[tp]
	s.producers.mu.Unlock()
	require.False(t, kept, "nor built again for a request that still holds it")

	recreated := lead(t, s, tp)[0]
	require.NotSame(t, old, recreated)
	for i := range 30 {
		require.Zero(t, produce(t, s, tp, -1, 0, fmt.Sprintf("new-%d", i)).ErrorCode)
	}
	shutdown()
	for offset, path := range snapshots(recreated.Log.Dir()) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		st := producer.NewState()
		require.NoError(t, st.LoadSnapshot(data))
		_, stale := st.Entry(1000)
		t.Errorf("a snapshot at %d in the new partition's directory, holding %d producers (the deleted partition's producer 1000: %v)",
			offset, st.Len(), stale)
	}

	s, _ = newTestServer(t, dir, props)
	lead(t, s, tp)
	out := produce(t, s, tp, 1000, 0, "new-producer-0")
	require.Zero(t, out.ErrorCode, "sequence 0 of a producer the new partition never saw (%s)", kerr.ErrorForCode(out.ErrorCode))
	require.Equal(t, int64(30), out.BaseOffset)
}
