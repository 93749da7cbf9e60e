package purgatory

import (
	"sync"
	"sync/atomic"
)

// build 04.B: a timing wheel and its overflow wheel
// tests: TestOperationExpiresWithinOneTickOfItsDeadline, TestDeadlinesAddedWhileTheClockRunsExpireOnTime, TestTimeoutUnderOneTickExpiresAtOnce

// timingWheel is one wheel of the hierarchy (Kafka's TimingWheel): size
// buckets of tick ms each, spanning interval = tick*size ms from
// currentTime. Deadlines past its span go to the overflow wheel, whose tick
// is this wheel's whole interval.
type timingWheel struct {
	tick     int64 // ms a bucket covers
	size     int64 // buckets
	interval int64 // tick * size
	buckets  []*bucket
	queue    *delayQueue   // shared by every wheel of the timer
	counter  *atomic.Int64 // entries on every wheel of the timer

	// currentTime is the start of the bucket the wheel is in: a multiple
	// of tick. Invariant: every queued bucket of this wheel expires at or
	// after currentTime. Written by advance under the timer's write lock,
	// read by add under its read lock.
	currentTime int64

	overflowMu sync.Mutex                  // serializes creating overflow
	overflow   atomic.Pointer[timingWheel] // the next wheel up, nil until needed
}

func newTimingWheel(tick, size, start int64, queue *delayQueue, counter *atomic.Int64) *timingWheel {
	w := &timingWheel{tick: tick, size: size, interval: tick * size, queue: queue, counter: counter,
		currentTime: start - start%tick, buckets: make([]*bucket, size)}
	for i := range w.buckets {
		w.buckets[i] = newBucket(counter)
	}
	return w
}

// overflowWheel returns the next wheel up, creating it on first use. It
// starts at this wheel's current time.
func (w *timingWheel) overflowWheel() *timingWheel {
	if o := w.overflow.Load(); o != nil {
		return o
	}
	w.overflowMu.Lock()
	defer w.overflowMu.Unlock()
	if o := w.overflow.Load(); o == nil {
		w.overflow.Store(newTimingWheel(w.interval, w.size, w.currentTime, w.queue, w.counter))
	}
	return w.overflow.Load()
}

// add puts e in the bucket its deadline falls in and reports true, or
// reports false if e's deadline is within the current tick (it is due now)
// or its operation has completed.
func (w *timingWheel) add(e *timerEntry) bool {
	// exercise 04.3: put a deadline in the bucket of the wheel it falls in
	// hint: a deadline within this wheel's span goes in the bucket of its tick; one within the current tick is due now, one beyond the span is the overflow wheel's
	// tests: TestOperationExpiresWithinOneTickOfItsDeadline, TestTimeoutUnderOneTickExpiresAtOnce, TestOperationCompletesWhenAKeyItWatchesIsChecked, TestShutdownExpiresWhatIsPending, TestDeadlinesAddedWhileTheClockRunsExpireOnTime, TestTheDelayQueueHoldsEachBucketOnce
	switch exp := e.expiration; {
	case e.cancelled():
		return false
	case exp < w.currentTime+w.tick:
		return false // due
	case exp < w.currentTime+w.interval:
		// The bucket is chosen by the deadline's tick number, so a bucket
		// holds deadlines of one tick-wide range at a time, and the range
		// changes only after the bucket has been flushed.
		virtualID := exp / w.tick
		b := w.buckets[virtualID%w.size]
		b.add(e)
		if b.setExpiration(virtualID * w.tick) {
			// First entry since the bucket was last flushed: queue it.
			w.queue.offer(b)
		}
		return true
	default:
		return w.overflowWheel().add(e)
	}
	// end exercise
}

// advance moves the wheel (and the wheels above) to the tick containing
// ms, when a bucket due at ms is being flushed.
func (w *timingWheel) advance(ms int64) {
	if ms < w.currentTime+w.tick {
		return
	}
	w.currentTime = ms - ms%w.tick
	if o := w.overflow.Load(); o != nil {
		o.advance(w.currentTime)
	}
}

// end build
