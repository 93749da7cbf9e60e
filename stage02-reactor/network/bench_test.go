package network

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
)

// The benchmarks run both servers in one run, side by side, with Kafka's
// default thread counts (3 network threads, 8 I/O threads). Run them with
//
//	go test -run '^$' -bench . ./network/
//
// Numbers are measured, never asserted.

// benchRequestSize is the request and response body: a 4-byte size prefix
// plus 16 bytes makes 20-byte frames on the wire, a small request like a
// Kafka Heartbeat.
const benchRequestSize = 16

// echoHandler answers every request with a frame holding its body.
var echoHandler = HandlerFunc(func(r *Request) {
	resp := make([]byte, 4+len(r.Body))
	binary.BigEndian.PutUint32(resp, uint32(len(r.Body)))
	copy(resp[4:], r.Body)
	r.Respond(Response{Sends: []Send{BytesSend(resp)}})
})

// benchRequest is a 16-byte body that starts with the correlation id.
func benchRequest(corr int32) []byte {
	b := make([]byte, benchRequestSize)
	binary.BigEndian.PutUint32(b, uint32(corr))
	return b
}

func startBenchServer(b *testing.B, impl implementation) *Server {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = testLogger()
	srv, err := impl.new(cfg, echoHandler)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			b.Error(err)
		}
	})
	return srv
}

// BenchmarkSmallRequests measures the rate of small requests: 20-byte
// request frames, 20-byte response frames, at 1, 64 and 1024 connections.
// Each connection is a closed loop (send, wait for the answer, send the
// next): one request in flight per connection, as a Kafka broker allows.
// The clients run in this process, on the same two cores as the server,
// for both servers alike. b.N is the total number of requests; the req/s
// metric is b.N over the measured time, p99-µs the 99th percentile latency.
func BenchmarkSmallRequests(b *testing.B) {
	for _, conns := range []int{1, 64, 1024} {
		for _, impl := range implementations {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, impl.name), func(b *testing.B) {
				srv := startBenchServer(b, impl)
				ctx := context.Background()
				load, err := loadgen.Dial(ctx, loadgen.Config{
					Addr:        srv.Addr().String(),
					Conns:       conns,
					Requests:    int64(b.N),
					MakeRequest: benchRequest,
				})
				if err != nil {
					b.Fatal(err)
				}
				defer load.Close()
				b.ResetTimer()
				res, err := load.Run(ctx)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.Rate(), "req/s")
				b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
			})
		}
	}
}

// idleConns is the number of connections of BenchmarkIdleConnectionMemory.
const idleConns = 10000

// BenchmarkIdleConnectionMemory measures what an idle connection costs the
// server: 10,000 connections each make one request, then sit idle; the
// growth of the Go heap (live bytes after a GC) plus goroutine stacks,
// divided by the number of connections, is reported as bytes/conn (and
// split into heap-B/conn and stack-B/conn). Kernel memory (socket buffers,
// epoll entries) is not in runtime.MemStats and not counted, for either
// server.
//
// File descriptors: 10,000 connections need 20,000 descriptors when both
// ends live in one process, and the hard limit (ulimit -Hn) here is 20,000,
// which an unprivileged process cannot raise. So the client ends live in a
// child process: the benchmark re-executes its own test binary running only
// TestIdleClientProcess, which dials, makes its requests, prints "ready"
// and holds the connections until its stdin closes. Each process then needs
// ~10,000 descriptors, and the child's memory stays out of the
// measurement.
func BenchmarkIdleConnectionMemory(b *testing.B) {
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				heap, stack := measureIdleConnections(b, impl)
				b.ReportMetric(float64(heap+stack)/idleConns, "bytes/conn")
				b.ReportMetric(float64(heap)/idleConns, "heap-B/conn")
				b.ReportMetric(float64(stack)/idleConns, "stack-B/conn")
			}
		})
	}
}

// measureIdleConnections returns the heap and stack growth of a server
// holding idleConns idle connections. The benchmark timer keeps running: a
// measurement takes about a second, which keeps b.N at 1 or 2.
func measureIdleConnections(b *testing.B, impl implementation) (heap, stack int64) {
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = testLogger()
	srv, err := impl.new(cfg, echoHandler)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			b.Error(err)
		}
	}()
	// Let the server's goroutines start and settle before the baseline.
	srvStats := func() Stats { return srv.Stats() }
	before := memory()

	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^TestIdleClientProcess$", "-test.count=1")
	child.Env = append(os.Environ(),
		"NETWORK_IDLE_CLIENT_ADDR="+srv.Addr().String(),
		"NETWORK_IDLE_CLIENT_CONNS="+strconv.Itoa(idleConns))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child closes its connections and exits
		if err := child.Wait(); err != nil {
			b.Errorf("idle client process: %v", err)
		}
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "ready" {
				fmt.Fprintln(os.Stderr, "idle client process:", sc.Text())
				continue
			}
			{
				ready <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- fmt.Errorf("idle client process ended before it was ready: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		b.Fatal("idle client process not ready after 5 minutes")
	}
	deadline := time.Now().Add(time.Minute)
	for st := srvStats(); st.OpenConnections != idleConns || st.ResponsesSent != idleConns; st = srvStats() {
		if time.Now().After(deadline) {
			b.Fatalf("server sees %d connections and %d responses, want %d", st.OpenConnections, st.ResponsesSent, idleConns)
		}
		time.Sleep(10 * time.Millisecond) // polling
	}
	after := memory()
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), int64(after.StackInuse) - int64(before.StackInuse)
}

// memory returns MemStats after two collections, so HeapAlloc is the live
// heap.
func memory() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// TestIdleClientProcess is the client side of BenchmarkIdleConnectionMemory,
// run in a child process; it does nothing in a normal test run.
func TestIdleClientProcess(t *testing.T) {
	addr := os.Getenv("NETWORK_IDLE_CLIENT_ADDR")
	if addr == "" {
		t.Skip("the client process of BenchmarkIdleConnectionMemory")
	}
	n, err := strconv.Atoi(os.Getenv("NETWORK_IDLE_CLIENT_CONNS"))
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, n)
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.(*net.TCPConn).SetLinger(0) // no TIME_WAIT: see loadgen.Load.Close
				nc.Close()
			}
		}
	}()
	// 32 dialers at a time: quick, without flooding the accept queue.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				nc, err := net.DialTimeout("tcp", addr, time.Minute)
				if err == nil {
					conns[i] = nc
					err = idleClientRoundTrip(nc, int32(i))
				}
				if err != nil {
					mu.Lock()
					first = cmp.Or(first, fmt.Errorf("connection %d: %w", i, err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // hold the connections until the parent is done
}

// idleClientRoundTrip makes the one request an idle client makes (a Kafka
// client's ApiVersions) before going quiet.
func idleClientRoundTrip(nc net.Conn, corr int32) error {
	req := benchRequest(corr)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(req)))
	if _, err := nc.Write(append(frame, req...)); err != nil {
		return err
	}
	resp := make([]byte, 4+benchRequestSize)
	_, err := io.ReadFull(nc, resp)
	return err
}
