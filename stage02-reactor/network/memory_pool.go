package network

import "sync/atomic"

// memoryPool bounds the bytes that requests hold between the moment their
// size prefix is read and the moment they are answered: Kafka's MemoryPool
// for queued.max.request.bytes. A connection reserves a frame's announced
// size before reading its body; when the pool is used up, the Processor
// (or the portable connection goroutine) stops reading that connection
// until a request is answered and its bytes are released.
//
// Like Kafka's SimpleMemoryPool in the broker (not strict), a reservation
// succeeds whenever anything is left, even if the frame is bigger than what
// is left: a frame larger than the whole pool is still served, alone, and
// a connection that holds a reservation can always finish its frame, so
// the pool never deadlocks. Reservations are accounting: the buffer itself
// grows as the bytes arrive (a client that announces 100 MiB and sends
// 1 MiB costs 1 MiB), and the pool bounds the sum of what was announced.
type memoryPool struct {
	limit int64 // queued.max.request.bytes; <= 0: unbounded
	used  atomic.Int64
	freed wakeList // whoever found the pool used up, woken at the next release
}

func newMemoryPool(limit int64) *memoryPool { return &memoryPool{limit: limit} }

// tryReserve reserves n bytes if the pool is not used up.
func (p *memoryPool) tryReserve(n int64) bool {
	if p.limit <= 0 || n == 0 {
		p.used.Add(n)
		return true
	}
	for {
		used := p.used.Load()
		if used >= p.limit {
			return false
		}
		if p.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// release returns n reserved bytes and wakes whoever waits for them.
func (p *memoryPool) release(n int64) {
	if n == 0 {
		return
	}
	p.used.Add(-n)
	p.freed.wakeAll()
}

// notifyWhenFree arranges for wake to be called once, at the next release.
// The caller registers and then tries once more (see wakeList).
func (p *memoryPool) notifyWhenFree(wake func()) { p.freed.add(wake) }

// inUse is the bytes reserved now.
func (p *memoryPool) inUse() int64 { return p.used.Load() }

// initialBodySize is the buffer a frame starts with, unless the frame or
// the bytes already at hand are smaller or larger.
const initialBodySize = 64 << 10

// growFrame makes room in a full frame buffer: for the want bytes at hand,
// or by doubling (at least initialBodySize), never past frameSize. Both
// transports read frames into buffers that grow as the bytes arrive.
func growFrame(body []byte, frameSize, want int) []byte {
	if cap(body)-len(body) > 0 {
		return body
	}
	size := min(frameSize, max(2*cap(body), len(body)+want, initialBodySize))
	grown := make([]byte, len(body), size)
	copy(grown, body)
	return grown
}
