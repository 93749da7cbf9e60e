package replica

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// The lock hierarchy of chapter 3, "Locks", each rule tested where it can
// break: a listener told with a lock held, a LeaderAndIsr holding a lock
// that client requests need across a wait or a disk write.

var (
	tp0 = commitlog.TopicPartition{Topic: "t", Partition: 0}
	tp1 = commitlog.TopicPartition{Topic: "t", Partition: 1}
)

// holdingOnce is a Listener that, the first time it hears of an append
// to tp0, says so on applying and waits for proceed; lookUp, if set, then
// looks partitions up in the Manager, as stage 04's listener does (it
// completes delayed fetches, which find their partitions there).
type holdingOnce struct {
	NopListener
	m        *Manager
	lookUp   bool
	once     sync.Once
	applying chan struct{}
	proceed  chan struct{}
	looked   chan struct{}
}

func newHoldingOnce(lookUp bool) *holdingOnce {
	return &holdingOnce{lookUp: lookUp, applying: make(chan struct{}), proceed: make(chan struct{}), looked: make(chan struct{})}
}

func (l *holdingOnce) Appended(p *Partition) {
	if p.TopicPartition != tp0 {
		return
	}
	l.once.Do(func() {
		close(l.applying)
		<-l.proceed
		if l.lookUp {
			l.m.Partition(tp1.Topic, tp1.Partition)
			l.m.Partitions()
			close(l.looked)
		}
	})
}

// leaderAndIsr gives broker 0 a role for tp, at epoch, led by leader
// (broker 1 listens at addr), and fails the test on an error.
func leaderAndIsr(t *testing.T, m *Manager, tp commitlog.TopicPartition, leader, epoch int32, addr string) {
	t.Helper()
	results, err := m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{
		tp: {Leader: leader, LeaderEpoch: epoch, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}}, map[int32]string{1: addr})
	require.NoError(t, err)
	require.NoError(t, results[tp], tp)
}

// leaderWithData answers the first fetch from offset 0 with three
// batches, and holds every other one as a long poll.
func leaderWithData(t *testing.T) *fakeLeader {
	data := leaderLog(t)
	return newFakeLeader(t, func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
		if fetchOffset(req) == 0 {
			return fetchAnswer(req, 0, data, 6, 0)
		}
		longPoll(ctx, req)
		return fetchAnswer(req, 0, nil, 6, 0)
	})
}

// TestLeaderAndIsrStopsAFetchWhoseListenerLooksPartitionsUp is the
// deadlock of the item 1: a LeaderAndIsr stopping a partition's
// fetch waits for the answer being applied to it, while the fetcher,
// applying it, tells the listener, which looks partitions up in the
// Manager. Before, the LeaderAndIsr held Manager.mu while it waited, and
// the fetcher held its applyMu while it told: neither ever went on.
func TestLeaderAndIsrStopsAFetchWhoseListenerLooksPartitionsUp(t *testing.T) {
	l := newHoldingOnce(true)
	m := newLockTestManager(t, l)
	l.m = m
	leader := leaderWithData(t)
	leaderAndIsr(t, m, tp0, 1, 1, leader.addr)
	within(t, 10*time.Second, l.applying, "the follower's first append")
	f := m.fetchers[1] // written by the LeaderAndIsr above, on this goroutine

	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderAndIsr(t, m, tp0, 0, 2, leader.addr) // broker 0 leads: stop fetching
	}()
	// Once the partition has left its fetcher, the LeaderAndIsr is
	// waiting for the apply in progress; let the listener look up.
	eventually(t, 10*time.Second, func() bool { _, ok := f.state(tp0); return !ok }, "LeaderAndIsr removes the fetch")
	close(l.proceed)
	within(t, 10*time.Second, l.looked, "deadlock: the listener, told by the fetcher, could not look a partition up while a LeaderAndIsr waited for that fetcher")
	within(t, 10*time.Second, done, "deadlock: LeaderAndIsr waited for a fetcher telling its listener")
	p, ok := m.Partition(tp0.Topic, tp0.Partition)
	require.True(t, ok)
	require.Equal(t, Leader, p.Role())
	require.Equal(t, int64(6), p.Log.EndOffset(), "what was applied before the role changed stays")
}

