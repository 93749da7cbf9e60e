package purgatory

import (
	"container/heap"
	"sync"
)

// build 04.C: the delay queue: each non-empty bucket once, earliest first
// tests: TestTheDelayQueueHoldsEachBucketOnce, TestOperationExpiresWithinOneTickOfItsDeadline

// delayQueue holds the non-empty buckets of every wheel, earliest
// expiration first (Kafka uses java.util.concurrent.DelayQueue). However
// many deadlines are pending, it holds at most one entry per bucket: 20 per
// wheel.
type delayQueue struct {
	mu      sync.Mutex // guards buckets
	buckets bucketHeap // by expiration
	// changed receives a value when a bucket becomes the earliest, so the
	// reaper sleeping until the old earliest wakes up sooner.
	changed chan struct{}
}

func newDelayQueue() *delayQueue {
	return &delayQueue{changed: make(chan struct{}, 1)}
}

// offer queues b, which was just given an expiration.
func (q *delayQueue) offer(b *bucket) {
	q.mu.Lock()
	heap.Push(&q.buckets, b)
	first := q.buckets[0] == b
	q.mu.Unlock()
	if first {
		select {
		case q.changed <- struct{}{}:
		default:
		}
	}
}

// poll removes and returns the earliest bucket if it is due at now, or nil.
func (q *delayQueue) poll(now int64) *bucket {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buckets) == 0 || q.buckets[0].expiration.Load() > now {
		return nil
	}
	return heap.Pop(&q.buckets).(*bucket)
}

// next returns the earliest expiration, if any bucket is queued.
func (q *delayQueue) next() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buckets) == 0 {
		return 0, false
	}
	return q.buckets[0].expiration.Load(), true
}

// bucketHeap orders buckets by expiration for container/heap. A queued
// bucket's expiration does not change until it is polled and flushed.
type bucketHeap []*bucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i].expiration.Load() < h[j].expiration.Load() }
func (h bucketHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bucketHeap) Push(x any)        { *h = append(*h, x.(*bucket)) }
func (h *bucketHeap) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return b
}

// end build
