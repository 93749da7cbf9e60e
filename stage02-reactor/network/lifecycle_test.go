package network

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// connections.max.idle.ms: a connection that moves no bytes for that long is
// closed. As in Kafka, a request waiting for its answer does not suspend
// the rule (a broker caps its long polls well below it): the waiting
// connection is closed too, and its handler learns it through Done.
func TestIdleConnectionsAreReaped(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) {
			c.ConnectionsMaxIdle = 300 * time.Millisecond
			c.NumNetworkThreads = 1
		})
		idle := h.dial()
		idle.roundTrip()
		waiting := h.dial()
		waiting.send(opHold, nil)
		r := <-h.held
		done := r.Done()

		idle.expectClosed()
		waiting.expectClosed()
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatal("the waiting request's Done did not close")
		}
		h.stats("both connections counted idle", func(st Stats) bool {
			return st.ClosedIdle == 2 && st.OpenConnections == 0
		})
		r.Respond(Response{Sends: []Send{BytesSend([]byte("too late"))}}) // dropped, harmlessly
		h.stats("the late response dropped", func(st Stats) bool { return st.ResponsesDropped == 1 })
		h.dial().roundTrip()
	})
}

func TestIdleReapingCanBeDisabled(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.ConnectionsMaxIdle = -1 })
		c := h.dial()
		c.roundTrip()
		require.Zero(t, h.srv.Stats().ClosedIdle)
	})
}

// max.connections: connections over the limit are closed at accept; when
// one closes, a new one is served again.
func TestMaxConnections(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) { c.MaxConnections = 2 })
		first, second := h.dial(), h.dial()
		first.roundTrip()
		second.roundTrip()

		third := h.dial() // the kernel completes the handshake; the server closes it
		third.expectClosed()
		h.stats("one rejected connection", func(st Stats) bool {
			return st.RejectedConnections == 1 && st.OpenConnections == 2
		})

		require.NoError(t, first.nc.Close())
		h.stats("the first connection to be gone", func(st Stats) bool { return st.OpenConnections == 1 })
		fourth := h.dial()
		fourth.roundTrip()
		second.roundTrip()
	})
}

// Graceful shutdown: stop accepting, close idle connections, let the
// request in flight finish and its response arrive, then close.
func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		busy := h.dial()
		idle := h.dial()
		idle.roundTrip()
		corr := busy.send(opGate, []byte("slow"))
		// Both requests read and only one answered: the idle connection's
		// answer can reach its client before the server counts it sent,
		// so InFlight == 1 alone may still be the idle one's, with the slow
		// request not read yet.
		h.stats("the slow request to reach its handler", func(st Stats) bool { return st.RequestsRead == 2 && st.InFlight == 1 })

		shutdown := make(chan error, 1)
		go func() { shutdown <- h.shutdown(waitFor) }()

		idle.expectClosed()
		eventually(t, "new connections to be refused", func() bool {
			nc, err := net.DialTimeout("tcp", h.addr, time.Second)
			if err == nil {
				nc.Close()
			}
			return err != nil
		})
		select {
		case err := <-shutdown:
			t.Fatalf("Shutdown returned (%v) with a request in flight", err)
		default:
		}

		h.openGate()
		busy.expect(corr, []byte("slow"))
		busy.expectClosed()
		require.NoError(t, <-shutdown)
		st := h.srv.Stats()
		require.Zero(t, st.OpenConnections)
		require.Zero(t, st.InFlight)
		require.EqualValues(t, 2, st.ClosedAtShutdown)
	})
}

// When Shutdown's context ends first, connections are closed at once and
// the late response is dropped.
func TestShutdownDeadlineClosesEverything(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		c.send(opHold, nil)
		r := <-h.held

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, h.srv.Shutdown(ctx), context.DeadlineExceeded)
		c.expectClosed()

		// Respond after shutdown is harmless, and counted.
		r.Respond(Response{Sends: []Send{BytesSend(answer(1, nil))}})
		h.stats("the late response dropped", func(st Stats) bool {
			return st.ResponsesDropped == 1 && st.InFlight == 0
		})
		// A second Shutdown reports the first one's result.
		require.ErrorIs(t, h.srv.Shutdown(context.Background()), context.DeadlineExceeded)
		h.shutdownOnce.Do(func() {}) // the cleanup must not shut down again
	})
}

// A handler may answer after the client went away: the response is dropped.
func TestRespondAfterConnectionClosedIsHarmless(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		c.send(opHold, nil)
		r := <-h.held
		// The client resets the connection. The reactor hears of it at
		// once (EPOLLHUP is reported even for a muted connection), the
		// portable server when it writes the answer. Either way: no
		// panic, no leak, and the response is counted as dropped.
		require.NoError(t, c.nc.(*net.TCPConn).SetLinger(0))
		require.NoError(t, c.nc.Close())
		r.Respond(Response{Sends: []Send{BytesSend(answer(1, []byte("too late")))}})
		h.stats("the response dropped and the connection closed", func(st Stats) bool {
			return st.OpenConnections == 0 && st.InFlight == 0 && st.ResponsesDropped == 1
		})

		other := h.dial()
		other.roundTrip()
	})
}

// Shutdown ends every goroutine the server started.
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		before := runtime.NumGoroutine()
		cfg := testConfig()
		h := &harness{t: t, gate: make(chan struct{}), held: make(chan *Request, 10)}
		srv, err := impl.new(cfg, HandlerFunc(h.handle))
		require.NoError(t, err)
		h.srv, h.addr = srv, srv.Addr().String()
		require.NoError(t, srv.Start())
		for i := 0; i < 20; i++ {
			h.dial().roundTrip()
		}
		require.Greater(t, runtime.NumGoroutine(), before)
		require.NoError(t, h.shutdown(waitFor))
		eventually(t, "every server goroutine to end", func() bool { return runtime.NumGoroutine() <= before })
	})
}
