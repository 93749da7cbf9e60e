package network

import "sync/atomic"

// memoryPool bounds the bytes that requests hold, from their first body
// byte until their handler returns: queued.max.request.bytes, Kafka's
// MemoryPool. Unlike Kafka's, it counts what a frame's buffer really holds,
// not what its size prefix announces: a frame reserves its buffer as the
// buffer grows (64 KiB, then doubling, never past the announced size), so a
// client that announces 100 MiB and sends 1 MiB costs 1 MiB, and twelve
// bytes of size prefixes cannot reserve 300 MiB and stall everyone else.
//
// When the pool is used up, a frame that needs to grow waits, unread, until
// bytes are released; so does the first buffer of a new frame. But frames
// being read cannot release anything by themselves: only requests read
// whole and with a handler ("complete") do, when the handler returns. So a
// growth is refused only while some complete request holds memory, which
// guarantees a release is coming; if everything reserved belongs to frames
// still being read, a growth is granted past the limit (the pool is not
// strict, as Kafka's in the broker is not), and the frame can finish. The
// pool so never deadlocks, and overshoots by at most the growth steps of
// the frames being read at that moment.
type memoryPool struct {
	limit    int64         // queued.max.request.bytes; <= 0: unbounded
	used     atomic.Int64  // bytes reserved: frames being read and requests not yet handled
	complete atomic.Int64  // the part of used held by requests read whole
	freed    wakeList      // whoever found the pool used up, woken at the next release
	recycled atomic.Uint64 // frame buffers Request.Recycle put back on the free list
}

func newMemoryPool(limit int64) *memoryPool { return &memoryPool{limit: limit} }

// tryGrow reserves n more bytes for a frame being read, unless the pool is
// used up and a release is sure to come (see memoryPool).
func (p *memoryPool) tryGrow(n int64) bool {
	if p.limit <= 0 || n == 0 {
		p.used.Add(n)
		return true
	}
	for {
		used := p.used.Load()
		if used >= p.limit && p.complete.Load() > 0 {
			return false
		}
		if p.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// completed moves a whole frame's n reserved bytes to the complete part:
// they are released when its handler returns.
func (p *memoryPool) completed(n int64) { p.complete.Add(n) }

// release returns n reserved bytes, of a complete request or of a frame
// cut short, and wakes whoever waits for them.
func (p *memoryPool) release(n int64, complete bool) {
	if n == 0 {
		return
	}
	if complete {
		p.complete.Add(-n)
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

// nextFrameCap is the capacity a full frame buffer grows to: room for
// twice the bytes received so far and the want bytes at hand (at least
// initialBodySize), never past frameSize. So a buffer never holds more
// than twice what its client has sent (or 64 KiB), and a frame up to
// twice the size of the first read that brings its body, a 110 KB batch
// behind a 64 KiB read, gets its whole buffer at once. Both transports
// read frames into buffers that grow this way, reserving each growth from
// the pool first.
func nextFrameCap(body []byte, frameSize, want int) int {
	return min(frameSize, max(2*cap(body), 2*(len(body)+want), initialBodySize))
}
