package network

import (
	"fmt"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOneRoundTrip(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		c.roundTrip()

		h.stats("one request and one response counted", func(st Stats) bool {
			return st.RequestsRead == 1 && st.ResponsesSent == 1 && st.InFlight == 0 &&
				st.OpenConnections == 1 && st.BytesIn == uint64(len(requestFrame(1, opEcho, []byte("hello 1")))) &&
				st.BytesOut == uint64(len(answer(1, []byte("hello 1"))))
		})
	})
}

func TestRequestCarriesConnectionIdentity(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		ids := map[string]bool{}
		for i := 0; i < 3; i++ {
			c := h.dial()
			c.send(opHold, nil)
			r := <-h.held
			require.Equal(t, c.nc.LocalAddr().String(), r.RemoteAddr.String())
			require.Equal(t, c.nc.RemoteAddr().String(), r.LocalAddr.String())
			// Kafka's connection id: local-remote-index.
			require.Regexp(t, "^"+regexp.QuoteMeta(r.LocalAddr.String()+"-"+r.RemoteAddr.String()+"-")+"[0-9]+$", r.ConnID)
			require.False(t, ids[r.ConnID], "ConnID %s used twice", r.ConnID)
			ids[r.ConnID] = true
			require.False(t, r.Received.IsZero())
			r.Respond(Response{NoResponse: true})
		}
	})
}

// Request.Conn is one slot per connection: a second request of the same
// connection sees what the first stored, another connection starts empty
// (final's SASL gate keeps the authenticated user there).
func TestRequestsOfAConnectionShareItsState(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		a, b := h.dial(), h.dial()
		a.send(opHold, nil)
		r := <-h.held
		require.NotNil(t, r.Conn)
		require.Nil(t, r.Conn.Load())
		r.Conn.Store("alice")
		r.Respond(Response{NoResponse: true})

		a.send(opHold, nil)
		r = <-h.held
		require.Equal(t, "alice", r.Conn.Load())
		r.Respond(Response{NoResponse: true})

		b.send(opHold, nil)
		r = <-h.held
		require.Nil(t, r.Conn.Load())
		r.Respond(Response{NoResponse: true})
	})
}

func TestZeroSizeFrameIsARequest(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		c.write([]byte{0, 0, 0, 0})
		_, p, err := c.recv()
		require.NoError(t, err)
		require.Empty(t, p)
		c.roundTrip()
	})
}

// Kafka's ordering rule: a connection is muted after each request until the
// response is written, so pipelined requests are answered one by one, in
// order, even though the handlers run concurrently.
func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		const n = 1000
		var frames []byte
		for i := uint32(1); i <= n; i++ {
			op, arg := byte(opEcho), []byte(fmt.Sprintf("request %d", i))
			if i%10 == 0 {
				// Some answers come later, from another goroutine; the
				// later requests must still wait for them.
				op, arg = opSleep, u32(uint32(i%3))
			}
			frames = append(frames, requestFrame(i, op, arg)...)
		}
		go c.nc.Write(frames) // all of them, without waiting for answers

		for i := uint32(1); i <= n; i++ {
			corr, p, err := c.recv()
			require.NoError(t, err)
			require.Equal(t, i, corr, "responses out of order")
			if i%10 == 0 {
				require.Equal(t, u32(i%3), p)
			} else {
				require.Equal(t, fmt.Sprintf("request %d", i), string(p))
			}
		}
		h.stats("every response counted", func(st Stats) bool { return st.ResponsesSent == n })
	})
}

func TestThousandConcurrentConnectionsAreServed(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		const n = 1000
		clients := make([]*client, n)
		for i := range clients {
			clients[i] = h.dial()
		}
		eventually(t, "all connections to be open", func() bool {
			return h.srv.Stats().OpenConnections == n
		})
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 3; k++ {
					arg := []byte(fmt.Sprintf("conn %d request %d", i, k))
					c.corr++
					if _, err := c.nc.Write(requestFrame(c.corr, opEcho, arg)); err != nil {
						errs <- err
						return
					}
					corr, p, err := c.recv()
					if err == nil && (corr != c.corr || string(p) != string(arg)) {
						err = fmt.Errorf("conn %d: got corr %d %q, want %d %q", i, corr, p, c.corr, arg)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		h.stats("every response counted", func(st Stats) bool {
			return st.ResponsesSent == 3*n && st.AcceptedConnections == n
		})
	})
}

func TestNoResponseUnmutesTheConnection(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		c.send(opNoResponse, nil) // like Produce with acks=0
		c.send(opNoResponse, nil)
		c.roundTrip() // the first answer the client sees is this one's
		h.stats("two requests without response, one with", func(st Stats) bool {
			return st.NoResponses == 2 && st.ResponsesSent == 1 && st.InFlight == 0
		})
	})
}

