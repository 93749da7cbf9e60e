package purgatory

import (
	"sync"
	"sync/atomic"
)

// Kafka's timer: 1 ms ticks, 20 buckets a wheel.
const (
	tickMs    = 1
	wheelSize = 20
)

// build 04.D: the timer: add deadlines, advance the clock, flush what is due
// tests: TestOperationExpiresWithinOneTickOfItsDeadline, TestDeadlinesAddedWhileTheClockRunsExpireOnTime, TestReaperExpiresOnTheRealClock

// timer drives the timing wheels (Kafka's SystemTimer). Adds take the read
// lock and run concurrently (buckets lock themselves); advance takes the
// write lock, since it moves the wheels' current time under the adds' feet.
// The clock is in milliseconds and supplied by the caller, so tests can
// drive it tick by tick.
type timer struct {
	queue   *delayQueue
	counter atomic.Int64 // entries linked into buckets

	mu     sync.RWMutex // write-held while the wheels advance
	wheel  *timingWheel // the 1 ms wheel; the others hang off it
	closed bool         // set by close: nothing will advance the wheels again. Protected by mu.
}

func newTimer(startMs int64) *timer {
	t := &timer{queue: newDelayQueue()}
	t.wheel = newTimingWheel(tickMs, wheelSize, startMs, t.queue, &t.counter)
	return t
}

// add puts e on the wheels. It reports false when e is already due (or
// cancelled): the caller expires it at once.
func (t *timer) add(e *timerEntry) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return !t.closed && t.wheel.add(e)
}

// close empties the wheels, returning every pending operation, and makes
// later adds report false (their callers expire them at once): an
// operation added while the purgatory shuts down is not left on wheels
// nobody will turn.
func (t *timer) close() []*delayed {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	return t.advanceLocked(1<<62 - 1)
}

// advance turns the wheels to now and returns the operations now due. The
// caller expires those after the lock is released, so OnComplete never
// runs under it.
func (t *timer) advance(now int64) []*delayed {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advanceLocked(now)
}

func (t *timer) advanceLocked(now int64) []*delayed {
	// exercise 04.4: advance the clock, flushing every bucket that is due
	// hint: a due bucket's entries are not all due: once the wheels are at the bucket's time, adding each entry again places it in a finer bucket or says it is due
	// tests: TestOperationExpiresWithinOneTickOfItsDeadline, TestReaperExpiresOnTheRealClock, TestShutdownExpiresWhatIsPending, TestDeadlinesAddedWhileTheClockRunsExpireOnTime
	var due []*delayed
	for b := t.queue.poll(now); b != nil; b = t.queue.poll(now) {
		t.wheel.advance(b.expiration.Load())
		b.flush(func(e *timerEntry) {
			if !t.wheel.add(e) && !e.cancelled() {
				due = append(due, e.op)
			}
		})
	}
	return due
	// end exercise
}

// size is the number of deadlines on the wheels.
func (t *timer) size() int64 { return t.counter.Load() }

// end build
