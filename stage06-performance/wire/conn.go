// Package wire is the client side of a Kafka connection, as the producer
// and the consumer of stage 06 use it: a Conn pipelines requests (up to
// max.in.flight.requests.per.connection of them are on the wire at once,
// answered in order), and a Pool keeps one Conn per broker and the
// cluster's metadata.
//
// Stage 02's protocol.Client sends one request at a time, which is what a
// broker's own connections need (a follower's fetch, the controller's
// LeaderAndIsr). A producer needs more: while one Produce request is
// being appended on the broker, the next batches are already travelling,
// which is what Kafka's NetworkClient and its InFlightRequests do.
//
//	Send ──► [corr 7][corr 8][corr 9] ──► socket ──► broker
//	           calls (FIFO, ≤ MaxInFlight)      │ answers in order
//	reader ◄── pops the oldest call ◄───────────┘ checks its corr id
package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxResponseBytes bounds the responses a Conn reads: a fetch asks for
// fetch.max.bytes (50 MiB by default) and may get one batch more.
const MaxResponseBytes = 256 << 20

// ErrNoCommonVersion: the broker serves no version of an API that kmsg
// can encode.
var ErrNoCommonVersion = errors.New("wire: no version in common with the broker")

// ErrRequestTimeout: a request waited longer than Options.RequestTimeout
// for its response, and the connection was given up (Kafka's client
// disconnects too: the broker may be alive but stuck).
var ErrRequestTimeout = errors.New("wire: request timed out")

// Options tune a Conn.
type Options struct {
	// ClientID is the client.id sent in every request header.
	ClientID string
	// MaxInFlight is max.in.flight.requests.per.connection: how many
	// requests may wait for their responses at once (default 5).
	MaxInFlight int
	// RequestTimeout is request.timeout.ms: how long the oldest request
	// may wait for its response before the connection is given up
	// (default 30 s).
	RequestTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 5
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	return o
}

// A call is a request on the wire, waiting for its response.
type call struct {
	corr int32
	req  kmsg.Request
	done func(kmsg.Response, error)
}

// Conn is one connection to one broker. Safe for concurrent use.
//
// Two goroutines share the socket: writers (the callers of Send and
// TrySend, one at a time under mu) and the reader (readLoop, which runs
// each done). Failing the connection takes no lock, so that nothing
// waits for a write to end before it can give the connection up: a
// write to a broker that stopped reading holds mu until its socket is
// closed, and closing it is what fail does.
type Conn struct {
	addr      string
	opts      Options
	nc        net.Conn
	formatter *kmsg.RequestFormatter
	versions  map[int16]int16 // the broker's highest version per API key

	slots chan struct{} // one token per request in flight
	calls chan *call    // requests in flight, oldest first

	// mu serializes the writers: a request goes on the wire whole, and
	// its call is queued for the reader in the order of the bytes. It is
	// held across the socket write, which ends by
	// Options.RequestTimeout (a write deadline) or when fail closes the
	// socket. Nothing else is taken or called while it is held.
	mu   sync.Mutex
	next int32  // the next correlation id. Protected by mu.
	wbuf []byte // the request being written. Protected by mu.

	failOnce sync.Once
	err      atomic.Pointer[error] // why the connection is dead; nil while it lives. Set once, by fail
	dead     chan struct{}         // closed by fail, after err is set
}

// Dial connects to addr and learns the broker's API versions.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		addr: addr, opts: opts, nc: nc,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID)),
		slots:     make(chan struct{}, opts.MaxInFlight),
		calls:     make(chan *call, opts.MaxInFlight),
		dead:      make(chan struct{}),
	}
	go c.readLoop()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0) // every broker understands v0
	resp, err := c.send(ctx, req)
	if err == nil {
		if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
			err = fmt.Errorf("ApiVersions error code %d", code)
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.versions = map[int16]int16{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		c.versions[k.ApiKey] = k.MaxVersion
	}
	return c, nil
}

// Addr is the broker's address.
func (c *Conn) Addr() string { return c.addr }

// Version is the highest version of an API that both the broker and kmsg
// know, and false if there is none.
func (c *Conn) Version(req kmsg.Request) (int16, bool) {
	v, ok := c.versions[req.Key()]
	if !ok {
		return 0, false
	}
	return min(v, req.MaxVersion()), true
}

