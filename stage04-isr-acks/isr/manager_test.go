package isr

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

var quiet = slog.New(slog.DiscardHandler)

// The Manager against a replica.Manager whose partitions this broker (0)
// leads, with replicas [0 1 2] and ISR [0 1]: follower 2 is out until it
// fetches at the leader's end (UpdateFollowerFetchState, what a Fetch
// request from broker 2 does), when the listener calls MaybeExpand, as
// stage 04's server does.

// expandOnFetch is the part of the server's listener that matters here.
type expandOnFetch struct {
	replica.NopListener
	m atomic.Pointer[Manager]
}

func (l *expandOnFetch) FollowerFetched(p *replica.Partition, follower int32) {
	if m := l.m.Load(); m != nil {
		m.MaybeExpand(p, follower)
	}
}

// leader is broker 0 leading n partitions, t-0 ... t-<n-1>.
type leader struct {
	t          *testing.T
	replicas   *replica.Manager
	isr        *Manager
	states     *MemoryStore
	partitions []*replica.Partition
}

func startLeader(t *testing.T, states StateStore, mem *MemoryStore, n int, opts Options) *leader {
	t.Helper()
	st, err := store.Open(t.TempDir(), 0, commitlog.DefaultManagerConfig(), store.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	l := &expandOnFetch{}
	rm, err := replica.NewManager(replica.Config{BrokerID: 0, HighWatermarkCheckpointInterval: time.Hour}, st,
		replica.Options{Quorum: Quorum{}, Listener: l, Logger: quiet, Now: opts.Now})
	require.NoError(t, err)
	t.Cleanup(func() { rm.Close() })
	ld := &leader{t: t, replicas: rm, states: mem}
	for i := range n {
		tp := commitlog.TopicPartition{Topic: "t", Partition: int32(i)}
		require.NoError(t, mem.Create(StatePath(tp), PartitionState{ControllerEpoch: 1, Leader: 0, ISR: []int32{0, 1}}.Encode()))
		ld.leaderAndIsr(tp, 0, 0)
		p, ok := rm.Partition(tp.Topic, tp.Partition)
		require.True(t, ok)
		ld.partitions = append(ld.partitions, p)
	}
	opts.Logger = quiet
	ld.isr = NewManager(0, rm, states, time.Hour, opts) // no shrink: nobody lags for an hour
	l.m.Store(ld.isr)
	ld.isr.Start()
	t.Cleanup(ld.isr.Close) // before the replica manager closes
	return ld
}

// leaderAndIsr makes broker 0 lead tp at the epochs given, ISR [0 1].
func (ld *leader) leaderAndIsr(tp commitlog.TopicPartition, leaderEpoch, partitionEpoch int32) {
	ld.t.Helper()
	errs, err := ld.replicas.LeaderAndIsr(1, map[commitlog.TopicPartition]replica.LeaderAndIsrState{tp: {ControllerEpoch: 1, Leader: 0,
		LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch, ISR: []int32{0, 1}, Replicas: []int32{0, 1, 2}}}, nil)
	require.NoError(ld.t, err)
	require.NoError(ld.t, errs[tp])
}

// fetch is a Fetch from follower 2 at the leader's log end; it fails the
// test if the call does not return in time.
func (ld *leader) fetch(p *replica.Partition, what string) {
	ld.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.UpdateFollowerFetchState(2, p.Log.EndOffset(), 0, -1) }()
	select {
	case err := <-done:
		require.NoError(ld.t, err)
	case <-time.After(10 * time.Second):
		ld.t.Fatalf("%s waited for the state store", what)
	}
}

// waitISR waits until p's ISR, in the partition and in the store, is want.
func (ld *leader) waitISR(p *replica.Partition, want ...int32) {
	ld.t.Helper()
	require.Eventually(ld.t, func() bool {
		_, isr := p.Replicas()
		stored, _, err := ld.states.PartitionState(p.TopicPartition)
		return slices.Equal(isr, want) && err == nil && slices.Equal(stored.ISR, want)
	}, 10*time.Second, time.Millisecond, "%s: ISR %v", p.TopicPartition, want)
}

// notifications returns the ISR change notifications written, oldest first.
func (ld *leader) notifications() [][]commitlog.TopicPartition {
	var out [][]commitlog.TopicPartition
	for _, path := range ld.states.Children(IsrChangeNotificationPath) {
		data, _, err := ld.states.Get(path)
		require.NoError(ld.t, err)
		tps, err := DecodeIsrChange(data)
		require.NoError(ld.t, err)
		out = append(out, tps)
	}
	return out
}

