package replica

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// The seams stage 04 builds on, each tested here where the code lives.

// inSyncOnly counts the ISR, as stage 04 does.
type inSyncOnly struct{}

func (inSyncOnly) Counted(local int32, _, isr []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return id == local })
}

// recorder is a Listener that reads the partition back from inside each
// call, which deadlocks if a call is made with the partition's lock held.
type recorder struct {
	NopListener // Replicated and Truncated: TestListenerHearsOfReplicationAndTruncation
	mu          sync.Mutex
	events      []string
}

func (r *recorder) add(p *Partition, what string) {
	p.HighWatermark() // takes the read lock
	p.LeaderView()
	r.mu.Lock()
	r.events = append(r.events, what)
	r.mu.Unlock()
}
func (r *recorder) Appended(p *Partition)                 { r.add(p, "appended") }
func (r *recorder) HighWatermarkAdvanced(p *Partition)    { r.add(p, "hw") }
func (r *recorder) FollowerFetched(p *Partition, _ int32) { r.add(p, "fetched") }
func (r *recorder) StateChanged(p *Partition)             { r.add(p, "state") }
func (r *recorder) take() []string                        { defer func() { r.events = nil }(); return r.events }
func newListenedPartition(t *testing.T, q Quorum, l Listener) *Partition {
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	lg, err := commitlog.Open(filepath.Join(t.TempDir(), tp.String()), commitlog.DefaultConfig(), commitlog.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	p, err := newPartition(&store.Partition{TopicPartition: tp, Log: lg}, 0, 0, Options{Quorum: q, Listener: l, Logger: quiet, Now: newClock().Now})
	require.NoError(t, err)
	return p
}

func TestListenerHearsOfEachChangeWithNoLockHeld(t *testing.T) {
	rec := &recorder{}
	p := newListenedPartition(t, AllReplicas{}, rec)
	require.NoError(t, p.MakeLeader(leaderState(0, 0, 1)))
	require.Empty(t, rec.take(), "role changes are told by the Manager (TestManagerTellsStateChangesOutsideItsLock)")
	_, _, err := p.AppendAsLeader(batch(t, "a"))
	require.NoError(t, err)
	require.Equal(t, []string{"appended"}, rec.take(), "broker 1 has not fetched: no new high watermark")
	require.NoError(t, p.UpdateFollowerFetchState(1, 1, 0, -1))
	require.Equal(t, []string{"fetched", "hw"}, rec.take())
}

// lookingUp is a Listener that, like stage 04's, looks partitions up in
// the Manager when told of a state change: that deadlocks if the Manager
// tells it while holding its own lock.
type lookingUp struct {
	NopListener
	m       *Manager
	changed chan commitlog.TopicPartition
}

func (l *lookingUp) StateChanged(p *Partition) {
	l.m.Partition(p.TopicPartition.Topic, p.TopicPartition.Partition)
	l.changed <- p.TopicPartition
}

func TestManagerTellsStateChangesOutsideItsLock(t *testing.T) {
	l := &lookingUp{changed: make(chan commitlog.TopicPartition, 10)}
	m := newTestManager(t, Config{BrokerID: 0}, Options{Listener: l})
	l.m = m
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	done := make(chan error, 1)
	go func() {
		_, err := m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp: {Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}}, nil)
		if err == nil {
			_, err = m.StopReplica(0, []commitlog.TopicPartition{tp}, false)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: the Manager told the listener while holding its lock")
	}
	require.Equal(t, tp, <-l.changed, "became leader")
	require.Equal(t, tp, <-l.changed, "stopped")
}

func TestUpdateISRMovesTheHighWatermarkAtOnce(t *testing.T) {
	rec := &recorder{}
	p := newListenedPartition(t, inSyncOnly{}, rec)
	require.NoError(t, p.MakeLeader(LeaderAndIsrState{Leader: 0, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}}))
	_, _, err := p.AppendAsLeader(batch(t, "a", "b"))
	require.NoError(t, err)
	require.NoError(t, p.UpdateFollowerFetchState(1, 2, 0, -1))
	require.Zero(t, p.HighWatermark(), "broker 2 is in the ISR and has nothing")
	rec.take()

	require.False(t, p.UpdateISR(1, 5, []int32{0, 1}, 6), "an older leader epoch")
	require.False(t, p.UpdateISR(2, 4, []int32{0, 1}, 6), "computed from an older state")
	require.True(t, p.UpdateISR(2, 5, []int32{0, 1}, 6))
	require.Equal(t, int64(2), p.HighWatermark(), "the slow follower left: committed at once")
	require.Equal(t, []string{"state", "hw"}, rec.take())
	v, ok := p.LeaderView()
	require.True(t, ok)
	require.Equal(t, []int32{0, 1}, v.ISR)
	require.EqualValues(t, 6, v.PartitionEpoch)
	require.False(t, p.UpdateISR(2, 5, []int32{0}, 7), "the state moved on to epoch 6")
}