// Request sends req at the highest common version and waits for its
// response. Other requests may be in flight on the same connection.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	type result struct {
		resp kmsg.Response
		err  error
	}
	ch := make(chan result, 1)
	if err := c.Send(ctx, req, func(r kmsg.Response, err error) { ch <- result{r, err} }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		// The response will come, or the connection dies; either way
		// done runs into the buffered channel and nobody waits.
		return nil, ctx.Err()
	}
}

// Send writes req at the highest common version and returns; done runs
// with its response on the connection's reader goroutine, in the order the
// requests were sent (it must not block). Send waits while MaxInFlight
// requests are outstanding: that wait is the producer's back-pressure.
// It then waits for the socket to take the whole request, which a broker
// that stopped reading makes last: up to RequestTimeout, after which the
// connection is given up (ErrRequestTimeout).
// A Produce request with acks=0 has no response: done runs with a nil
// response once it is written. When Send returns an error, done never
// runs.
func (c *Conn) Send(ctx context.Context, req kmsg.Request, done func(kmsg.Response, error)) error {
	v, ok := c.Version(req)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoCommonVersion, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(v)
	return c.write(ctx, req, done)
}

// TrySend is Send for a caller that must not wait: it sends req only if
// a slot is free at once, and reports whether it did (sent false, err
// nil: MaxInFlight requests are unanswered). done runs only when sent is
// true. The
// slot is taken atomically, so a Request made by another goroutine
// between a Ready and this call cannot make it block. A single loop that
// drives many connections (Kafka's Sender over its NetworkClient) sends
// this way; the done of an answer frees a slot before it runs. The write
// itself is Send's: a broker that stopped reading holds it up to
// RequestTimeout (Kafka's Selector would park the bytes and move on).
func (c *Conn) TrySend(req kmsg.Request, done func(kmsg.Response, error)) (sent bool, err error) {
	v, ok := c.Version(req)
	if !ok {
		return false, fmt.Errorf("%w: %s", ErrNoCommonVersion, kmsg.NameForKey(req.Key()))
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.dead:
		return false, c.Err()
	default:
		return false, nil
	}
	req.SetVersion(v)
	if err := c.writeSlot(req, done); err != nil {
		return false, err // the connection died meanwhile: done will not run
	}
	return true, nil
}

// Ready reports whether a request could be sent without waiting now: a
// hint (another goroutine may take the slot before this one does), which
// lets a loop skip building a request for a connection that is full.
func (c *Conn) Ready() bool { return len(c.slots) < cap(c.slots) }

// send is Request without version negotiation, for ApiVersions itself.
func (c *Conn) send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ch := make(chan kmsg.Response, 1)
	var rerr error
	if err := c.write(ctx, req, func(r kmsg.Response, err error) { rerr = err; ch <- r }); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, rerr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Conn) write(ctx context.Context, req kmsg.Request, done func(kmsg.Response, error)) error {
	select { // a slot first: at most MaxInFlight requests on the wire
	case c.slots <- struct{}{}:
	case <-c.dead:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.writeSlot(req, done)
}

// writeSlot writes req once the caller holds a slot; it gives the slot
// back when done will not run.
//
// Invariant: a call is queued only under mu by a writer that found the
// connection alive under mu, so once fail has run and mu has been free
// once (readLoop's barrier), no call can be queued any more.
func (c *Conn) writeSlot(req kmsg.Request, done func(kmsg.Response, error)) error {
	c.mu.Lock()
	if err := c.Err(); err != nil {
		c.mu.Unlock()
		<-c.slots
		return err
	}
	corr := c.next
	c.next++
	c.wbuf = c.formatter.AppendRequest(c.wbuf[:0], req, corr)
	noResponse := false
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		noResponse = true // Kafka's broker never answers acks=0
	} else {
		c.calls <- &call{corr: corr, req: req, done: done} // never blocks: we hold a slot
	}
	// A broker that stops reading fills the socket's buffers and the
	// write waits: for request.timeout.ms at most, as an answer would.
	err := c.nc.SetWriteDeadline(time.Now().Add(c.opts.RequestTimeout))
	if err == nil {
		_, err = c.nc.Write(c.wbuf)
	}
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // don't keep one huge request's buffer for ever
	}
	if err != nil {
		c.fail(c.writeErr(err))
		c.mu.Unlock()
		if noResponse {
			<-c.slots
			return c.Err()
		}
		return nil // the reader fails the call: done runs with the error
	}
	c.mu.Unlock()
	if noResponse {
		<-c.slots
		done(nil, nil)
	}
	return nil
}