// slowStore is a MemoryStore whose ISR writes wait until released, like a
// ZooKeeper that does not answer.
type slowStore struct {
	*MemoryStore
	entered     chan commitlog.TopicPartition // a write began
	release     chan struct{}                 // closed: writes go through
	releaseOnce sync.Once
}

func newSlowStore() *slowStore {
	return &slowStore{MemoryStore: NewMemoryStore(), entered: make(chan commitlog.TopicPartition, 100), release: make(chan struct{})}
}

func (s *slowStore) UpdatePartitionState(tp commitlog.TopicPartition, st PartitionState, expected int32) (int32, error) {
	s.entered <- tp
	<-s.release
	return s.MemoryStore.UpdatePartitionState(tp, st, expected)
}

func (s *slowStore) Release() { s.releaseOnce.Do(func() { close(s.release) }) }

// writing waits until a write of tp has begun.
func (s *slowStore) writing(t *testing.T, tp commitlog.TopicPartition) {
	t.Helper()
	select {
	case got := <-s.entered:
		require.Equal(t, tp, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("no write of %s began", tp)
	}
}

// fakeClock is the partitions' and the Manager's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestAFollowerFetchDoesNotWaitForTheStateStore: MaybeExpand runs on the
// Fetch request's handler. With the store's write blocked (ZooKeeper
// slow), a follower's fetch that makes it rejoin returns at once, and so
// do the next fetch of the same partition and a fetch of another
// partition. Once the store answers, both join, each with one write: the
// second fetch of the first partition, with a change in flight, queued
// nothing more.
func TestAFollowerFetchDoesNotWaitForTheStateStore(t *testing.T) {
	slow := newSlowStore()
	ld := startLeader(t, slow, slow.MemoryStore, 2, Options{})
	t.Cleanup(slow.Release) // before Close, should the test fail with a write blocked
	p0, p1 := ld.partitions[0], ld.partitions[1]

	ld.fetch(p0, "a follower's fetch that makes it rejoin")
	slow.writing(t, p0.TopicPartition)
	ld.fetch(p0, "the next fetch of the same partition, its ISR write in flight")
	ld.fetch(p1, "a fetch of another partition")
	_, isr := p0.Replicas()
	require.Equal(t, []int32{0, 1}, isr, "not installed before the store has it")

	slow.Release()
	ld.waitISR(p0, 0, 1, 2)
	ld.waitISR(p1, 0, 1, 2)
	require.Equal(t, uint64(2), ld.isr.Expands())
	require.Len(t, slow.History(StatePath(p0.TopicPartition)), 2, "created, and expanded once")
}

// TestIsrChangesAreNotifiedInOneBatchOnceTheyStopComing: five partitions
// change their ISR within a moment; the controller hears of none of them
// until Linger has passed without a change, then of all five in one
// notification (Kafka: one /isr_change_notification znode).
func TestIsrChangesAreNotifiedInOneBatchOnceTheyStopComing(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	mem := NewMemoryStore()
	ld := startLeader(t, mem, mem, 5, Options{Now: clock.Now,
		Propagation: IsrChangePropagationConfig{CheckInterval: time.Millisecond, Linger: 5 * time.Second, MaxDelay: time.Minute}})
	var want []commitlog.TopicPartition
	for _, p := range ld.partitions {
		ld.fetch(p, "a fetch")
		want = append(want, p.TopicPartition)
	}
	require.Eventually(t, func() bool { return ld.isr.Expands() == 5 }, 10*time.Second, time.Millisecond)
	require.Empty(t, ld.notifications(), "no notification while changes may still come")

	clock.Advance(5*time.Second + time.Millisecond)
	require.Eventually(t, func() bool { return len(ld.notifications()) > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, [][]commitlog.TopicPartition{want}, ld.notifications(), "one notification names the five")
}

// TestIsrChangesThatKeepComingAreNotifiedWithinMaxDelay: a change every
// 4 s, each sooner than Linger (5 s) after the one before, would put the
// notification off for ever; once MaxDelay (60 s) has passed since the
// last notification (here: since the start), the changes so far go out
// in one.
func TestIsrChangesThatKeepComingAreNotifiedWithinMaxDelay(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	mem := NewMemoryStore()
	ld := startLeader(t, mem, mem, 15, Options{Now: clock.Now,
		Propagation: IsrChangePropagationConfig{CheckInterval: time.Millisecond, Linger: 5 * time.Second, MaxDelay: time.Minute}})
	var want []commitlog.TopicPartition
	for i, p := range ld.partitions { // at 4 s, 8 s, ... 60 s
		clock.Advance(4 * time.Second)
		ld.fetch(p, "a fetch")
		want = append(want, p.TopicPartition)
		require.Eventually(t, func() bool { return ld.isr.Expands() == uint64(i+1) }, 10*time.Second, time.Millisecond)
		require.Empty(t, ld.notifications(), "after %d changes, %v in", i+1, time.Duration(i+1)*4*time.Second)
	}
	clock.Advance(4 * time.Second) // 64 s: the last change 4 s ago, the last notification 64 s
	require.Eventually(t, func() bool { return len(ld.notifications()) > 0 }, 10*time.Second, time.Millisecond)
	require.Equal(t, [][]commitlog.TopicPartition{want}, ld.notifications())
}

// TestCloseWaitsForTheISRWriteInFlight: Close returns only once the write
// the writer is making has finished (the broker's shutdown waits for it);
// the change is installed.
func TestCloseWaitsForTheISRWriteInFlight(t *testing.T) {
	slow := newSlowStore()
	ld := startLeader(t, slow, slow.MemoryStore, 1, Options{})
	t.Cleanup(slow.Release)
	p := ld.partitions[0]
	ld.fetch(p, "a fetch")
	slow.writing(t, p.TopicPartition)

	closed := make(chan struct{})
	go func() { ld.isr.Close(); close(closed) }()
	require.Never(t, func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	}, 100*time.Millisecond, time.Millisecond, "Close returned with a write in flight")
	slow.Release()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the write finished")
	}
	ld.waitISR(p, 0, 1, 2)
	require.Equal(t, uint64(1), ld.isr.Expands())
}