// TestLeaderAndIsrWaitingForAFetcherDoesNotStallLookupsOrProduces: while
// a LeaderAndIsr waits for a fetcher (here, one whose listener is slow to
// hear of an append; Kafka's fetcher threads are as slow as their disk),
// requests for other partitions go on: the lookup every Produce and Fetch
// makes, and an append. Before, the LeaderAndIsr held Manager.mu across
// the wait, and every lookup of the broker waited behind it.
func TestLeaderAndIsrWaitingForAFetcherDoesNotStallLookupsOrProduces(t *testing.T) {
	l := newHoldingOnce(false)
	m := newLockTestManager(t, l)
	leader := leaderWithData(t)
	t.Cleanup(func() {
		select {
		case <-l.proceed:
		default:
			close(l.proceed) // a failed test lets the fetcher go on
		}
	})
	results, err := m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp1: leaderState(0, 0)}, nil)
	require.NoError(t, err)
	require.NoError(t, results[tp1])
	leaderAndIsr(t, m, tp0, 1, 1, leader.addr)
	within(t, 10*time.Second, l.applying, "the follower's first append")
	f := m.fetchers[1]

	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderAndIsr(t, m, tp0, 0, 2, leader.addr)
	}()
	eventually(t, 10*time.Second, func() bool { _, ok := f.state(tp0); return !ok }, "LeaderAndIsr removes the fetch")

	served, b := make(chan struct{}), batch(t, "b")
	go func() {
		defer close(served)
		p, ok := m.Partition(tp1.Topic, tp1.Partition)
		if !ok {
			return
		}
		m.Partitions()
		m.ControllerEpoch()
		p.AppendAsLeader(b)
	}()
	within(t, 5*time.Second, served, "a lookup and an append on another partition waited for a LeaderAndIsr waiting for a fetcher")
	p1, _ := m.Partition(tp1.Topic, tp1.Partition)
	require.Equal(t, int64(1), p1.Log.EndOffset())
	select {
	case <-done:
		t.Fatal("the LeaderAndIsr did not wait for the fetcher's apply in progress")
	default:
	}
	close(l.proceed)
	within(t, 10*time.Second, done, "LeaderAndIsr after the fetcher's apply")
}

// TestASlowLeaderEpochCheckpointDoesNotStallLookupsOrProduces: the
// leader-epoch-checkpoint of a partition becoming leader cannot be
// written (its temporary file is a FIFO nobody reads: a write that blocks,
// as on a disk that stalls). The LeaderAndIsr still answers, and requests
// for other partitions go on; the partition's own first append writes
// its epoch to the checkpoint before its batch reaches the log. Before,
// MakeLeader wrote and fsynced the checkpoint under the partition's lock
// and the Manager's: every lookup of the broker waited for the disk.
func TestASlowLeaderEpochCheckpointDoesNotStallLookupsOrProduces(t *testing.T) {
	m := newLockTestManager(t, NopListener{})
	results, err := m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp1: leaderState(0, 0)}, nil)
	require.NoError(t, err)
	require.NoError(t, results[tp1])
	eventually(t, 10*time.Second, func() bool { return checkpointHolds(t, m, tp1, 0) }, "broker 0's epoch 0 of t-1 written")
	leaderAndIsr(t, m, tp0, 1, 0, "127.0.0.1:1") // a follower, so that its directory exists
	p0, _ := m.Partition(tp0.Topic, tp0.Partition)
	fifo := filepath.Join(p0.Log.Dir(), LeaderEpochCheckpointFile+".tmp")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	unblock := sync.OnceFunc(func() {
		// Reading the FIFO lets the write go on: its fsync fails (a
		// FIFO cannot be synced), and the writer removes its file.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		defer r.Close()
		eventually(t, 10*time.Second, func() bool { _, err := os.Stat(fifo); return os.IsNotExist(err) }, "the blocked checkpoint write ends")
	})
	t.Cleanup(unblock)

	done := make(chan struct{})
	go func() {
		defer close(done)
		m.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp0: leaderState(1, 0, 1)}, nil)
	}()
	eventually(t, 10*time.Second, func() bool { return goroutineIn("commitlog.WriteFileAtomic") }, "the checkpoint write starts")

	served, b := make(chan struct{}), batch(t, "b")
	go func() {
		defer close(served)
		p, ok := m.Partition(tp1.Topic, tp1.Partition)
		if !ok {
			return
		}
		m.Partitions()
		p.AppendAsLeader(b)
	}()
	within(t, 5*time.Second, served, "a lookup and an append on another partition waited for a leader epoch checkpoint write")
	p1, _ := m.Partition(tp1.Topic, tp1.Partition)
	require.Equal(t, int64(1), p1.Log.EndOffset())
	within(t, 5*time.Second, done, "the LeaderAndIsr waited for its leader epoch checkpoint write")
	require.Equal(t, Leader, p0.Role())
	require.False(t, checkpointHolds(t, m, tp0, 1), "nothing written yet")

	unblock()
	_, _, err = p0.AppendAsLeader(batch(t, "a"))
	require.NoError(t, err)
	require.True(t, checkpointHolds(t, m, tp0, 1), "the epoch is on disk once its first batch is in the log")
}

