package loadgen_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
)

// echoServer answers every request with itself: the correlation id comes
// first, as loadgen expects. wrong shifts the id, to test the check.
func echoServer(t *testing.T, wrong bool) string {
	t.Helper()
	cfg := network.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := network.NewServer(cfg, network.HandlerFunc(func(r *network.Request) {
		resp := binary.BigEndian.AppendUint32(nil, uint32(len(r.Body)))
		resp = append(resp, r.Body...)
		if wrong {
			resp[4+3]++
		}
		r.Respond(network.Response{Sends: []network.Send{network.BytesSend(resp)}})
	}))
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
	})
	return srv.Addr().String()
}

func request(corr int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(corr))
}

func TestRunSendsExactlyRequests(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 8, Requests: 1000, MakeRequest: request})
	require.NoError(t, err)
	require.EqualValues(t, 1000, res.Requests)
	require.Equal(t, 8, res.Conns)
	require.Positive(t, res.Rate())
	require.LessOrEqual(t, res.P50, res.P99)
	require.LessOrEqual(t, res.P99, res.Max)
	require.Contains(t, res.String(), "1000 requests on 8 connections")
}

func TestRunStopsAfterDuration(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 4, Duration: 100 * time.Millisecond, MakeRequest: request})
	require.NoError(t, err)
	require.Positive(t, res.Requests)
	require.GreaterOrEqual(t, res.Elapsed, 100*time.Millisecond)
}

func TestRunChecksCorrelationIDs(t *testing.T) {
	addr := echoServer(t, true)
	_, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 2, Requests: 10, MakeRequest: request})
	require.ErrorContains(t, err, "correlation id")
}

func TestRunNeedsAStop(t *testing.T) {
	_, err := loadgen.Run(context.Background(), loadgen.Config{Addr: "127.0.0.1:1", Conns: 1, MakeRequest: request})
	require.Error(t, err)
}

// windowServer answers a connection's requests only when it holds exactly
// inFlight of them unanswered, then answers them all, in order; it records
// the most requests it ever saw outstanding. A closed-loop client never
// gets an answer from it, and a client that sends more than inFlight
// before reading pushes the count above inFlight.
type windowServer struct {
	ln       net.Listener
	inFlight int

	mu          sync.Mutex
	outstanding int // the most requests seen unanswered on a connection. Protected by mu.
}

func startWindowServer(t *testing.T, inFlight int) *windowServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &windowServer{ln: ln, inFlight: inFlight}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(nc)
		}
	}()
	return s
}

func (s *windowServer) serve(nc net.Conn) {
	defer nc.Close()
	r := bufio.NewReader(nc)
	var window [][]byte // the frames read and not answered, in order
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		window = append(window, append(size[:], body...))
		s.mu.Lock()
		s.outstanding = max(s.outstanding, len(window))
		s.mu.Unlock()
		// Answer once the window is full and nothing more is already
		// buffered (a client over its limit shows up as a larger window).
		if len(window) >= s.inFlight && r.Buffered() == 0 {
			for _, f := range window {
				if _, err := nc.Write(f); err != nil {
					return
				}
			}
			window = window[:0]
		}
	}
}

func (s *windowServer) maxOutstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outstanding
}

func TestRunKeepsInFlightRequestsOutstanding(t *testing.T) {
	const inFlight = 8
	srv := startWindowServer(t, inFlight)
	// With a closed loop the server never answers, and the context ends
	// the run with an error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := loadgen.Run(ctx, loadgen.Config{Addr: srv.ln.Addr().String(), Conns: 1, InFlight: inFlight,
		Requests: 50 * inFlight, MakeRequest: request})
	require.NoError(t, err, "the server answers only when %d requests are outstanding", inFlight)
	require.EqualValues(t, 50*inFlight, res.Requests)
	require.Equal(t, inFlight, srv.maxOutstanding(), "never more than InFlight outstanding")
}

func TestPipelinedRunStopsAfterDurationWithEveryResponseRead(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 4, InFlight: 16,
		Duration: 100 * time.Millisecond, MakeRequest: request})
	require.NoError(t, err)
	require.Positive(t, res.Requests)
	require.GreaterOrEqual(t, res.Elapsed, 100*time.Millisecond)
}

func TestPipelinedRunChecksCorrelationIDs(t *testing.T) {
	addr := echoServer(t, true)
	_, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 2, InFlight: 4, Requests: 100, MakeRequest: request})
	require.ErrorContains(t, err, "correlation id")
}

func TestPipelinedRunSendsExactlyRequests(t *testing.T) {
	addr := echoServer(t, false)
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 3, InFlight: 5, Requests: 1001, MakeRequest: request})
	require.NoError(t, err)
	require.EqualValues(t, 1001, res.Requests)
}

func TestMergeAddsWindows(t *testing.T) {
	addr := echoServer(t, false)
	ctx := context.Background()
	load, err := loadgen.Dial(ctx, loadgen.Config{Addr: addr, Conns: 2, InFlight: 2, Requests: 300, MakeRequest: request})
	require.NoError(t, err)
	defer load.Close()
	a, err := load.Run(ctx)
	require.NoError(t, err)
	b, err := load.Run(ctx)
	require.NoError(t, err)
	m := a.Merge(b)
	require.EqualValues(t, 600, m.Requests)
	require.Equal(t, a.Elapsed+b.Elapsed, m.Elapsed)
	require.Equal(t, max(a.Max, b.Max), m.Max)
	require.LessOrEqual(t, m.Quantile(0.5), m.Quantile(0.999))
	require.LessOrEqual(t, m.Quantile(0.999), m.Max)
	require.Zero(t, loadgen.Result{}.Quantile(0.99))
}

func TestAppendRequestIsUsedInsteadOfMakeRequest(t *testing.T) {
	addr := echoServer(t, false)
	var calls atomic.Int64
	res, err := loadgen.Run(context.Background(), loadgen.Config{Addr: addr, Conns: 2, InFlight: 3, Requests: 100,
		AppendRequest: func(dst []byte, corr int32) []byte {
			calls.Add(1)
			return append(binary.BigEndian.AppendUint32(dst, uint32(corr)), "and a body"...)
		}})
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Requests)
	require.EqualValues(t, 100, calls.Load())
}