// TestALeaderAndIsrArrivingWhileAnISRChangeWaitsWins: one partition's
// expansion is being written, another's queued behind it, when the
// controller writes both states and sends LeaderAndIsr (a new leader
// epoch, ISR [0 1]). The write in flight fails on the version and the
// queued one is dropped: the controller's states stand, nothing is
// counted, and no partition is fenced, since the leader already has the
// new epochs. The next fetches expand both from there.
func TestALeaderAndIsrArrivingWhileAnISRChangeWaitsWins(t *testing.T) {
	slow := newSlowStore()
	ld := startLeader(t, slow, slow.MemoryStore, 2, Options{})
	t.Cleanup(slow.Release)
	p0, p1 := ld.partitions[0], ld.partitions[1]
	ld.fetch(p0, "a fetch")
	slow.writing(t, p0.TopicPartition)
	ld.fetch(p1, "a fetch")

	for _, p := range ld.partitions {
		v, err := slow.Set(StatePath(p.TopicPartition), PartitionState{ControllerEpoch: 1, Leader: 0, LeaderEpoch: 1, ISR: []int32{0, 1}}.Encode(), 0)
		require.NoError(t, err)
		ld.leaderAndIsr(p.TopicPartition, 1, v)
	}
	slow.Release()
	// Fetches go on; once the writer is done with the old changes, the
	// next fetches queue new ones, from the new epochs.
	for deadline := time.Now().Add(10 * time.Second); ld.isr.Expands() < 2; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "both partitions expand at the new epochs")
		ld.fetch(p0, "a fetch at the new epoch")
		ld.fetch(p1, "a fetch at the new epoch")
	}
	ld.waitISR(p0, 0, 1, 2)
	ld.waitISR(p1, 0, 1, 2)
	require.Empty(t, ld.isr.Fenced())
	for _, p := range ld.partitions {
		var isrs []string
		for _, w := range slow.History(StatePath(p.TopicPartition)) {
			s, err := DecodePartitionState(w.Data)
			require.NoError(t, err)
			isrs = append(isrs, fmt.Sprintf("epoch %d %v @%d", s.LeaderEpoch, s.ISR, w.Version))
		}
		require.Equal(t, []string{"epoch 0 [0 1] @0", "epoch 1 [0 1] @1", "epoch 1 [0 1 2] @2"}, isrs,
			"%s: the controller's write, then the leader's from it", p.TopicPartition)
	}
}
