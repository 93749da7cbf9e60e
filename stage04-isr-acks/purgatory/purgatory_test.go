package purgatory

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOp completes once ready is set, and counts its completions.
type testOp struct {
	ready       atomic.Bool
	tries       atomic.Int32
	completions atomic.Int32
	expirations atomic.Int32
	completedAt atomic.Int64 // the clock when OnComplete ran
	clock       *fakeClock   // nil: not recorded
}

func (o *testOp) TryComplete() bool { o.tries.Add(1); return o.ready.Load() }
func (o *testOp) OnComplete() {
	o.completions.Add(1)
	if o.clock != nil {
		o.completedAt.Store(o.clock.now())
	}
}
func (o *testOp) OnExpiration() { o.expirations.Add(1) }

// fakeClock is a millisecond clock the test moves.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() int64 { return c.ms.Load() }

func newManual(t *testing.T) (*Purgatory[int], *fakeClock) {
	c := &fakeClock{}
	c.ms.Store(1_000_000) // not zero: the wheels must not assume they start at 0
	p := New[int]("test", Options{Now: c.now})
	t.Cleanup(p.Shutdown)
	return p, c
}

func TestOperationThatCanCompleteCompletesAtOnce(t *testing.T) {
	p, _ := newManual(t)
	op := &testOp{}
	op.ready.Store(true)
	require.True(t, p.TryCompleteElseWatch(op, time.Second, 1))
	require.EqualValues(t, 1, op.completions.Load())
	require.Zero(t, p.Watched(), "a completed operation is not watched")
	require.Zero(t, p.Delayed(), "nor timed")
}

func TestOperationCompletesWhenAKeyItWatchesIsChecked(t *testing.T) {
	p, _ := newManual(t)
	op := &testOp{}
	require.False(t, p.TryCompleteElseWatch(op, time.Minute, 1, 2))
	require.EqualValues(t, 2, op.tries.Load(), "tried, watched, tried again")
	require.EqualValues(t, 2, p.Watched())
	require.EqualValues(t, 1, p.Delayed())

	require.Zero(t, p.CheckAndComplete(1), "not ready yet")
	require.Zero(t, p.CheckAndComplete(3), "a key nobody watches")
	op.ready.Store(true)
	require.Equal(t, 1, p.CheckAndComplete(2))
	require.EqualValues(t, 1, op.completions.Load())
	require.Zero(t, op.expirations.Load())
	require.Zero(t, p.Delayed(), "its deadline left the wheels")
	require.EqualValues(t, 1, p.Watched(), "still in key 1's list until that is checked or purged")
	require.Zero(t, p.CheckAndComplete(1))
	require.Zero(t, p.Watched())
}

// The race the second try closes (Kafka's tryCompleteElseWatch): the
// operation's state changes after its first try and before it is watched,
// and the check that announces the change finds nobody watching yet.
// Without trying again once watched, the operation would wait for its
// deadline although it could complete.
func TestAChangeBetweenTheFirstTryAndTheWatchIsNotLost(t *testing.T) {
	p, _ := newManual(t)
	op := &racingOp{p: p}
	require.True(t, p.TryCompleteElseWatch(op, time.Minute, 1), "completed by the try after the watch")
	require.EqualValues(t, 1, op.completions.Load())
	require.Zero(t, op.checkedFirst, "the check announcing the change found nobody watching key 1")
	require.Zero(t, p.Delayed(), "no deadline left on the wheels")
}

// racingOp becomes ready during its first try, too late for that try to
// see it, and announces the change on key 1 as a partition does.
type racingOp struct {
	testOp
	p            *Purgatory[int]
	checkedFirst int
}

func (o *racingOp) TryComplete() bool {
	if o.tries.Add(1) == 1 {
		o.ready.Store(true)
		o.checkedFirst = o.p.CheckAndComplete(1)
		return false
	}
	return o.ready.Load()
}

