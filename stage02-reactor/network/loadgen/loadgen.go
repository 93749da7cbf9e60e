// Package loadgen drives a server that speaks Kafka's framing (a 4-byte
// big-endian size, then the message) from many connections. By default
// each connection is a closed loop: it sends a request, waits for its
// response, and sends the next, so every connection has exactly one
// request in flight and the load measures request latency and the rate a
// server reaches with that many waiting clients.
//
// With Config.InFlight = n > 1 each connection pipelines instead, as a
// producer with max.in.flight.requests.per.connection = n does: a writer
// keeps up to n requests outstanding, and a reader matches the responses
// to them in order (FIFO), by correlation id. A Kafka broker still reads
// one request of a connection at a time and answers in order (it mutes
// the connection until the response is written); the pipelined requests
// wait in the socket and the broker's read buffer, so the broker never
// waits a round trip for the next one. That load measures how much a
// server can take rather than how long one request takes.
//
// The request bytes come from the caller, so the same load drives the
// network package's test protocol in its benchmarks and a broker with
// ApiVersions requests:
//
//	res, err := loadgen.Run(ctx, loadgen.Config{
//		Addr:     "127.0.0.1:9092",
//		Conns:    64,
//		Duration: 10 * time.Second,
//		MakeRequest: func(corr int32) []byte {
//			return apiVersionsV0(corr) // api_key 18, version 0, corr, client id
//		},
//	})
//	fmt.Println(res)
//
// Responses are checked the Kafka way: their first four bytes are the
// request's correlation id.
package loadgen

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes a load.
type Config struct {
	// Addr is the server's host:port.
	Addr string
	// Conns is the number of connections.
	Conns int
	// InFlight is the number of requests each connection keeps
	// outstanding: 0 or 1 is a closed loop (send, wait for the response,
	// send the next); n > 1 pipelines up to n requests, whose responses
	// must come back in the order the requests were sent. A request's
	// latency runs from its write to its response, so with n > 1 it
	// includes the time it queued behind the requests before it.
	InFlight int
	// Duration stops the load after this long; 0 runs until Requests.
	Duration time.Duration
	// Requests stops the load after this many responses in total; 0 runs
	// for Duration. With both set, whichever comes first.
	Requests int64
	// MakeRequest returns a request (without the size prefix) carrying
	// correlation id corr. It is called from every connection's goroutine
	// at once (with InFlight > 1, from each connection's writer); the
	// returned slice is not kept after the write.
	MakeRequest func(corr int32) []byte
	// AppendRequest, if set, is used instead of MakeRequest: it appends
	// the request carrying corr to dst and returns the extended slice, as
	// kmsg's and strconv's Append functions do. dst is the connection's
	// own buffer, reused for every request, so a load of large requests
	// (a pre-encoded Produce request of 100 KB) allocates nothing per
	// request and costs the sender one copy.
	AppendRequest func(dst []byte, corr int32) []byte
}

// appendFrame appends the request carrying corr with its 4-byte size
// prefix to frame.
func (cfg *Config) appendFrame(frame []byte, corr int32) []byte {
	start := len(frame)
	frame = append(frame, 0, 0, 0, 0)
	if cfg.AppendRequest != nil {
		frame = cfg.AppendRequest(frame, corr)
	} else {
		frame = append(frame, cfg.MakeRequest(corr)...)
	}
	binary.BigEndian.PutUint32(frame[start:], uint32(len(frame)-start-4))
	return frame
}

// Result is what a load measured.
type Result struct {
	Conns    int           // connections
	Requests int64         // responses received
	Elapsed  time.Duration // from the first request to the last response
	Mean     time.Duration // mean latency
	P50, P99 time.Duration // latency percentiles, to within about 12%
	Max      time.Duration // highest latency

	hist *histogram // every latency, for Quantile and Merge; nil in a zero Result
}

// Quantile is the latency below which a fraction q of the requests
// finished (q = 0.999 for the 99.9th percentile), to within about 12%.
func (r Result) Quantile(q float64) time.Duration {
	if r.hist == nil || r.hist.n == 0 {
		return 0
	}
	return r.hist.quantile(q)
}

