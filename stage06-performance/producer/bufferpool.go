package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// build 06.A: the buffer pool: batch-size buffers reused, memory bounded, waiters served in order
// tests: TestBufferPoolReusesBatchSizeBuffers, TestBufferPoolExhaustedBlocksThenFailsAfterMaxBlock, TestBufferPoolFreedBufferUnblocksTheOldestWaiter, TestBufferPoolWaiterGivesUpWithItsContext, TestBufferPoolFreesPooledBuffersForALargerRequest, TestBufferPoolALargeWaiterIsNotOvertakenBySmallOnes

// ErrBufferExhausted: Produce waited max.block.ms for buffer memory and
// none came back (Kafka's BufferExhaustedException).
var ErrBufferExhausted = errors.New("producer: failed to allocate memory within the configured max blocking time")

// ErrClosed: the producer is closed.
var ErrClosed = errors.New("producer: closed")

// BufferPool is Kafka's BufferPool (seed §2.2.2): buffer.memory bytes
// handed out as batch buffers. Buffers of exactly batch.size, the
// "poolable" size, go back on a free list when their batch is done and are
// handed out again, so that a producer in its steady state allocates no
// batch memory at all and gives the garbage collector nothing to do. A
// larger buffer (for a record bigger than batch.size) is counted against
// buffer.memory while in use but not kept.
//
// When the memory is used up, Allocate waits, first come first served, up
// to max.block.ms: waiting is the producer's back-pressure on a caller
// that produces faster than the brokers acknowledge. While anyone waits,
// the accumulator treats every batch as sendable (Waiting), so that the
// memory comes back as soon as the brokers answer.
//
// Invariant: available + len(free)*poolable + (bytes handed out) == total.
type BufferPool struct {
	total    int64 // buffer.memory
	poolable int   // batch.size

	mu        sync.Mutex
	free      [][]byte  // poolable buffers to hand out again. Protected by mu.
	available int64     // memory not on the free list nor handed out. Protected by mu.
	waiters   []*waiter // Allocate calls waiting for memory, oldest first. Protected by mu.
	closed    bool      // Protected by mu.
}

// A waiter is an Allocate call waiting for memory; ready is closed once
// the memory is reserved for it.
type waiter struct {
	size   int
	ready  chan struct{}
	buf    []byte // a free-list buffer handed over, or nil: allocate size bytes
	served bool   // the memory is reserved for this waiter. Protected by BufferPool.mu.
}

// NewBufferPool returns a pool of total bytes whose poolable buffers have
// poolable bytes.
func NewBufferPool(total int64, poolable int) *BufferPool {
	return &BufferPool{total: total, poolable: poolable, available: total}
}