// checkpointHolds reports whether tp's leader-epoch-checkpoint file names
// epoch.
func checkpointHolds(t *testing.T, m *Manager, tp commitlog.TopicPartition, epoch int32) bool {
	p, ok := m.Partition(tp.Topic, tp.Partition)
	require.True(t, ok)
	c, err := OpenLeaderEpochCache(p.Log.Dir())
	if err != nil {
		return false // being replaced
	}
	return slices.ContainsFunc(c.Entries(), func(e EpochEntry) bool { return e.Epoch == epoch })
}

// TestALeaderWritesItsEpochBeforeItsFirstBatch: MakeLeader records the new
// epoch in memory only, with no fsync under the partition's lock; the
// first append writes it to the checkpoint before the batch reaches the
// log, so that no batch is on disk whose epoch the checkpoint lacks.
func TestALeaderWritesItsEpochBeforeItsFirstBatch(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, p.MakeLeader(leaderState(3, 0)))
	require.Equal(t, []EpochEntry{{3, 0}}, p.Epochs.Entries())
	onDisk := func() []EpochEntry {
		c, err := OpenLeaderEpochCache(p.Log.Dir())
		require.NoError(t, err)
		return c.Entries()
	}
	require.Empty(t, onDisk(), "MakeLeader writes no checkpoint under the partition's lock")
	_, _, err := p.AppendAsLeader(batch(t, "a"))
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{3, 0}}, onDisk())
}

// TestNewLeadersEpochsReachTheirCheckpointsWithoutAnAppend: the epochs a
// LeaderAndIsr leaves in memory are written in the background, and by
// Close at the latest.
func TestNewLeadersEpochsReachTheirCheckpointsWithoutAnAppend(t *testing.T) {
	m := newTestManager(t, Config{BrokerID: 0}, Options{})
	states := map[commitlog.TopicPartition]LeaderAndIsrState{}
	for i := range int32(20) {
		states[commitlog.TopicPartition{Topic: "t", Partition: i}] = leaderState(4, 0)
	}
	results, err := m.LeaderAndIsr(0, states, nil)
	require.NoError(t, err)
	for tp := range states {
		require.NoError(t, results[tp])
		eventually(t, 10*time.Second, func() bool { return checkpointHolds(t, m, tp, 4) }, fmt.Sprintf("%s's epoch written", tp))
	}

	st, err := store.Open(t.TempDir(), 0, commitlog.DefaultManagerConfig(), store.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	closing, err := NewManager(Config{BrokerID: 0, HighWatermarkCheckpointInterval: time.Hour}, st, Options{Logger: quiet})
	require.NoError(t, err)
	_, err = closing.LeaderAndIsr(0, map[commitlog.TopicPartition]LeaderAndIsrState{tp0: leaderState(7, 0)}, nil)
	require.NoError(t, err)
	p, _ := closing.Partition(tp0.Topic, tp0.Partition)
	require.NoError(t, closing.Close())
	c, err := OpenLeaderEpochCache(p.Log.Dir())
	require.NoError(t, err)
	require.Equal(t, []EpochEntry{{7, 0}}, c.Entries(), "written by Close at the latest")
}

// probe is a lock the listener checks it was not called with.
type probe interface {
	TryLock() bool
	Unlock()
}

// lockProbe is a Listener that, in every call, checks that no lock of
// this package it can reach is held (TryLock keeps failing while the
// calling goroutine holds it; another goroutine holds one only for a
// moment), looks partitions up and reads the partition, and records the
// call and any lock found held.
type lockProbe struct {
	m *Manager

	mu       sync.Mutex
	fetchers []*fetcher // the Manager's, as the test last saw them. Protected by mu.
	calls    []string   // Protected by mu.
	held     []string   // Protected by mu.
	seen     chan string
}

func (l *lockProbe) check(p *Partition, call string) {
	l.mu.Lock()
	fetchers := l.fetchers
	l.mu.Unlock()
	locks := map[string]probe{"Partition.mu": &p.mu, "LeaderEpochCache.mu": &p.Epochs.mu, "LeaderEpochCache.flushMu": &p.Epochs.flushMu,
		"Manager.mu": &l.m.mu, "Manager.stateMu": &l.m.stateMu, "Manager.pauseMu": &l.m.pauseMu, "Manager.hwMu": &l.m.hwMu}
	for _, f := range fetchers {
		locks[fmt.Sprintf("fetcher %d mu", f.leaderID)] = &f.mu
	}
	var held []string
	for name, lock := range locks {
		free := false
		for deadline := time.Now().Add(time.Second); !free && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			free = lock.TryLock()
		}
		if free {
			lock.Unlock()
		} else {
			held = append(held, call+" with "+name+" held")
		}
	}
	// Calling back: this deadlocks if a lock they take is held.
	l.m.Partition(p.TopicPartition.Topic, p.TopicPartition.Partition)
	l.m.Partitions()
	p.HighWatermark()
	p.LeaderView()
	p.Epochs.Entries()
	l.mu.Lock()
	l.calls = append(l.calls, call)
	l.held = append(l.held, held...)
	l.mu.Unlock()
	l.seen <- call
}

