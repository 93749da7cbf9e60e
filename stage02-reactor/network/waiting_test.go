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
// dropped: Kafka, which does not read a muted connection, would answer a
// half-closed client; see the chapter.)
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

// Requests hold at most queued.max.request.bytes together. With the pool
// used up by a request its handler holds (complete: its release is sure
// to come) and a large frame being read, a third connection's small
// request waits, unread, until the handler returns.
func TestMemoryPoolHoldsBackNewFrames(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.QueuedMaxRequestBytes = 1 << 20 })
		held := h.dial()
		gated := held.send(opGate, pattern(0, 700<<10)) // read whole, then its handler blocks
		h.stats("the held request read", func(st Stats) bool { return st.RequestsRead == 1 })

		big := h.dial()
		frame := requestFrame(1, opEcho, pattern(0, 600<<10))
		big.corr++
		big.write(frame[:500<<10])
		h.stats("the pool used up", func(st Stats) bool { return st.QueuedRequestBytes >= 1<<20 })

		small := h.dial()
		corr := small.send(opEcho, []byte("small"))
		h.stats("the small frame waits for memory", func(st Stats) bool { return st.MemoryWaits >= 1 })
		require.Equal(t, uint64(1), h.srv.Stats().RequestsRead, "nothing else is complete")

		h.openGate() // the handler returns: its 700 KiB go back to the pool
		held.expect(gated, pattern(0, 700<<10))
		small.expect(corr, []byte("small"))
		big.write(frame[500<<10:])
		big.expect(big.corr, pattern(0, 600<<10))
		h.stats("every reservation released", func(st Stats) bool { return st.QueuedRequestBytes == 0 })
	})
}

// Size prefixes alone reserve nothing: three connections that announce
// 100 MiB each and send no more cannot fill the pool and stall everyone
// else (with reservations by announced size, as Kafka makes them, twelve
// bytes stalled every other client until the idle reaper).
func TestSizePrefixesAloneReserveNothing(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.QueuedMaxRequestBytes = 1 << 20 })
		for range 3 {
			c := h.dial()
			c.write(u32(100 << 20))
		}
		h.stats("the size prefixes read", func(st Stats) bool { return st.BytesIn >= 12 })
		h.dial().roundTrip()
		require.Less(t, h.srv.Stats().QueuedRequestBytes, int64(1<<20))
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
		h.stats("every frame's first MiB read", func(st Stats) bool { return st.BytesIn >= 10<<20 })
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

// A handler asking for Done just as the connection closes must not
// deadlock with the close (Done once took the request's lock, then the
// connection's; a closing connection took them the other way round).
// Timing-dependent by nature: it races the two 200 times.
func TestDoneRacingACloseDoesNotDeadlock(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		for range 200 {
			c := h.dial()
			c.send(opHold, nil)
			r := <-h.held
			asked := make(chan struct{})
			go func() { <-r.Done(); close(asked) }()
			require.NoError(t, c.nc.Close())
			select {
			case <-asked:
			case <-time.After(waitFor):
				t.Fatal("Done never closed: deadlocked with the close?")
			}
		}
		h.stats("every connection closed", func(st Stats) bool { return st.OpenConnections == 0 })
	})
}