func TestAppendUnderMinISRWritesNothing(t *testing.T) {
	p := newListenedPartition(t, inSyncOnly{}, NopListener{})
	require.NoError(t, p.MakeLeader(LeaderAndIsrState{Leader: 0, LeaderEpoch: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0}}))
	_, _, err := p.AppendAsLeaderMinISR(batch(t, "a"), 2)
	require.ErrorIs(t, err, ErrNotEnoughReplicas)
	require.EqualValues(t, 19, ErrorCode(err), "NOT_ENOUGH_REPLICAS")
	require.Zero(t, p.Log.EndOffset())
	_, _, err = p.AppendAsLeaderMinISR(batch(t, "a"), 1)
	require.NoError(t, err)
}

func TestFollowerHighWatermarkFollowsTheLeaderEvenBackwards(t *testing.T) {
	data := leaderLog(t)
	f := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, f.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 0}}))
	_, err := f.AppendAsFollower(data, 6)
	require.NoError(t, err)
	require.Equal(t, int64(6), f.HighWatermark())
	// A new leader that had learned a lower high watermark: Kafka's
	// follower takes it (updateHighWatermark), it does not keep its own.
	_, err = f.AppendAsFollower(nil, 4)
	require.NoError(t, err)
	require.Equal(t, int64(4), f.HighWatermark())
	_, err = f.AppendAsFollower(nil, 99)
	require.NoError(t, err)
	require.Equal(t, int64(6), f.HighWatermark(), "never past its own log end")
}

func TestRetentionStopsAtTheHighWatermarkAndTrimsTheEpochCache(t *testing.T) {
	dir := t.TempDir()
	var m *Manager
	cfg := commitlog.DefaultManagerConfig()
	cfg.Log.SegmentBytes = 1024
	cfg.Log.RetentionBytes = 0
	cfg.Log.FileDeleteDelay = time.Millisecond
	cfg.RetentionCheckInterval = time.Hour // the test runs retention itself
	st, err := store.Open(dir, 0, cfg, store.Options{Logger: quiet,
		RetentionLimit:      func(tp commitlog.TopicPartition, l *commitlog.Log) int64 { return m.RetentionLimit(tp, l) },
		StartOffsetAdvanced: func(tp commitlog.TopicPartition, l *commitlog.Log, start int64) { m.StartOffsetAdvanced(tp, l, start) }})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	rec := &batchRecorder{}
	m, err = NewManager(Config{BrokerID: 0, HighWatermarkCheckpointInterval: time.Hour}, st, Options{Logger: quiet, Listener: rec})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })

	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	state := LeaderAndIsrState{Leader: 0, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
	_, err = m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp: state}, nil)
	require.NoError(t, err)
	p, _ := m.Partition("t", 0)
	for epoch := range int32(3) {
		if epoch > 0 {
			state.LeaderEpoch = epoch
			_, err = m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp: state}, nil)
			require.NoError(t, err)
		}
		for range 20 {
			_, _, err := p.AppendAsLeader(batch(t, string(make([]byte, 100))))
			require.NoError(t, err)
		}
	}
	require.Zero(t, p.HighWatermark(), "broker 1 never fetched")
	_, err = st.DeleteOldSegments()
	require.NoError(t, err)
	require.Zero(t, p.Log.StartOffset(), "nothing uncommitted is deleted")

	require.NoError(t, p.UpdateFollowerFetchState(1, 45, 0, -1))
	_, err = st.DeleteOldSegments()
	require.NoError(t, err)
	start := p.Log.StartOffset()
	require.Positive(t, start)
	require.LessOrEqual(t, start, int64(45), "retention stops at the high watermark")
	// Epochs 0, 1 and 2 started at 0, 20 and 40: those that ended before
	// the new start are forgotten, and the one holding it starts there.
	entries := p.Epochs.Entries()
	require.Equal(t, start, entries[0].StartOffset)
	require.Equal(t, int32(start/20), entries[0].Epoch)
	require.Equal(t, int32(2), entries[len(entries)-1].Epoch)
	require.Equal(t, []int64{start}, rec.starts, "the listener hears of the new start")
}

