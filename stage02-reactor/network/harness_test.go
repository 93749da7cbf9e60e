package network

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests speak a tiny protocol, Kafka-shaped: every frame is a 4-byte
// size and a body; a request body is correlation id (int32), an op byte and
// the op's argument; a response body is the correlation id and a payload.
const (
	opEcho        = 'e' // answer with the argument
	opNoResponse  = 'n' // Response{NoResponse: true}
	opClose       = 'c' // Response{Close: true}, nothing written
	opAnswerClose = 'C' // answer with the argument, then close
	opSleep       = 's' // arg: uint32 ms; answer (echo) that much later from a timer goroutine
	opBig         = 'b' // arg: uint32 n; answer with n pattern bytes, in several Sends
	opFile        = 'f' // arg: int64 pos, int64 n; answer with that region of the harness file
	opGate        = 'g' // block the handler goroutine until the harness gate opens, then echo
	opHold        = 'h' // hand the request to the test (harness.held), which answers it
	opPanic       = 'p' // the handler panics
	opListener    = 'l' // answer with the request's "listener/protocol/tls" (tls: with TLS state or not)
)

// waitFor bounds every wait on the server: a limit for failures, not a
// duration anything relies on.
const waitFor = 20 * time.Second

// implementation is one way to build a Server.
type implementation struct {
	name string
	new  func(Config, Handler) (*Server, error)
}

// forEachImplementation runs test against every Server implementation.
func forEachImplementation(t *testing.T, test func(t *testing.T, impl implementation)) {
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) { test(t, impl) })
	}
}

// harness is a running Server with the test protocol's handler.
type harness struct {
	t    *testing.T
	srv  *Server
	addr string
	file *os.File // the file opFile reads, filled with filePattern

	gate     chan struct{} // opGate handlers wait for it to close
	gateOnce sync.Once
	held     chan *Request // opHold requests

	shutdownOnce sync.Once
	shutdownErr  error
}

// testLogger discards logs unless NETWORK_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("NETWORK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// testConfig is the base configuration of the tests: small thread counts,
// quick to start, and a random port.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = testLogger()
	return cfg
}

// startServer starts impl with testConfig changed by configure, and
// registers a cleanup that shuts it down and checks that no goroutine is
// left behind.
func startServer(t *testing.T, impl implementation, configure func(*Config)) *harness {
	t.Helper()
	before := runtime.NumGoroutine()
	cfg := testConfig()
	if configure != nil {
		configure(&cfg)
	}
	h := &harness{t: t, gate: make(chan struct{}), held: make(chan *Request, 100)}
	h.file = patternFile(t, 3<<20)
	srv, err := impl.new(cfg, HandlerFunc(h.handle))
	require.NoError(t, err)
	h.srv = srv
	h.addr = srv.Addr().String()
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		h.openGate()
		require.NoError(t, h.shutdown(waitFor))
		eventually(t, "goroutines of the server to end", func() bool {
			return runtime.NumGoroutine() <= before
		})
	})
	return h
}

// shutdown shuts the server down once, with a deadline.
func (h *harness) shutdown(timeout time.Duration) error {
	h.shutdownOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		h.shutdownErr = h.srv.Shutdown(ctx)
	})
	return h.shutdownErr
}

func (h *harness) openGate() { h.gateOnce.Do(func() { close(h.gate) }) }

// handle is the test protocol's handler.
func (h *harness) handle(r *Request) {
	if len(r.Body) == 0 { // a zero-size frame: answer with one
		r.Respond(Response{Sends: []Send{BytesSend(make([]byte, 4))}})
		return
	}
	corr, op, arg := binary.BigEndian.Uint32(r.Body), r.Body[4], r.Body[5:]
	switch op {
	case opEcho:
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, arg))}})
	case opNoResponse:
		r.Respond(Response{NoResponse: true})
	case opClose:
		r.Respond(Response{Close: true})
	case opAnswerClose:
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, arg))}, Close: true})
	case opSleep:
		time.AfterFunc(time.Duration(binary.BigEndian.Uint32(arg))*time.Millisecond, func() {
			r.Respond(Response{Sends: []Send{BytesSend(answer(corr, arg))}})
		})
	case opBig:
		n := int(binary.BigEndian.Uint32(arg))
		p := pattern(0, n)
		// Header, then the payload in three Sends: they must arrive back
		// to back, in order.
		sends := []Send{BytesSend(header(corr, n))}
		for _, cut := range [][2]int{{0, n / 3}, {n / 3, n / 2}, {n / 2, n}} {
			sends = append(sends, BytesSend(p[cut[0]:cut[1]]))
		}
		r.Respond(Response{Sends: sends})
	case opFile:
		pos, n := int64(binary.BigEndian.Uint64(arg)), int64(binary.BigEndian.Uint64(arg[8:]))
		r.Respond(Response{Sends: []Send{BytesSend(header(corr, int(n))), FileSend(h.file, pos, n)}})
	case opGate:
		<-h.gate
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, arg))}})
	case opHold:
		h.held <- r
	case opPanic:
		panic("the test handler panics on purpose")
	case opListener:
		r.Respond(Response{Sends: []Send{BytesSend(answer(corr, []byte(fmt.Sprintf("%s/%s/%t", r.Listener, r.SecurityProtocol, r.TLS != nil))))}})
	default:
		r.Respond(Response{Close: true})
	}
}