// Allocate returns an empty buffer with capacity size, from the free list
// when size is the poolable size and one is there. It waits up to maxBlock
// (and no longer than ctx) while the pool has not enough memory or older
// callers are still waiting, and then fails with ErrBufferExhausted.
func (p *BufferPool) Allocate(ctx context.Context, size int, maxBlock time.Duration) ([]byte, error) {
	if int64(size) > p.total {
		return nil, fmt.Errorf("producer: a batch of %d bytes is larger than buffer.memory (%d)", size, p.total)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if len(p.waiters) == 0 { // nobody is ahead of us
		if buf, ok := p.takeLocked(size); ok {
			p.mu.Unlock()
			return p.materialize(buf, size), nil
		}
	}
	w := &waiter{size: size, ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()

	timer := time.NewTimer(maxBlock)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
	case <-timer.C:
		err = fmt.Errorf("%w: %d bytes within %d ms (buffer.memory %d bytes, %d bytes available)",
			ErrBufferExhausted, size, maxBlock.Milliseconds(), p.total, p.Available())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.served { // served while we gave up: the memory is ours after all
		if p.closed {
			p.releaseLocked(w.buf, size)
			return nil, ErrClosed
		}
		return p.materialize(w.buf, size), nil
	}
	p.removeWaiterLocked(w)
	p.serveLocked() // we may have been the head that blocked the others
	if p.closed {
		return nil, ErrClosed
	}
	return nil, err
}

// takeLocked reserves size bytes of the pool, as Kafka's BufferPool does
// before it would wait (with freeUp). It returns the free-list buffer it
// hands out, or nil when the caller allocates size bytes, and whether the
// memory was there. p.mu is held.
func (p *BufferPool) takeLocked(size int) ([]byte, bool) {
	// exercise 06.1: reserve memory from the free list or the unpooled bytes
	// hint: a poolable size comes from the free list when it can; any other is paid from the unpooled bytes, freeing pooled buffers if it must; keep BufferPool's Invariant true
	// tests: TestBufferPoolReusesBatchSizeBuffers, TestBufferPoolFreesPooledBuffersForALargerRequest, TestBufferPoolExhaustedBlocksThenFailsAfterMaxBlock
	if size == p.poolable && len(p.free) > 0 {
		buf := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		return buf, true
	}
	if p.available+int64(len(p.free))*int64(p.poolable) < int64(size) {
		return nil, false
	}
	for p.available < int64(size) {
		p.free[len(p.free)-1] = nil // the garbage collector takes it
		p.free = p.free[:len(p.free)-1]
		p.available += int64(p.poolable)
	}
	p.available -= int64(size)
	return nil, true
	// end exercise
}

// materialize turns reserved memory into a buffer; the allocation itself
// happens without the lock.
func (p *BufferPool) materialize(buf []byte, size int) []byte {
	if buf != nil {
		return buf[:0]
	}
	return make([]byte, 0, size)
}

// Deallocate returns a buffer Allocate gave out. A buffer of the poolable
// size goes on the free list; any other is dropped and its size counted as
// available again. The oldest waiters whose requests now fit are served.
func (p *BufferPool) Deallocate(buf []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(buf, cap(buf))
	p.serveLocked()
}

func (p *BufferPool) releaseLocked(buf []byte, size int) {
	if buf != nil && cap(buf) == p.poolable && !p.closed {
		p.free = append(p.free, buf[:0])
		return
	}
	p.available += int64(size)
}

// serveLocked hands memory to the waiters in their order, stopping at the
// first that does not fit: a large request is not overtaken for ever by
// small ones. p.mu is held.
func (p *BufferPool) serveLocked() {
	// exercise 06.2: serve the waiters in their order
	// hint: oldest first, stopping at the first that does not fit, so that a large request is not overtaken by small ones; waiter's comment says what serving one means
	// tests: TestBufferPoolFreedBufferUnblocksTheOldestWaiter, TestBufferPoolALargeWaiterIsNotOvertakenBySmallOnes
	for len(p.waiters) > 0 {
		w := p.waiters[0]
		buf, ok := p.takeLocked(w.size)
		if !ok {
			return
		}
		w.buf, w.served = buf, true
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
		close(w.ready)
	}
	// end exercise
}

func (p *BufferPool) removeWaiterLocked(w *waiter) {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
}

// Waiting reports whether an Allocate call is waiting for memory: the
// accumulator then sends every batch it holds (Kafka's "exhausted"
// condition in RecordAccumulator.ready).
func (p *BufferPool) Waiting() bool { return p.Waiters() > 0 }

// Waiters is the number of Allocate calls waiting for memory.
func (p *BufferPool) Waiters() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// Available is the memory not handed out: unpooled plus the free list.
func (p *BufferPool) Available() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available + int64(len(p.free))*int64(p.poolable)
}

// FreeBuffers is the number of buffers on the free list.
func (p *BufferPool) FreeBuffers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Close wakes every waiter with ErrClosed and refuses later Allocate
// calls; buffers still handed out may be given back.
func (p *BufferPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.waiters {
		close(w.ready) // not served: Allocate returns ErrClosed
	}
	p.waiters = nil
}

// end build
