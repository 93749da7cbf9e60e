package network

import (
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// A client that asks for big responses and never reads them fills its
// socket; the Processor parks that response (EPOLLOUT) and keeps serving
// everyone else, including connections on the same Processor.
func TestClientThatNeverReadsDoesNotSlowOthers(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) {
			c.NumNetworkThreads = 1
			c.SendBufferBytes = 16 << 10
		})
		stuck := h.dial()
		require.NoError(t, stuck.nc.(*net.TCPConn).SetReadBuffer(16<<10))
		for i := 0; i < 4; i++ {
			stuck.send(opBig, u32(8<<20))
		}
		// 8 MiB cannot fit in the socket buffers (some 64 KiB here): once
		// the first request is read, the server is stuck writing its
		// answer.
		h.stats("the first big request", func(st Stats) bool { return st.RequestsRead == 1 })

		others := make([]*client, 10)
		for i := range others {
			others[i] = h.dial()
		}
		var wg sync.WaitGroup
		for _, c := range others {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 100; k++ {
					arg := []byte(fmt.Sprintf("request %d", k))
					c.corr++
					if _, err := c.nc.Write(requestFrame(c.corr, opEcho, arg)); err != nil {
						t.Error(err)
						return
					}
					if _, p, err := c.recv(); err != nil || string(p) != string(arg) {
						t.Errorf("got %q, %v", p, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		h.stats("the others' responses, and still not the stuck one", func(st Stats) bool {
			return st.ResponsesSent == uint64(len(others)*100)
		})
		st := h.srv.Stats()
		require.EqualValues(t, 1+len(others)*100, st.RequestsRead, "the stuck connection has one request in flight")
		require.EqualValues(t, 1, st.InFlight)
		require.EqualValues(t, 1+len(others), st.OpenConnections)
	})
}

// Responses much larger than the socket buffers are written in many partial
// writes, resumed on EPOLLOUT, and arrive intact.
func TestLargeResponsesSurvivePartialWrites(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		// A tiny send buffer: every response above a few KiB takes many
		// writes. (The client's receive buffer stays large: tiny windows on
		// both sides would meet delayed ACKs and crawl.)
		h := startServer(t, impl, func(c *Config) { c.SendBufferBytes = 4096 })
		c := h.dial()
		for _, n := range []int{1, 4095, 4096, 300 << 10, 3 << 20} {
			c.expect(c.send(opBig, u32(uint32(n))), pattern(0, n))
		}
		c.roundTrip()
	})
}

// A response can point at a file (a log segment) instead of copying it into
// memory; the region arrives intact, including across partial writes.
func TestFileRegionResponses(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.SendBufferBytes = 4096 })
		c := h.dial()
		for _, r := range [][2]int{{0, 0}, {0, 1}, {12345, 1}, {1000, 100000}, {0, 3 << 20}, {(3 << 20) - 7, 7}} {
			c.expect(c.send(opFile, fileArg(int64(r[0]), int64(r[1]))), pattern(r[0], r[1]))
		}
		c.roundTrip()
	})
}

// A region that runs past the end of the file cannot be written: the
// connection is closed (the client would otherwise wait for bytes that
// never come), and nothing else is affected.
func TestFileRegionPastEndOfFileClosesTheConnection(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		other := h.dial()
		c := h.dial()
		c.send(opFile, fileArg(3<<20-10, 20))
		// The header and the 10 bytes that exist may arrive; then the end.
		_, _, err := c.recv()
		require.True(t, isClosed(err), "want the connection closed, got %v", err)
		h.stats("the connection closed on error", func(st Stats) bool {
			return st.ClosedOnError == 1 && st.ResponsesDropped == 1
		})
		other.roundTrip()
	})
}

// queued.max.requests = 1 and one slow handler: requests pile up behind the
// full RequestChannel, the Processors stop reading, and every request is
// still answered, in order, once the handler catches up.
func TestBackPressureLosesNothing(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) {
			c.QueuedMaxRequests = 1
			c.NumIOThreads = 1
		})
		const conns, perConn = 20, 25
		clients := make([]*client, conns)
		for i := range clients {
			clients[i] = h.dial()
		}
		// Every connection pipelines all its requests at once. The first
		// ones wait at the gate, so the channel fills up at once.
		for i, c := range clients {
			var frames []byte
			for k := uint32(1); k <= perConn; k++ {
				op := byte(opEcho)
				if k == 1 {
					op = opGate
				}
				frames = append(frames, requestFrame(k, op, []byte(fmt.Sprintf("%d/%d", i, k)))...)
			}
			c.write(frames)
		}
		h.stats("back-pressure", func(st Stats) bool {
			return st.BackPressure > 0 && st.QueueDepth == 1
		})
		h.openGate()

		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := uint32(1); k <= perConn; k++ {
					corr, p, err := c.recv()
					if err != nil || corr != k || string(p) != fmt.Sprintf("%d/%d", i, k) {
						t.Errorf("conn %d: got %d %q %v, want %d", i, corr, p, err, k)
						return
					}
				}
			}()
		}
		wg.Wait()
		h.stats("every request answered", func(st Stats) bool {
			return st.ResponsesSent == conns*perConn && st.RequestsRead == conns*perConn && st.InFlight == 0
		})
	})
}
