package network

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A client that gives up on a request the server holds (a long poll) and
// closes its connection: the server closes its side at once, without
// waiting for the answer, and the handler holding the request learns it
// through Done. Before, 1,100 abandoned long polls held 1,100 sockets for
// their whole wait and exhausted the broker's descriptors.
func TestPeerCloseCancelsAWaitingRequest(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		for i := range 20 {
			c := h.dial()
			c.send(opHold, nil)
			r := <-h.held
			done := r.Done()
			if i%2 == 0 {
				require.NoError(t, c.nc.Close())
			} else {
				require.NoError(t, c.nc.(*net.TCPConn).CloseWrite()) // a half close counts as gone
			}
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Fatalf("connection %d: Done did not close after the peer closed", i)
			}
		}
		h.stats("every abandoned connection closed", func(st Stats) bool {
			return st.OpenConnections == 0 && st.ClosedByPeer == 20
		})
	})
}

// Done asked after the connection closed is closed already.
func TestDoneAfterTheCloseIsClosed(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.ConnectionsMaxIdle = 200 * time.Millisecond })
		c := h.dial()
		c.send(opHold, nil)
		r := <-h.held
		h.stats("the connection reaped", func(st Stats) bool { return st.ClosedIdle == 1 })
		select {
		case <-r.Done():
		case <-time.After(waitFor):
			t.Fatal("Done of a request whose connection is gone is not closed")
		}
	})
}

// A client that pipelines requests behind one the server holds and then
// shuts its sending side (an acks=0 producer's last burst) loses none of
// them: only a peer with nothing more to say is taken for gone. (The
// answers to requests still in flight when it is taken for gone are
// dropped, as Kafka drops them once it reads the end of the stream.)
func TestRequestsPipelinedBeforeAHalfCloseAreAllHandled(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		first := c.send(opGate, []byte("first"))
		for range 5 {
			c.send(opNoResponse, nil)
		}
		require.NoError(t, c.nc.(*net.TCPConn).CloseWrite())
		h.stats("the first request read", func(st Stats) bool { return st.RequestsRead >= 1 })
		h.openGate()
		c.expect(first, []byte("first"))
		h.stats("every pipelined request handled", func(st Stats) bool {
			return st.RequestsRead == 6 && st.OpenConnections == 0 && st.InFlight == 0
		})
	})
}

// Requests hold at most queued.max.request.bytes together: with the pool
// used up by two large frames still arriving, a third connection's small
// request waits, unread, until one of them is answered.
func TestMemoryPoolHoldsBackNewFrames(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.QueuedMaxRequestBytes = 1 << 20 })
		big := func() (*client, []byte) {
			c := h.dial()
			frame := requestFrame(c.corr+1, opEcho, pattern(0, 600<<10))
			c.corr++
			c.write(frame[:100<<10]) // announce 600 KiB, send 100 KiB
			return c, frame[100<<10:]
		}
		a, restA := big()
		b, restB := big()
		h.stats("both large frames reserved", func(st Stats) bool {
			return st.QueuedRequestBytes >= 2*(600<<10)
		})
		small := h.dial()
		corr := small.send(opEcho, []byte("small"))
		h.stats("the small frame waits for memory", func(st Stats) bool { return st.MemoryWaits == 1 })
		require.Zero(t, h.srv.Stats().RequestsRead, "nothing is complete yet")

		a.write(restA)
		a.expect(a.corr, pattern(0, 600<<10)) // the echo of a's argument
		small.expect(corr, []byte("small"))
		b.write(restB)
		b.expect(b.corr, pattern(0, 600<<10))
		h.stats("every reservation released", func(st Stats) bool { return st.QueuedRequestBytes == 0 })
	})
}

// A size prefix is a promise, not memory: ten connections that announce
// 100 MiB each and send 1 MiB cost what they sent (before, 1 GB, held
// after they left). When they go, their reservations go too.
func TestAnnouncedSizesAreNotAllocatedUpFront(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var conns []*client
		for range 10 {
			c := h.dial()
			frame := requestFrame(1, opEcho, nil)
			frame[0], frame[1], frame[2], frame[3] = 0x06, 0x40, 0x00, 0x00 // 100 MiB
			c.write(append(frame[:4], pattern(0, 1<<20)...))
			conns = append(conns, c)
		}
		h.stats("the first frames' bytes read", func(st Stats) bool { return st.BytesIn >= 2<<20 })
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		grew := int64(during.HeapAlloc) - int64(before.HeapAlloc)
		require.Less(t, grew, int64(64<<20), "heap grew by %d bytes for 10 MiB received", grew)

		for _, c := range conns {
			require.NoError(t, c.nc.Close())
		}
		h.stats("every connection closed, every reservation released", func(st Stats) bool {
			return st.OpenConnections == 0 && st.QueuedRequestBytes == 0
		})
	})
}