// Merge is the result of r's load followed by o's: the requests and
// latencies of both, the elapsed times added. A tool that runs a load in
// windows (Load.Run again and again on the same connections, to print
// each window's rate) merges them into its summary.
func (r Result) Merge(o Result) Result {
	var h histogram
	for _, x := range []*histogram{r.hist, o.hist} {
		if x != nil {
			h.merge(x)
		}
	}
	return h.result(max(r.Conns, o.Conns), r.Elapsed+o.Elapsed)
}

// Rate is responses per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// String reads like kafka-producer-perf-test's summary line.
func (r Result) String() string {
	return fmt.Sprintf("%d requests on %d connections in %.2fs, %.0f requests/sec, %.3f ms avg latency, %.3f ms max latency, %.3f ms 50th, %.3f ms 99th",
		r.Requests, r.Conns, r.Elapsed.Seconds(), r.Rate(),
		ms(r.Mean), ms(r.Max), ms(r.P50), ms(r.P99))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Load is a set of open connections ready to run a load; Dial opens them,
// so that connecting is not measured.
type Load struct {
	cfg   Config
	conns []net.Conn
}

// Dial opens cfg.Conns connections to cfg.Addr.
func Dial(ctx context.Context, cfg Config) (*Load, error) {
	if cfg.Conns < 1 || (cfg.MakeRequest == nil && cfg.AppendRequest == nil) || (cfg.Duration <= 0 && cfg.Requests <= 0) {
		return nil, errors.New("loadgen: need Conns > 0, MakeRequest or AppendRequest, and Duration or Requests")
	}
	l := &Load{cfg: cfg, conns: make([]net.Conn, 0, cfg.Conns)}
	var d net.Dialer
	for i := 0; i < cfg.Conns; i++ {
		nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("loadgen: dial connection %d of %d: %w", i+1, cfg.Conns, err)
		}
		l.conns = append(l.conns, nc)
	}
	return l, nil
}

// Close closes the connections abortively (SO_LINGER 0: a reset instead of
// FIN), so that they leave no TIME_WAIT behind. Thousands of connections
// per run would otherwise hold most of the ephemeral ports for a minute and
// make the next run's connections collide with them.
func (l *Load) Close() error {
	var errs []error
	for _, nc := range l.conns {
		if tc, ok := nc.(*net.TCPConn); ok {
			errs = append(errs, tc.SetLinger(0))
		}
		errs = append(errs, nc.Close())
	}
	return errors.Join(errs...)
}

// Run runs the load once on the open connections. It stops at the first
// error, and returns it with what was measured until then.
func (l *Load) Run(ctx context.Context) (Result, error) {
	cfg := l.cfg
	start := time.Now() // before the Duration timer starts, so Elapsed >= Duration
	// stop ends every loop after its current request: at Duration, at the
	// first error, or when ctx ends.
	var stop atomic.Bool
	timed := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		timed, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	defer context.AfterFunc(timed, func() { stop.Store(true) })()
	// When the caller's ctx ends, do not wait for responses that may never
	// come: wake the connections' pending reads.
	defer context.AfterFunc(ctx, func() {
		for _, nc := range l.conns {
			nc.SetDeadline(time.Now())
		}
	})()

	tickets := atomic.Int64{} // requests left to send when Requests is set
	tickets.Store(cfg.Requests)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total histogram
		first error
	)
	for i, nc := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := runConn
			if cfg.InFlight > 1 {
				run = runPipelined
			}
			h, err := run(nc, i, cfg, &stop, &tickets)
			mu.Lock()
			defer mu.Unlock()
			total.merge(&h)
			if err != nil && first == nil {
				first = err
				if ctx.Err() != nil {
					first = fmt.Errorf("loadgen: %w (%v)", ctx.Err(), err)
				}
				stop.Store(true)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, nc := range l.conns {
		nc.SetDeadline(time.Time{})
	}
	return total.result(cfg.Conns, elapsed), first
}

// runConn is one closed loop.
func runConn(nc net.Conn, index int, cfg Config, stop *atomic.Bool, tickets *atomic.Int64) (histogram, error) {
	var h histogram
	r := bufio.NewReader(nc)
	var frame, body []byte
	corr := int32(index) << 20 // distinct ids per connection help debugging
	for !stop.Load() {
		if cfg.Requests > 0 && tickets.Add(-1) < 0 {
			break
		}
		corr++
		frame = cfg.appendFrame(frame[:0], corr)
		t0 := time.Now()
		if _, err := nc.Write(frame); err != nil {
			return h, fmt.Errorf("loadgen: write: %w", err)
		}
		var err error
		if body, err = readResponse(r, body, corr); err != nil {
			return h, err
		}
		h.record(time.Since(t0))
	}
	return h, nil
}