// TestLeaderAndIsrDoesNotWaitOnAFetcherCheckingForAPause: LeaderAndIsr
// stops fetchers while it holds the Manager's lock, and a fetcher checks
// for a pause (PauseFetching) at every turn of its loop: the pause must
// not be behind the same lock, or the two wait for each other.
func TestLeaderAndIsrDoesNotWaitOnAFetcherCheckingForAPause(t *testing.T) {
	// Nobody listens at the leader's address: the fetcher turns its loop
	// every millisecond, checking for a pause each time.
	m := newTestManager(t, Config{BrokerID: 0, FetchBackoff: time.Millisecond}, Options{})
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	done := make(chan error, 1)
	go func() {
		for epoch := range int32(200) {
			leader := epoch % 2 // follower of 1, leader, follower of 1, ...
			if leader == 0 {
				leader = 1
			} else {
				leader = 0
			}
			s := LeaderAndIsrState{Leader: leader, LeaderEpoch: epoch, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
			if _, err := m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp: s}, map[int32]string{1: "127.0.0.1:1"}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock: LeaderAndIsr waited for a fetcher that waited for the Manager's lock")
	}
}

// TestAFollowerCatchingUpBoundsTheHighWatermark: with the ISR down to the
// leader, a follower outside it that caught up lately counts for the high
// watermark (Kafka 2.x's rule), so the high watermark waits for it and it
// can reach it and rejoin; one that never caught up does not count.
func TestAFollowerCatchingUpBoundsTheHighWatermark(t *testing.T) {
	c := newClock()
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	lg, err := commitlog.Open(filepath.Join(t.TempDir(), tp.String()), commitlog.DefaultConfig(), commitlog.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	p, err := newPartition(&store.Partition{TopicPartition: tp, Log: lg}, 0, 0,
		Options{Quorum: inSyncOnly{}, Listener: NopListener{}, LagTimeMax: 10 * time.Second, Logger: quiet, Now: c.Now})
	require.NoError(t, err)
	require.NoError(t, p.MakeLeader(LeaderAndIsrState{Leader: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0}}))
	_, _, err = p.AppendAsLeader(batch(t, "a", "b"))
	require.NoError(t, err)
	require.Equal(t, int64(2), p.HighWatermark(), "nobody else has fetched: the leader alone")

	require.NoError(t, p.UpdateFollowerFetchState(1, 2, 0, -1)) // caught up now
	_, _, err = p.AppendAsLeader(batch(t, "c", "d"))
	require.NoError(t, err)
	require.Equal(t, int64(2), p.HighWatermark(), "follower 1 caught up lately: the high watermark waits for it")
	require.NoError(t, p.UpdateFollowerFetchState(1, 4, 0, -1))
	require.Equal(t, int64(4), p.HighWatermark())

	require.NoError(t, p.UpdateFollowerFetchState(2, 0, 0, -1)) // far behind, never caught up
	_, _, err = p.AppendAsLeader(batch(t, "e"))
	require.NoError(t, err)
	require.NoError(t, p.UpdateFollowerFetchState(1, 5, 0, -1))
	require.Equal(t, int64(5), p.HighWatermark(), "follower 2 does not hold it back")

	c.Advance(11 * time.Second)
	_, _, err = p.AppendAsLeader(batch(t, "f"))
	require.NoError(t, err)
	require.Equal(t, int64(6), p.HighWatermark(), "follower 1 has not caught up for longer than the lag: it no longer counts")
}

// batchRecorder records what a follower's log gains and loses.
type batchRecorder struct {
	NopListener
	replicated int
	truncated  []int64
	starts     []int64
}

func (r *batchRecorder) LogStartAdvanced(_ *Partition, start int64) {
	r.starts = append(r.starts, start)
}

func (r *batchRecorder) Replicated(_ *Partition, batches []byte) { r.replicated += len(batches) }
func (r *batchRecorder) Truncated(_ *Partition, end int64)       { r.truncated = append(r.truncated, end) }

func TestListenerHearsOfReplicationAndTruncation(t *testing.T) {
	data := leaderLog(t)
	rec := &batchRecorder{}
	f := newListenedPartition(t, AllReplicas{}, rec)
	require.NoError(t, f.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 0}}))
	_, err := f.AppendAsFollower(data[:len(data)-5], 6) // the last batch is partial: left for the next fetch
	require.NoError(t, err)
	require.Equal(t, len(data)/3*2, rec.replicated, "the whole batches only")
	require.NoError(t, f.TruncateTo(2))
	require.NoError(t, f.TruncateFullyAndStartAt(9))
	require.Equal(t, []int64{2, 9}, rec.truncated)
}

// leaderLog is what a leader alone writes in epoch 0: three batches of two
// records.
func leaderLog(t *testing.T) []byte {
	leader := newTestPartition(t, noFollowers{}, newClock())
	require.NoError(t, leader.MakeLeader(leaderState(0, 0)))
	var data []byte
	for range 3 {
		b := batch(t, "a", "b")
		_, _, err := leader.AppendAsLeader(b)
		require.NoError(t, err)
		data = append(data, b...)
	}
	return data
}

// newTestManager is a replica manager over a store in a temporary
// directory, quiet, with no high watermark checkpoints during the test.
func newTestManager(t *testing.T, cfg Config, opts Options) *Manager {
	st, err := store.Open(t.TempDir(), cfg.BrokerID, commitlog.DefaultManagerConfig(), store.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	cfg.HighWatermarkCheckpointInterval = time.Hour
	opts.Logger = quiet
	m, err := NewManager(cfg, st, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}