// readLoop reads responses in order and completes the oldest call with
// each; it fails every call when the connection dies.
func (c *Conn) readLoop() {
	var size [4]byte
	var err error
	for err == nil {
		var cl *call
		select {
		case cl = <-c.calls:
		case <-c.dead:
			err = c.Err()
			continue
		}
		// Only a connection with a request outstanding has a deadline:
		// an idle one may stay open for as long as its owner likes.
		c.nc.SetReadDeadline(time.Now().Add(c.opts.RequestTimeout))
		var body []byte
		if body, err = c.readFrame(size[:], cl.corr); err != nil {
			c.complete(cl, nil, err)
			break
		}
		if cl.req.IsFlexible() && cl.req.Key() != 18 { // ApiVersions keeps header v0
			if body, err = skipTags(body); err != nil {
				c.complete(cl, nil, err)
				break
			}
		}
		resp := cl.req.ResponseKind()
		resp.SetVersion(cl.req.GetVersion())
		if err = resp.ReadFrom(body); err != nil {
			err = fmt.Errorf("decode %s response from %s: %w", kmsg.NameForKey(cl.req.Key()), c.addr, err)
			c.complete(cl, nil, err)
			break
		}
		c.complete(cl, resp, nil)
	}
	c.fail(err)
	// A writer that found the connection alive may still be queueing its
	// call: wait for mu to be free once (fail closed the socket, so a
	// write stuck under it ends now). From then on nobody queues a call:
	// drain what is left.
	c.mu.Lock()
	c.mu.Unlock()
	for {
		select {
		case cl := <-c.calls:
			c.complete(cl, nil, c.Err())
		default:
			return
		}
	}
}

func (c *Conn) complete(cl *call, resp kmsg.Response, err error) {
	<-c.slots
	cl.done(resp, err)
}

// readFrame reads one response and checks that it answers corr. The
// buffer grows as the bytes arrive: a peer that announces much and sends
// little costs what it sent.
func (c *Conn) readFrame(size []byte, corr int32) ([]byte, error) {
	if _, err := io.ReadFull(c.nc, size); err != nil {
		return nil, c.readErr(err)
	}
	n := binary.BigEndian.Uint32(size)
	if n < 4 || n > MaxResponseBytes {
		return nil, fmt.Errorf("%s announced a response of %d bytes", c.addr, n)
	}
	var buf bytes.Buffer
	buf.Grow(int(min(n, 1<<20)))
	if _, err := io.CopyN(&buf, c.nc, int64(n)); err != nil {
		return nil, c.readErr(err)
	}
	frame := buf.Bytes()
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("%s answered correlation id %d, expected %d", c.addr, got, corr)
	}
	return frame[4:], nil
}

// writeErr says why a write failed: the request timeout, the reason the
// connection was closed under it, or the socket's error.
func (c *Conn) writeErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: a request to %s was not written within %v", ErrRequestTimeout, c.addr, c.opts.RequestTimeout)
	}
	if errors.Is(err, net.ErrClosed) {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
	}
	return fmt.Errorf("write to %s: %w", c.addr, err)
}

func (c *Conn) readErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: no response from %s within %v", ErrRequestTimeout, c.addr, c.opts.RequestTimeout)
	}
	if errors.Is(err, net.ErrClosed) {
		if cerr := c.Err(); cerr != nil {
			return cerr
		}
	}
	return fmt.Errorf("read from %s: %w", c.addr, err)
}

// skipTags drops a flexible response header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	bad := errors.New("wire: malformed response header")
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, bad
	}
	b = b[k:]
	for ; n > 0; n-- {
		if _, k = binary.Uvarint(b); k <= 0 { // the tag
			return nil, bad
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, bad
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// fail marks the connection dead with err (the first error wins) and
// closes the socket, which ends a write or a read under way. It takes no
// lock: it must not wait for a writer stuck on a broker that stopped
// reading.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		if err == nil {
			err = net.ErrClosed
		}
		c.err.Store(&err)
		close(c.dead)
		c.nc.Close()
	})
}

// Err is why the connection is dead, or nil while it lives. It never
// waits.
func (c *Conn) Err() error {
	if err := c.err.Load(); err != nil {
		return *err
	}
	return nil
}

// Dead is closed when the connection dies; Err says why.
func (c *Conn) Dead() <-chan struct{} { return c.dead }

// Close closes the connection; requests in flight fail with
// net.ErrClosed, a write under way included. It does not wait for them.
func (c *Conn) Close() error {
	c.fail(fmt.Errorf("connection to %s: %w", c.addr, net.ErrClosed))
	return nil
}
