package purgatory

import (
	"sync"
	"sync/atomic"
)

// Operation is a request that waits in a purgatory (Kafka's
// DelayedOperation): a DelayedProduce waits for the high watermark, a
// DelayedFetch for bytes.
//
// The purgatory calls TryComplete when the operation is added and whenever
// a key it watches is checked; calls never overlap, and never come after
// the operation has completed. Exactly one of them returning true, or the
// deadline passing first, completes the operation: then OnComplete runs,
// exactly once, followed by OnExpiration if the deadline won. The
// operation's own fields are therefore only ever touched by one goroutine
// at a time and need no lock of their own.
type Operation interface {
	// TryComplete checks whether the operation can be answered now, and
	// may record what it finds (a partition's status) for OnComplete.
	TryComplete() bool
	// OnComplete answers the request.
	OnComplete()
	// OnExpiration runs after OnComplete when the deadline passed first
	// (metrics; the answer itself belongs in OnComplete).
	OnExpiration()
}

// delayed is the purgatory's record of one operation: the state that makes
// completion happen exactly once, and its deadline on the timer.
type delayed struct {
	op    Operation
	entry *timerEntry // set at creation, never changed

	// mu serializes TryComplete, and the completing of the operation:
	// completed goes from false to true once, under mu, so no TryComplete
	// starts after it and OnComplete never overlaps one.
	mu        sync.Mutex
	completed atomic.Bool // read without mu for fast checks
}

func newDelayed(op Operation, expiration int64) *delayed {
	d := &delayed{op: op}
	d.entry = &timerEntry{expiration: expiration, op: d}
	return d
}

// tryComplete runs TryComplete and completes the operation if it says so;
// it reports whether this call completed it.
func (d *delayed) tryComplete() bool {
	if d.completed.Load() {
		return false
	}
	d.mu.Lock()
	if d.completed.Load() {
		d.mu.Unlock()
		return false
	}
	done := d.op.TryComplete()
	if done {
		d.completed.Store(true)
	}
	d.mu.Unlock()
	if done {
		d.finish(false)
	}
	return done
}

// expire completes the operation because its deadline passed, unless it
// completed already; it reports whether this call completed it.
func (d *delayed) expire() bool {
	d.mu.Lock()
	if d.completed.Load() {
		d.mu.Unlock()
		return false
	}
	d.completed.Store(true)
	d.mu.Unlock()
	d.finish(true)
	return true
}

// finish takes the deadline off the wheels and answers.
func (d *delayed) finish(expired bool) {
	d.entry.remove()
	d.op.OnComplete()
	if expired {
		d.op.OnExpiration()
	}
}