func TestCloseResponseClosesTheConnection(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)

		silent := h.dial()
		silent.roundTrip()
		silent.send(opClose, nil)
		silent.expectClosed()

		answered := h.dial()
		corr := answered.send(opAnswerClose, []byte("last words"))
		answered.expect(corr, []byte("last words"))
		answered.expectClosed()

		h.stats("both connections counted closed", func(st Stats) bool {
			return st.ClosedByResponse == 2 && st.OpenConnections == 0
		})
	})
}

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		other := h.dial()
		other.roundTrip()
		c := h.dial()
		c.send(opPanic, nil)
		c.expectClosed()
		other.roundTrip()
	})
}

func TestRespondTwiceIsIgnored(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		c := h.dial()
		corr := c.send(opHold, []byte("x"))
		r := <-h.held
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, []byte("first")))}})
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, []byte("second")))}})
		c.expect(corr, []byte("first"))
		c.roundTrip() // the second answer was not written
	})
}

func TestConfigDefaultsAreKafkas(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, 3, cfg.NumNetworkThreads)
	require.Equal(t, 8, cfg.NumIOThreads)
	require.Equal(t, 500, cfg.QueuedMaxRequests)
	require.EqualValues(t, 104857600, cfg.SocketRequestMaxBytes)
	require.EqualValues(t, 600000, cfg.ConnectionsMaxIdle.Milliseconds())
	require.Equal(t, 102400, cfg.SendBufferBytes)
	require.Equal(t, 102400, cfg.ReceiveBufferBytes)
	require.Zero(t, cfg.MaxConnections)
}

func TestInvalidConfigIsRejected(t *testing.T) {
	for name, configure := range map[string]func(*Config){
		"no address":          func(c *Config) { c.Addr = "" },
		"no network threads":  func(c *Config) { c.NumNetworkThreads = -1 },
		"no io threads":       func(c *Config) { c.NumIOThreads = -1 },
		"no queue":            func(c *Config) { c.QueuedMaxRequests = -1 },
		"negative max bytes":  func(c *Config) { c.SocketRequestMaxBytes = -1 },
		"negative max conns":  func(c *Config) { c.MaxConnections = -1 },
		"bad send buffer":     func(c *Config) { c.SendBufferBytes = -2 },
		"bad receive buffer":  func(c *Config) { c.ReceiveBufferBytes = -2 },
		"unresolvable listen": nil,
	} {
		t.Run(name, func(t *testing.T) {
			for _, impl := range implementations {
				cfg := testConfig()
				if configure == nil {
					cfg.Addr = "127.0.0.1:99999"
					_, err := impl.new(cfg, HandlerFunc(func(*Request) {}))
					require.Error(t, err, impl.name)
					continue
				}
				configure(&cfg)
				_, err := impl.new(cfg, HandlerFunc(func(*Request) {}))
				require.ErrorIs(t, err, ErrInvalidConfig, impl.name)
			}
		})
	}
}

func TestServeReturnsErrServerClosedAfterShutdown(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		cfg := testConfig()
		srv, err := impl.new(cfg, HandlerFunc(func(r *Request) { r.Respond(Response{NoResponse: true}) }))
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- srv.Serve() }()
		h := &harness{t: t, srv: srv, addr: srv.Addr().String()}
		h.dial().write(requestFrame(1, opEcho, nil))
		eventually(t, "the request", func() bool { return srv.Stats().NoResponses == 1 })
		require.NoError(t, h.shutdown(waitFor))
		require.ErrorIs(t, <-served, ErrServerClosed)
		require.ErrorIs(t, srv.Start(), ErrServerClosed)
	})
}

// A server that was never started releases its listener on Shutdown.
func TestShutdownWithoutStart(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		srv, err := impl.new(testConfig(), HandlerFunc(func(*Request) {}))
		require.NoError(t, err)
		addr := srv.Addr().String()
		h := &harness{t: t, srv: srv}
		require.NoError(t, h.shutdown(waitFor))
		srv2, err := impl.new(Config{Addr: addr, Logger: testLogger()}, HandlerFunc(func(*Request) {}))
		require.NoError(t, err, "the port should be free again")
		h2 := &harness{t: t, srv: srv2}
		require.NoError(t, h2.shutdown(waitFor))
	})
}

// A listener's InitialMaxFrameBytes bounds what a new connection may send
// (final's SASL listeners: sasl.server.max.receive.size before
// authentication) until a handler lifts it for that connection.
func TestInitialMaxFrameBytesHoldsUntilAHandlerLiftsIt(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) {
			c.Listeners = []Listener{{Name: "SASL_PLAINTEXT", SecurityProtocol: "SASL_PLAINTEXT", Addr: c.Addr, InitialMaxFrameBytes: 1024}}
		})
		big := pattern(0, 4000)
		small := h.dial()
		small.expect(small.send(opEcho, pattern(0, 100)), pattern(0, 100))
		small.send(opEcho, big)
		small.expectClosed()

		lifted := h.dial()
		lifted.send(opHold, nil)
		r := <-h.held
		r.Conn.SetMaxFrameBytes(0) // authenticated, say
		r.Respond(Response{NoResponse: true})
		lifted.expect(lifted.send(opEcho, big), big)
		h.stats("one connection closed for its size", func(st Stats) bool { return st.ClosedBadSize == 1 })
	})
}