func (l *lockProbe) Appended(p *Partition)                 { l.check(p, "Appended") }
func (l *lockProbe) HighWatermarkAdvanced(p *Partition)    { l.check(p, "HighWatermarkAdvanced") }
func (l *lockProbe) FollowerFetched(p *Partition, _ int32) { l.check(p, "FollowerFetched") }
func (l *lockProbe) Replicated(p *Partition, _ []byte)     { l.check(p, "Replicated") }
func (l *lockProbe) Truncated(p *Partition, _ int64)       { l.check(p, "Truncated") }
func (l *lockProbe) LogStartAdvanced(p *Partition, _ int64) {
	l.check(p, "LogStartAdvanced")
}
func (l *lockProbe) StateChanged(p *Partition) { l.check(p, "StateChanged") }

// take returns the calls recorded so far, and forgets them.
func (l *lockProbe) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// TestListenerIsToldOfEveryChangeWithNoLockHeld: every Listener call, from
// the fetcher applying a leader's answers (records, high watermark, log
// start, a truncation) and from the Manager and the partition serving
// requests, is made with no lock of this package held, in the order the
// changes happened. Before, the fetcher told its listener with its
// applyMu held.
func TestListenerIsToldOfEveryChangeWithNoLockHeld(t *testing.T) {
	l := &lockProbe{seen: make(chan string, 100)}
	m := newLockTestManager(t, l)
	l.m = m
	data := leaderLog(t) // offsets 0-5, epoch 0
	var answered atomic.Int32
	start := make(chan struct{})
	leader := newFakeLeader(t, func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
		select {
		case <-start:
		case <-ctx.Done():
		}
		n := answered.Add(1)
		switch offset := fetchOffset(req); {
		case offset == 0:
			return fetchAnswer(req, 0, data, 4, 0) // appended, the high watermark moves
		case offset == 6 && n == 2:
			return fetchAnswer(req, 0, nil, 6, 2) // the high watermark and the log start move
		case offset == 6:
			// The leader deleted past our log end: we start over at 20.
			return fetchAnswer(req, kerr.OffsetOutOfRange.Code, nil, 20, 20)
		}
		longPoll(ctx, req)
		return fetchAnswer(req, 0, nil, 20, 20)
	})
	leaderAndIsr(t, m, tp0, 1, 1, leader.addr)
	l.mu.Lock()
	l.fetchers = []*fetcher{m.fetchers[1]}
	l.mu.Unlock()
	require.Equal(t, "StateChanged", <-l.seen)
	require.Equal(t, []string{"StateChanged"}, l.take())
	close(start)
	fromFetcher := []string{"Replicated", "Appended", "HighWatermarkAdvanced", "HighWatermarkAdvanced", "LogStartAdvanced", "Truncated"}
	for _, want := range fromFetcher {
		select {
		case <-l.seen:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiting for %s from the fetcher; heard %v; goroutines:\n%s", want, l.take(), goroutines())
		}
	}
	require.Equal(t, fromFetcher, l.take(), "the fetcher tells what it applied, in order")
	p, _ := m.Partition(tp0.Topic, tp0.Partition)
	require.Equal(t, int64(20), p.Log.StartOffset())

	// Now as the leader, serving requests.
	leaderAndIsr(t, m, tp0, 0, 2, leader.addr)
	_, _, err := p.AppendAsLeader(batch(t, "x"))
	require.NoError(t, err)
	require.NoError(t, p.UpdateFollowerFetchState(1, 21, 20, -1))
	v, _ := p.LeaderView()
	require.True(t, p.UpdateISR(2, v.PartitionEpoch, []int32{0}, v.PartitionEpoch+1))
	_, _, err = p.DeleteRecordsOnLeader(21, nil)
	require.NoError(t, err)
	m.StartOffsetAdvanced(tp0, p.Log, 21) // as retention calls it
	_, err = m.StopReplica(0, []commitlog.TopicPartition{tp0}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"StateChanged", "Appended", "FollowerFetched", "HighWatermarkAdvanced", "StateChanged",
		"LogStartAdvanced", "LogStartAdvanced", "StateChanged"}, l.take())

	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.held, "listener calls made with a lock held")
}