// sent is a request written and not yet answered.
type sent struct {
	corr int32
	t0   time.Time
}

// runPipelined is one connection with up to cfg.InFlight requests
// outstanding: a writer goroutine sends while a slot is free, this
// goroutine reads the responses and frees a slot for each. Responses must
// come in request order, as a Kafka broker sends them.
func runPipelined(nc net.Conn, index int, cfg Config, stop *atomic.Bool, tickets *atomic.Int64) (histogram, error) {
	var (
		h histogram
		// slots holds a token per outstanding request: the writer puts one
		// in before it writes (and blocks while InFlight are out), the
		// reader takes one out after the response.
		slots = make(chan struct{}, cfg.InFlight)
		// written carries the requests written, in order, to the reader;
		// the writer closes it when it stops.
		written = make(chan sent, cfg.InFlight)
		// readerFailed is closed when the reader stops early, to release a
		// writer waiting for a slot.
		readerFailed = make(chan struct{})
		werr         error // the writer's error; read after written is closed
	)
	go func() {
		defer close(written)
		var frame []byte
		corr := int32(index) << 20
		for !stop.Load() {
			if cfg.Requests > 0 && tickets.Add(-1) < 0 {
				return
			}
			select {
			case slots <- struct{}{}:
			case <-readerFailed:
				return
			}
			corr++
			frame = cfg.appendFrame(frame[:0], corr)
			t0 := time.Now()
			if _, err := nc.Write(frame); err != nil {
				werr = fmt.Errorf("loadgen: write: %w", err)
				return
			}
			written <- sent{corr, t0} // never blocks: at most InFlight are out
		}
	}()

	r := bufio.NewReader(nc)
	var body []byte
	var rerr error
	for s := range written {
		if body, rerr = readResponse(r, body, s.corr); rerr != nil {
			close(readerFailed)
			nc.SetWriteDeadline(time.Now()) // a writer blocked in Write returns
			for range written {             // wait for the writer to stop
			}
			break
		}
		h.record(time.Since(s.t0))
		<-slots
	}
	if werr != nil {
		return h, werr
	}
	return h, rerr
}

// readResponse reads one response into body (grown as needed) and checks
// that it carries correlation id corr.
func readResponse(r *bufio.Reader, body []byte, corr int32) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return body, fmt.Errorf("loadgen: read response size: %w", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if cap(body) < int(n) {
		body = make([]byte, n)
	}
	body = body[:n]
	if _, err := io.ReadFull(r, body); err != nil {
		return body, fmt.Errorf("loadgen: read response: %w", err)
	}
	if n < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return body, fmt.Errorf("loadgen: response does not carry correlation id %d", corr)
	}
	return body, nil
}

// histogram counts latencies in buckets: 8 per power of two, so a
// percentile is known to within about 12%.
type histogram struct {
	counts [64 * 8]int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

func bucket(d time.Duration) int {
	v := uint64(max(d, 1))
	exp := bits.Len64(v) - 1 // v in [2^exp, 2^(exp+1))
	if exp < 3 {
		return int(v)
	}
	return exp*8 + int(v>>(exp-3)&7)
}

// bucketTop is the largest latency that falls in bucket i.
func bucketTop(i int) time.Duration {
	exp, sub := i/8, i%8
	if exp < 3 {
		return time.Duration(i)
	}
	return time.Duration((uint64(8+sub+1) << (exp - 3)) - 1)
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucket(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

func (h *histogram) quantile(q float64) time.Duration {
	want := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen > want {
			return min(bucketTop(i), h.max)
		}
	}
	return h.max
}

func (h *histogram) result(conns int, elapsed time.Duration) Result {
	r := Result{Conns: conns, Requests: h.n, Elapsed: elapsed, Max: h.max, hist: h}
	if h.n > 0 {
		r.Mean = h.sum / time.Duration(h.n)
		r.P50, r.P99 = h.quantile(0.50), h.quantile(0.99)
	}
	return r
}

// Run dials, runs the load once and closes.
func Run(ctx context.Context, cfg Config) (Result, error) {
	l, err := Dial(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer l.Close()
	return l.Run(ctx)
}
