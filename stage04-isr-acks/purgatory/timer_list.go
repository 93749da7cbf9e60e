package purgatory

import (
	"sync"
	"sync/atomic"
)

// build 04.A: a bucket of the timing wheel: a doubly linked list of deadlines
// tests: TestOperationExpiresWithinOneTickOfItsDeadline, TestEveryOperationCompletesExactlyOnceUnderConcurrentCompletionAndExpiry

// timerEntry is one deadline on the wheels (Kafka's TimerTaskEntry). It
// moves between buckets as the wheels turn; cancelling it unlinks it from
// whichever bucket holds it at that moment.
type timerEntry struct {
	expiration int64    // ms on the timer's clock; fixed at creation
	op         *delayed // what expires

	// list is the bucket holding the entry, nil when in none. Written
	// under that bucket's mu; read without it by remove, which then locks
	// the bucket and checks again.
	list atomic.Pointer[bucket]
	// prev, next link the entry into list. Protected by list's mu.
	prev, next *timerEntry
}

// cancelled reports whether the entry's operation completed another way:
// the wheels drop it instead of expiring it.
func (e *timerEntry) cancelled() bool { return e.op.completed.Load() }

// remove unlinks the entry from its bucket. The bucket may be flushing it
// into another one at the same time; the loop follows it there.
func (e *timerEntry) remove() {
	for b := e.list.Load(); b != nil; b = e.list.Load() {
		b.remove(e)
	}
}

// bucket is one slot of a timing wheel (Kafka's TimerTaskList): a doubly
// linked list of entries whose deadlines fall in the slot's time range, and
// the range's start, which is when the bucket is due.
type bucket struct {
	// expiration is the start of the range the bucket holds now, or -1
	// while it is not queued. A bucket is reused as its wheel turns.
	expiration atomic.Int64
	counter    *atomic.Int64 // the timer's count of linked entries

	mu   sync.Mutex // guards the list
	root timerEntry // sentinel: root.next is the first entry, root.prev the last
}

func newBucket(counter *atomic.Int64) *bucket {
	b := &bucket{counter: counter}
	b.root.next, b.root.prev = &b.root, &b.root
	b.expiration.Store(-1)
	return b
}

// setExpiration records the range start and reports whether it changed:
// then the bucket must be queued (again) in the delay queue.
func (b *bucket) setExpiration(ms int64) bool { return b.expiration.Swap(ms) != ms }

// add links e at the end of the list, first unlinking it from any other.
func (b *bucket) add(e *timerEntry) {
	e.remove()
	b.mu.Lock()
	defer b.mu.Unlock()
	e.list.Store(b)
	e.prev, e.next = b.root.prev, &b.root
	b.root.prev.next = e
	b.root.prev = e
	b.counter.Add(1)
}

// remove unlinks e if this bucket holds it.
func (b *bucket) remove(e *timerEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.list.Load() != b {
		return // moved meanwhile; the caller follows it
	}
	b.unlinkLocked(e)
}

func (b *bucket) unlinkLocked(e *timerEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	e.list.Store(nil)
	b.counter.Add(-1)
}

// flush empties the bucket, handing each entry to reinsert (which puts it
// in a lower wheel or expires it), and marks the bucket unqueued. Only the
// timer's Advance calls it, under the timer's write lock, so two flushes
// never run at once and never lock two buckets in opposite orders.
func (b *bucket) flush(reinsert func(*timerEntry)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.root.next; e != &b.root; e = b.root.next {
		b.unlinkLocked(e)
		reinsert(e)
	}
	b.expiration.Store(-1)
}

// end build
