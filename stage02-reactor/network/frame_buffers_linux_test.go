//go:build linux

package network

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAFrameBufferIsReusedOnlyWhenItsHandlerReturnedAndRecycled: a
// request's buffer goes back to the free list only once both its handler
// has returned and Recycle was called; until then its bytes stay its own,
// whatever other requests arrive, and a request nobody recycles is never
// handed out again. Recycled buffers do carry later requests.
func TestAFrameBufferIsReusedOnlyWhenItsHandlerReturnedAndRecycled(t *testing.T) {
	const size = 100 << 10 // a 128 KiB buffer, like a producer's 110 KB batch
	held := make(chan *Request, 1)
	letGo := make(chan struct{})
	srv, err := NewReactorServer(testConfig(), HandlerFunc(func(r *Request) {
		if r.Body[0] == 'A' { // recycles at once, returns only when told
			r.Recycle()
			held <- r
			<-letGo
			return
		}
		held <- r // the test decides
	}))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Shutdown(t.Context()) })

	dial := func() net.Conn {
		nc, err := net.DialTimeout("tcp", srv.Addr().String(), waitFor)
		require.NoError(t, err)
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	// send writes a frame of size bytes of b on a new connection and
	// returns the request the handler got.
	send := func(b byte) *Request {
		frame := binary.BigEndian.AppendUint32(nil, size)
		frame = append(frame, bytes.Repeat([]byte{b}, size)...)
		nc := dial()
		require.NoError(t, nc.SetWriteDeadline(time.Now().Add(waitFor)))
		_, err := nc.Write(frame)
		require.NoError(t, err)
		select {
		case r := <-held:
			return r
		case <-time.After(waitFor):
			t.Fatal("no request reached the handler")
			return nil
		}
	}
	intact := func(r *Request, b byte) bool { return bytes.Equal(r.Body, bytes.Repeat([]byte{b}, size)) }
	buffer := func(r *Request) *byte { return &r.Body[:1][0] }

	a := send('A') // recycled, its handler still running
	b := send('B') // its handler returned, never recycled
	seen := map[*byte]bool{buffer(a): true, buffer(b): true}
	for range 20 {
		c := send('C')
		require.NotEqual(t, buffer(a), buffer(c), "A's buffer was handed out while its handler ran")
		require.NotEqual(t, buffer(b), buffer(c), "B's buffer was handed out without Recycle")
		seen[buffer(c)] = true
		c.Recycle()
	}
	require.True(t, intact(a, 'A'), "A's bytes changed while its handler held them")
	require.True(t, intact(b, 'B'), "B's bytes changed")
	// Twenty requests, each recycled before the next came: they shared
	// buffers (the race detector's sync.Pool drops a quarter of them).
	require.Less(t, len(seen), 2+20, "no recycled buffer carried a later request")

	require.Equal(t, uint64(20), srv.Stats().BuffersRecycled, "A's buffer went back before its handler returned")
	close(letGo) // A's handler returns: A's buffer goes back now
	eventually(t, "A's buffer to go back to the free list", func() bool { return srv.Stats().BuffersRecycled == 21 })
}

// TestAFrameUpToTwiceTheFirstReadGetsOneBuffer: a frame's buffer holds at
// most twice what its client has sent (or 64 KiB), and a frame that fits
// in twice the first read of its body gets its whole buffer at once, with
// no growth and no copy.
func TestAFrameUpToTwiceTheFirstReadGetsOneBuffer(t *testing.T) {
	for _, c := range []struct {
		frame, have, at, want int
	}{
		{frame: 110_000, have: 0, at: 65_532, want: 110_000}, // a producer's batch behind a 64 KiB read
		{frame: 100 << 20, have: 0, at: 100, want: 64 << 10}, // a huge size, a trickle: 64 KiB
		{frame: 100 << 20, have: 0, at: 65_532, want: 131_064},
		{frame: 100 << 20, have: 1 << 20, at: 0, want: 2 << 20}, // doubling as bytes come
		{frame: 10, have: 0, at: 10, want: 10},
	} {
		body := make([]byte, c.have)
		require.Equal(t, c.want, nextFrameCap(body, c.frame, c.at), "%+v", c)
	}
}

// TestBytesReadAheadOfAMutedConnectionKeepTheirOrder: two clients each
// write forty 20 KiB requests in one go. Every read past a complete frame
// holds the next frames' bytes while the connection is muted (copied into
// a free-list buffer, 16 KiB or more at a time), and the buffer goes back
// once they are parsed: each client gets its forty answers, in order,
// byte for byte, while the other's buffers come and go.
func TestBytesReadAheadOfAMutedConnectionKeepTheirOrder(t *testing.T) {
	h := startServer(t, implementation{"reactor", NewReactorServer}, nil)
	const n, size = 40, 20 << 10
	var clients []*client
	writes := make(chan error, 2)
	for k := range 2 {
		c := h.dial()
		clients = append(clients, c)
		var all []byte
		for i := range n {
			all = append(all, requestFrame(uint32(i+1), opEcho, pattern(k*n+i, size))...)
		}
		go func() { // the answers come while the requests are written
			_, err := c.nc.Write(all)
			writes <- err
		}()
	}
	for k, c := range clients {
		for i := range n {
			c.expect(uint32(i+1), pattern(k*n+i, size))
		}
	}
	for range 2 {
		require.NoError(t, <-writes)
	}
}

// TestASmallFrameGetsABufferOfItsSize: a small request (most requests are)
// gets a buffer of its own size, not one of the free list's 64 KiB: it is
// not recycled, and 64 KiB of garbage per heartbeat made the reactor
// three times slower on small requests.
func TestASmallFrameGetsABufferOfItsSize(t *testing.T) {
	for _, n := range []int{1, 100, 4 << 10, minPooledFrame - 1} {
		require.Equal(t, n, len(newFrameBuffer(n).b), "a %d-byte frame", n)
	}
	require.Equal(t, 64<<10, len(newFrameBuffer(minPooledFrame).b))
	require.Equal(t, 128<<10, len(newFrameBuffer(110_000).b))
}