// header is a response's size prefix and correlation id, for a payload of
// n bytes.
func header(corr uint32, n int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+n))
	return binary.BigEndian.AppendUint32(b, corr)
}

// answer is a whole response frame.
func answer(corr uint32, payload []byte) []byte {
	return append(header(corr, len(payload)), payload...)
}

// requestFrame is a whole request frame.
func requestFrame(corr uint32, op byte, arg []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+1+len(arg)))
	b = binary.BigEndian.AppendUint32(b, corr)
	b = append(b, op)
	return append(b, arg...)
}

// pattern returns bytes pos to pos+n of a sequence that differs from any
// shifted copy of itself, so a lost, doubled or reordered chunk shows.
func pattern(pos, n int) []byte {
	patternOnce.Do(func() {
		patternBytes = make([]byte, patternSize)
		for x := range patternBytes {
			patternBytes[x] = byte(x ^ x>>8 ^ x>>16)
		}
	})
	return patternBytes[pos : pos+n : pos+n]
}

// pattern is computed once: the race detector makes the loop slow.
const patternSize = 8 << 20

var (
	patternOnce  sync.Once
	patternBytes []byte
)

// patternFile is a temporary file holding pattern(0, n).
func patternFile(t *testing.T, n int) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "segment-*.log")
	require.NoError(t, err)
	_, err = f.Write(pattern(0, n))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func fileArg(pos, n int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(pos)), uint64(n))
}

// client is one test connection speaking the test protocol.
type client struct {
	t    *testing.T
	nc   net.Conn
	corr uint32
}

func (h *harness) dial() *client {
	h.t.Helper()
	nc, err := net.DialTimeout("tcp", h.addr, waitFor)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { nc.Close() })
	return &client{t: h.t, nc: nc}
}

// send writes one request and returns its correlation id.
func (c *client) send(op byte, arg []byte) uint32 {
	c.t.Helper()
	c.corr++
	c.write(requestFrame(c.corr, op, arg))
	return c.corr
}

func (c *client) write(b []byte) {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetWriteDeadline(time.Now().Add(waitFor)))
	_, err := c.nc.Write(b)
	require.NoError(c.t, err)
}

// recv reads one response frame.
func (c *client) recv() (corr uint32, payload []byte, err error) {
	if err := c.nc.SetReadDeadline(time.Now().Add(waitFor)); err != nil {
		return 0, nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return 0, nil, err
	}
	if len(body) < 4 {
		return 0, body, nil
	}
	return binary.BigEndian.Uint32(body), body[4:], nil
}

// expect reads one response and checks it.
func (c *client) expect(corr uint32, payload []byte) {
	c.t.Helper()
	got, p, err := c.recv()
	require.NoError(c.t, err)
	require.Equal(c.t, corr, got, "correlation id")
	if !bytes.Equal(payload, p) {
		require.Failf(c.t, "wrong payload", "corr %d: got %d bytes, want %d", corr, len(p), len(payload))
	}
}

// roundTrip sends an echo request and checks its answer.
func (c *client) roundTrip() {
	c.t.Helper()
	arg := []byte(fmt.Sprintf("hello %d", c.corr+1))
	c.expect(c.send(opEcho, arg), arg)
}

// expectClosed checks that the server closes the connection without
// sending anything more.
func (c *client) expectClosed() {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetReadDeadline(time.Now().Add(waitFor)))
	var b [1]byte
	n, err := c.nc.Read(b[:])
	require.Zero(c.t, n, "the server sent data instead of closing")
	require.True(c.t, isClosed(err), "want EOF or reset, got %v", err)
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// eventually polls cond until it holds, failing the test after waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for wait := 100 * time.Microsecond; !cond(); wait = min(2*wait, 10*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(wait) // polling, not waiting for a condition to happen by itself
	}
}

// stats waits until cond holds for the server's Stats. Counters move just
// after the bytes they count, so a client can see an answer before the
// server counted it: tests poll instead of reading Stats once.
func (h *harness) stats(what string, cond func(Stats) bool) {
	h.t.Helper()
	eventually(h.t, what, func() bool { return cond(h.srv.Stats()) })
}
