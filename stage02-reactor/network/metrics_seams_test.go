package network

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The seams final's metrics read: Response.Written (Kafka's TotalTimeMs
// ends when the response is on the wire) and the idle times behind
// NetworkProcessorAvgIdlePercent and RequestHandlerAvgIdlePercent.

// TestWrittenRunsOnceTheResponseIsWritten: Written runs after the last
// byte of a response went out, and at once for NoResponse.
func TestWrittenRunsOnceTheResponseIsWritten(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		written := make(chan string, 2)
		srv, err := impl.new(testConfig(), HandlerFunc(func(r *Request) {
			if r.Body[4] == opNoResponse {
				r.Respond(Response{NoResponse: true, Written: func() { written <- "none" }})
				return
			}
			r.Respond(Response{Sends: []Send{BytesSend(answer(1, []byte("hi")))}, Written: func() { written <- "answer" }})
		}))
		require.NoError(t, err)
		require.NoError(t, srv.Start())
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			require.NoError(t, srv.Shutdown(ctx))
		}()
		nc, err := net.Dial("tcp", srv.Addr().String())
		require.NoError(t, err)
		defer nc.Close()

		_, err = nc.Write(requestFrame(1, opNoResponse, nil))
		require.NoError(t, err)
		require.Equal(t, "none", receive(t, written))
		_, err = nc.Write(requestFrame(1, opEcho, nil))
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(waitFor)))
		resp := make([]byte, 10)
		_, err = io.ReadFull(nc, resp)
		require.NoError(t, err)
		require.Equal(t, uint32(6), binary.BigEndian.Uint32(resp))
		require.Equal(t, "answer", receive(t, written))
	})
}

func receive(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(waitFor):
		t.Fatal("Written was not called")
		return ""
	}
}

// TestIdleTimeCountsWaitsUnderWay: a server with nothing to do reads as
// idle, although its Processors and handlers are still blocked in the
// wait that began before the reading.
func TestIdleTimeCountsWaitsUnderWay(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, nil)
		h.dial().roundTrip()
		first, start := h.srv.Stats(), time.Now()
		h.stats("idle time to grow", func(s Stats) bool {
			return s.HandlerIdle-first.HandlerIdle >= 20*time.Millisecond
		})
		now, elapsed := h.srv.Stats(), time.Since(start)
		threads := time.Duration(testConfig().NumIOThreads)
		require.LessOrEqual(t, now.HandlerIdle-first.HandlerIdle, threads*elapsed+time.Millisecond)
		if impl.name == "reactor" {
			require.Greater(t, now.ProcessorIdle, first.ProcessorIdle)
			require.Equal(t, testConfig().NumNetworkThreads, now.Processors)
		} else {
			require.Zero(t, now.ProcessorIdle, "the portable transport has no Processors")
			require.Zero(t, now.Processors)
		}
	})
}

// Stats.Processors counts every listener's Processors, and only those the
// reactor runs: a TLS listener has none.
func TestProcessorsCountsEachReactorListener(t *testing.T) {
	forEachImplementation(t, func(t *testing.T, impl implementation) {
		h := startServer(t, impl, func(c *Config) {
			c.Listeners = []Listener{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Addr: c.Addr},
				{Name: "INTERNAL", SecurityProtocol: "PLAINTEXT", Addr: c.Addr}}
		})
		want := 0
		if impl.name == "reactor" {
			want = 2 * testConfig().NumNetworkThreads
		}
		require.Equal(t, want, h.srv.Stats().Processors)
	})
}