func TestOperationExpiresWithinOneTickOfItsDeadline(t *testing.T) {
	p, clock := newManual(t)
	start := clock.now()
	// Deadlines up to a minute cover four wheels (20 ms, 400 ms, 8 s, 160 s).
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]*testOp, 5000)
	deadlines := make([]int64, len(ops))
	for i := range ops {
		timeout := time.Duration(1+rng.IntN(60_000)) * time.Millisecond
		ops[i] = &testOp{clock: clock}
		deadlines[i] = start + timeout.Milliseconds()
		require.False(t, p.TryCompleteElseWatch(ops[i], timeout, i))
	}
	require.EqualValues(t, len(ops), p.Delayed())
	for clock.now() <= start+60_000 {
		clock.ms.Add(1)
		p.Advance()
	}
	for i, op := range ops {
		require.EqualValues(t, 1, op.completions.Load(), "op %d", i)
		require.EqualValues(t, 1, op.expirations.Load(), "op %d", i)
		at := op.completedAt.Load()
		assert.LessOrEqual(t, at, deadlines[i], "op %d fired late", i)
		assert.Greater(t, at, deadlines[i]-tickMs-1, "op %d fired more than a tick early", i)
	}
	require.Zero(t, p.Delayed())
}

// TestDeadlinesAddedWhileTheClockRunsExpireOnTime: operations arrive at
// every millisecond while the wheels turn, not all at one moment, so a
// bucket is reused for a later range of deadlines after it was flushed, and
// deadlines land in wheels whose current time is not a multiple of the
// wheel below's span. Each still expires within a tick of its deadline.
func TestDeadlinesAddedWhileTheClockRunsExpireOnTime(t *testing.T) {
	p, clock := newManual(t)
	start := clock.now()
	rng := rand.New(rand.NewPCG(5, 6))
	var ops []*testOp
	var deadlines []int64
	for clock.now() < start+20_000 {
		for range rng.IntN(3) {
			timeout := time.Duration(1+rng.IntN(12_000)) * time.Millisecond
			op := &testOp{clock: clock}
			require.False(t, p.TryCompleteElseWatch(op, timeout, len(ops)))
			ops, deadlines = append(ops, op), append(deadlines, clock.now()+timeout.Milliseconds())
		}
		clock.ms.Add(1)
		p.Advance()
	}
	for p.Delayed() > 0 {
		clock.ms.Add(1)
		p.Advance()
	}
	for i, op := range ops {
		require.EqualValues(t, 1, op.expirations.Load(), "op %d", i)
		at := op.completedAt.Load()
		require.LessOrEqual(t, at, deadlines[i], "op %d fired late", i)
		require.Greater(t, at, deadlines[i]-tickMs-1, "op %d fired more than a tick early", i)
	}
}

// TestTheDelayQueueHoldsEachBucketOnce: the delay queue orders buckets,
// not deadlines, so however many deadlines share a bucket it is queued
// once, and a wheel's worth of buckets is at most wheelSize entries: the
// reason adding a deadline costs O(1) and not a heap push.
func TestTheDelayQueueHoldsEachBucketOnce(t *testing.T) {
	p, _ := newManual(t)
	for i := range 1000 {
		require.False(t, p.TryCompleteElseWatch(&testOp{}, 7*time.Millisecond, i)) // one bucket of wheel 0
	}
	for i := range 1000 {
		require.False(t, p.TryCompleteElseWatch(&testOp{}, time.Duration(20+i%380)*time.Millisecond, i)) // wheel 1
	}
	require.EqualValues(t, 2000, p.Delayed())
	p.timer.queue.mu.Lock()
	queued := len(p.timer.queue.buckets)
	p.timer.queue.mu.Unlock()
	require.LessOrEqual(t, queued, 1+wheelSize, "one bucket of wheel 0 and at most every bucket of wheel 1")
}

func TestTimeoutUnderOneTickExpiresAtOnce(t *testing.T) {
	p, _ := newManual(t)
	op := &testOp{}
	require.False(t, p.TryCompleteElseWatch(op, 0, 1))
	require.EqualValues(t, 1, op.completions.Load())
	require.EqualValues(t, 1, op.expirations.Load())
}

