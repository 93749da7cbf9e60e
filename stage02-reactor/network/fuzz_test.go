package network

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// fuzzServer is one server per implementation, shared by every input a
// fuzz process runs: starting a server per input would leave the fuzzer
// little time for anything else.
type fuzzServer struct {
	impl    implementation
	once    sync.Once
	h       *harness // nil until started
	started error    // why it did not start
}

// start starts the server on first use. Its handler answers the harness's
// ops that finish by themselves and closes the connection for the others:
// opGate and opHold park a handler until the test lets it go, opSleep
// answers late and opFile reads a file the fuzz harness does not have, so
// an input using them would stall or break every later one, which says
// nothing about the server.
func (s *fuzzServer) start() (*harness, error) {
	s.once.Do(func() {
		cfg := testConfig()
		cfg.SocketRequestMaxBytes = 1 << 20 // size prefixes near the limit are in reach
		cfg.QueuedMaxRequestBytes = 4 << 20 // a few large frames fill the memory pool
		h := &harness{gate: make(chan struct{}), held: make(chan *Request, 100)}
		handler := HandlerFunc(func(r *Request) {
			if len(r.Body) > 4 {
				switch op := r.Body[4]; {
				case op == opBig && len(r.Body) >= 9 && binary.BigEndian.Uint32(r.Body[5:]) <= 64<<10:
				case op == opEcho, op == opNoResponse, op == opClose, op == opAnswerClose, op == opPanic:
				default:
					r.Respond(Response{Close: true})
					return
				}
			}
			h.handle(r)
		})
		srv, err := s.impl.new(cfg, handler)
		if err == nil {
			err = srv.Start()
		}
		if err != nil {
			s.started = err
			return
		}
		h.srv, h.addr = srv, srv.Addr().String()
		s.h = h
	})
	return s.h, s.started
}

// FuzzRequestFraming writes arbitrary bytes to a server's socket, as a
// client may, and hangs up: size prefixes of any value, frames cut
// anywhere, several frames in one write. The server must survive it: a
// fresh connection then gets a correct echo round trip, and once both
// connections are closed the server holds nothing for them (no open
// connection, no request in flight, no bytes reserved in the memory pool).
// Each implementation runs one server for the whole fuzz run. Run it with
//
//	go test ./network -run '^$' -fuzz '^FuzzRequestFraming$' -fuzztime 5m
//
// A spread of the corpus it built is kept in
// testdata/fuzz/FuzzRequestFraming.
func FuzzRequestFraming(f *testing.F) {
	echo := requestFrame(1, opEcho, []byte("hello"))
	f.Add(echo)
	f.Add(append(append(requestFrame(1, opEcho, []byte("a")), requestFrame(2, opNoResponse, nil)...),
		requestFrame(3, opAnswerClose, []byte("c"))...))
	f.Add(echo[:7])
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 0, 0, 0})                                            // a zero-size frame
	f.Add([]byte{0, 0, 0, 2, 0, 0})                                      // a body too short for the test protocol
	f.Add(binary.BigEndian.AppendUint32(nil, 0xffffff00))                // a negative size
	f.Add(append(binary.BigEndian.AppendUint32(nil, 1<<20), 0, 0, 0, 1)) // the largest frame, cut
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<20+1))                   // one byte over
	f.Add([]byte("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	f.Add(requestFrame(4, opBig, u32(50_000)))
	f.Add(requestFrame(5, opPanic, nil))

	servers := make([]*fuzzServer, len(implementations))
	for i, impl := range implementations {
		servers[i] = &fuzzServer{impl: impl}
	}
	f.Cleanup(func() {
		for _, s := range servers {
			if s.h == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			if err := s.h.srv.Shutdown(ctx); err != nil {
				f.Errorf("shut down the %s server: %v", s.impl.name, err)
			}
			cancel()
		}
	})

	f.Fuzz(func(t *testing.T, in []byte) {
		for _, s := range servers {
			shared, err := s.start()
			if err != nil {
				t.Fatalf("start the %s server: %v", s.impl.name, err)
			}
			h := &harness{t: t, srv: shared.srv, addr: shared.addr}

			nc, err := net.DialTimeout("tcp", h.addr, waitFor)
			if err != nil {
				t.Fatalf("%s: dial: %v", s.impl.name, err)
			}
			// The server may close first (a bad size prefix): a failed
			// write is part of the game.
			_ = nc.SetWriteDeadline(time.Now().Add(waitFor))
			_, _ = nc.Write(in)
			nc.Close()

			c := h.dial()
			c.roundTrip()
			c.nc.Close()
			h.stats(s.impl.name+" server to hold nothing for closed connections", func(st Stats) bool {
				return st.OpenConnections == 0 && st.InFlight == 0 && st.QueuedRequestBytes == 0
			})
		}
	})
}
