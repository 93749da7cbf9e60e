package network

import (
	"math/bits"
	"sync"
)

// Frame buffers come from a free list, one per power-of-two size from
// 64 KiB to 16 MiB, and go back to it when a frame is cut short, when a
// frame outgrows its buffer, and when a handler that has finished with a
// request's bytes says so (Request.Recycle). A buffer taken from the list
// is not zeroed: only the bytes read into it are ever part of a frame.
//
// Without the list every frame of a producer's 110 KB batches was two
// allocations (64 KiB, then the rest), each zeroed by the runtime, and
// 174 KiB of garbage a request: the frame buffers, the garbage collector
// and the scavenger returning the freed heap to the system took about a
// third of the broker's CPU under a produce load (chapter 6). Kafka's
// broker allocates each frame from its MemoryPool and leaves the rest to
// the JVM's young generation; Go's collector is not generational, so the
// buffers are recycled instead.
//
// The lists are sync.Pools: what a garbage collection finds unused in
// them twice is freed, so an idle broker gives its buffers back.
const (
	minFrameBufferShift = 16 // 64 KiB, initialBodySize
	maxFrameBufferShift = 24 // 16 MiB: larger buffers are allocated and dropped
)

var frameBufferLists [maxFrameBufferShift - minFrameBufferShift + 1]sync.Pool

// frameBuffer is a buffer of the free list: b has the full capacity of its
// size class (or exactly what was asked, for a buffer too large for one).
type frameBuffer struct{ b []byte }

// frameBufferClass is the index of the smallest list whose buffers hold n
// bytes, or -1 if n is larger than the largest.
func frameBufferClass(n int) int {
	if n <= 1<<minFrameBufferShift {
		return 0
	}
	shift := bits.Len(uint(n - 1)) // 1<<shift >= n
	if shift > maxFrameBufferShift {
		return -1
	}
	return shift - minFrameBufferShift
}

// minPooledFrame is the smallest buffer taken from the free list: a
// smaller one is allocated to its size, as small requests (a Metadata, a
// Fetch, a heartbeat) are almost all of them and are not recycled (only
// Produce recycles), and a 64 KiB buffer each would be 64 KiB of garbage
// each. Above it a buffer is at most twice the bytes it holds.
const minPooledFrame = 32 << 10

// newFrameBuffer returns a buffer of at least n bytes, from the free list
// when n is large enough and one of the right size is there.
func newFrameBuffer(n int) *frameBuffer {
	class := frameBufferClass(n)
	if class < 0 || n < minPooledFrame {
		return &frameBuffer{b: make([]byte, n)}
	}
	if fb, ok := frameBufferLists[class].Get().(*frameBuffer); ok {
		return fb
	}
	return &frameBuffer{b: make([]byte, 1<<(minFrameBufferShift+class))}
}

// free puts fb back on its list. Nothing may use fb's bytes afterwards. A
// nil fb (a zero-size frame's) is nothing to free.
func (fb *frameBuffer) free() {
	if fb == nil {
		return
	}
	class := frameBufferClass(len(fb.b))
	if class < 0 || len(fb.b) != 1<<(minFrameBufferShift+class) {
		return // too small or too large for a list: the garbage collector takes it
	}
	frameBufferLists[class].Put(fb)
}

// growFrameTo returns a buffer of capacity newCap holding body's bytes,
// and the frameBuffer it lives in; old, body's own buffer, goes back to
// its list.
func growFrameTo(body []byte, old *frameBuffer, newCap int) ([]byte, *frameBuffer) {
	fb := newFrameBuffer(newCap)
	grown := fb.b[:len(body):newCap]
	copy(grown, body)
	old.free()
	return grown, fb
}