func TestEveryOperationCompletesExactlyOnceUnderConcurrentCompletionAndExpiry(t *testing.T) {
	p := New[int]("race", Options{})
	t.Cleanup(p.Shutdown)
	const n, keys = 20_000, 50
	ops := make([]*testOp, n)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Checkers complete whatever is ready while the reaper expires the
	// rest on its own goroutine.
	for range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
			for {
				select {
				case <-stop:
					return
				default:
					p.CheckAndComplete(rng.IntN(keys))
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range ops {
		ops[i] = &testOp{}
		timeout := time.Duration(rng.IntN(20)) * time.Millisecond
		p.TryCompleteElseWatch(ops[i], timeout, rng.IntN(keys), rng.IntN(keys))
		if rng.IntN(2) == 0 {
			ops[i].ready.Store(true) // races the deadline
		}
	}
	require.Eventually(t, func() bool { return p.Delayed() == 0 }, 30*time.Second, 5*time.Millisecond)
	close(stop)
	wg.Wait()
	expired := 0
	for i, op := range ops {
		require.EqualValues(t, 1, op.completions.Load(), "op %d", i)
		require.LessOrEqual(t, op.expirations.Load(), int32(1), "op %d", i)
		expired += int(op.expirations.Load())
	}
	t.Logf("%d of %d operations expired, the rest completed by a check", expired, n)
}

func TestPurgeSweepsOperationsCompletedThroughAnotherKey(t *testing.T) {
	p, _ := newManual(t)
	ops := make([]*testOp, 3*DefaultPurgeInterval)
	for i := range ops {
		ops[i] = &testOp{}
		p.TryCompleteElseWatch(ops[i], time.Minute, 0, 1+i) // key 0, and one of its own
	}
	for _, op := range ops {
		op.ready.Store(true)
	}
	require.Equal(t, len(ops), p.CheckAndComplete(0))
	require.EqualValues(t, len(ops), p.Watched(), "each lingers in its own key's list")
	p.Advance()
	require.Zero(t, p.Watched(), "more than the purge interval lingered: swept")
}

func TestShutdownExpiresWhatIsPending(t *testing.T) {
	p := New[string]("shutdown", Options{})
	op := &testOp{}
	require.False(t, p.TryCompleteElseWatch(op, time.Hour, "orders-0"))
	p.Shutdown()
	require.EqualValues(t, 1, op.completions.Load())
	require.EqualValues(t, 1, op.expirations.Load())

	late := &testOp{}
	require.False(t, p.TryCompleteElseWatch(late, time.Hour, "orders-0"))
	require.EqualValues(t, 1, late.completions.Load(), "nothing would expire it after shutdown")
}

func TestReaperExpiresOnTheRealClock(t *testing.T) {
	p := New[int]("real", Options{})
	t.Cleanup(p.Shutdown)
	op := &testOp{}
	start := time.Now()
	p.TryCompleteElseWatch(op, 50*time.Millisecond, 1)
	require.Eventually(t, func() bool { return op.completions.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 49*time.Millisecond, "not before its deadline (to the tick)")
}

func TestMillionPendingOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("a million operations")
	}
	p, clock := newManual(t)
	const n, keys = 1_000_000, 1000
	ops := make([]testOp, n)
	for i := range ops {
		// Deadlines spread over 30 s, Kafka's default request timeout.
		p.TryCompleteElseWatch(&ops[i], time.Duration(1+i%30_000)*time.Millisecond, i%keys)
	}
	require.EqualValues(t, n, p.Delayed())
	require.EqualValues(t, n, p.Watched())
	// Half complete by checks, the rest expire.
	for i := 0; i < n; i += 2 {
		ops[i].ready.Store(true)
	}
	completed := 0
	for k := range keys {
		completed += p.CheckAndComplete(k)
	}
	require.Equal(t, n/2, completed)
	require.EqualValues(t, n/2, p.Delayed())
	clock.ms.Add(30_001)
	require.Equal(t, n/2, p.Advance())
	require.Zero(t, p.Delayed())
	for i := range ops {
		// Plain comparisons: testify's reflection, a million times over,
		// would take most of the test's time.
		if c, e := ops[i].completions.Load(), ops[i].expirations.Load(); c != 1 || e != int32(i%2) {
			t.Fatalf("op %d: %d completions, %d expirations", i, c, e)
		}
	}
}
