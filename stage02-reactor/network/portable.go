package network

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// NewPortableServer returns a Server, listening on cfg.Addr, built on Go's
// net package with one goroutine per connection: read a frame, put it on the
// RequestChannel, wait for the response, write it, read the next frame. The
// Go runtime's own netpoller (epoll on Linux, kqueue on BSDs) does the
// multiplexing that the reactor does by hand. It shares the RequestChannel,
// the RequestHandlerPool and the shutdown sequence with the reactor, and is
// the baseline the reactor's benchmarks compare against.
//
// One request is in flight per connection here too, since the goroutine
// reads the next frame only after writing the previous response: Kafka's
// mute/unmute falls out of the control flow.
func NewPortableServer(cfg Config, h Handler) (*Server, error) {
	s, err := newServer(cfg, h)
	if err != nil {
		return nil, err
	}
	if s.transport, err = newListenerTransports(s, newPortableTransport); err != nil {
		return nil, err
	}
	return s, nil
}

// newPortableTransport listens for listener l.
func newPortableTransport(s *Server, l *Listener) (transport, error) {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return nil, fmt.Errorf("network: listen on %s: %w", l.Addr, err)
	}
	spare, err := os.Open(os.DevNull)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("network: open the spare descriptor: %w", err)
	}
	return &portableTransport{
		srv:        s,
		l:          l,
		ln:         ln.(*net.TCPListener),
		spare:      spare,
		conns:      make(map[*portableConn]struct{}),
		stop:       make(chan struct{}),
		acceptDone: make(chan struct{}),
	}, nil
}

// portableTransport is the goroutine-per-connection transport.
type portableTransport struct {
	srv   *Server          // config, logger, RequestChannel, openConns
	l     *Listener        // the listener it serves (name, protocol, TLS)
	ln    *net.TCPListener // the listening socket
	stats counters         // the counters of all its connections

	// nextIndex numbers connections for their ConnID.
	nextIndex atomic.Uint64
	// shedding is set while connections are closed for want of a
	// descriptor, so that the warning is logged once per episode. Only
	// the accept loop uses it.
	shedding bool

	// acceptDone is closed when the accept loop returns.
	acceptDone chan struct{}

	// spare is a descriptor (os.DevNull) held in reserve for when the
	// process runs out (see shed); nil while another part of the process
	// holds the number it gave up. Only the accept loop uses it, and
	// stopAccepting and closeListener close it once the loop is done.
	spare *os.File

	// draining is set by drain: connection goroutines read no new request.
	draining atomic.Bool

	// mu protects conns.
	mu sync.Mutex
	// conns are the open connections. Protected by mu.
	conns map[*portableConn]struct{}

	// wg counts the connection goroutines.
	wg sync.WaitGroup

	// stop is closed by forceClose: goroutines waiting for room in the
	// RequestChannel or for a response give up.
	stop     chan struct{}
	stopOnce sync.Once
}

// portableConn is one connection and its goroutine.
type portableConn struct {
	t  *portableTransport
	nc *net.TCPConn // the socket: deadlines and Close go here
	// conn is what the goroutine reads requests from and writes responses
	// to: nc itself, or on a TLS listener the tls.Conn over it (set by
	// the handshake, before the first read). Only its goroutine uses it.
	conn net.Conn
	// tlsState is the TLS connection's state after the handshake (the
	// client's certificates), shared by its requests; nil without TLS.
	tlsState *tls.ConnectionState
	id       string    // ConnID
	remote   net.Addr  // RemoteAddr of its requests
	local    net.Addr  // LocalAddr of its requests
	state    ConnState // Request.Conn of its requests

	// resp carries the response of the request in flight from Respond to
	// the connection goroutine. Capacity 1: one request in flight, one
	// response, so Respond never blocks.
	resp chan Response

	// peerGone is closed by the watcher when the peer closed while a
	// request waits (see watch).
	peerGone     chan struct{}
	peerGoneOnce sync.Once

	// mu orders read deadlines against drain (see armRead) and protects
	// the fields below.
	mu sync.Mutex
	// closed is set when the goroutine is done with the connection; later
	// responses are dropped. Protected by mu.
	closed bool
	// inflight is the request read and not yet answered. Protected by mu.
	inflight *Request
	// watchDone is non-nil while a watcher goroutine runs; it is closed
	// when the watcher returns. Protected by mu.
	watchDone chan struct{}
}

func (t *portableTransport) addr() net.Addr        { return t.ln.Addr() }
func (t *portableTransport) counters() []*counters { return []*counters{&t.stats} }
func (t *portableTransport) closeListener()        { t.ln.Close(); t.closeSpare() }
func (t *portableTransport) start()                { go t.acceptLoop() }

// acceptLoop accepts connections and starts a goroutine for each.
func (t *portableTransport) acceptLoop() {
	defer close(t.acceptDone)
	cfg := &t.srv.cfg
	var backoff time.Duration
	for {
		nc, err := t.ln.AcceptTCP()
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			nc, err = t.acceptWithSpare(err)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == errNoDescriptor {
				continue // closed at once; the next may find a descriptor
			}
			// Out of memory and friends, or no spare descriptor: wait a
			// little and try again, like net/http, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.srv.logger.Warn("accept failed; retrying", "err", err, "backoff", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff, t.shedding = 0, false
		t.stats.accepted.Add(1)
		if cfg.MaxConnections > 0 && t.srv.openConns.Load() >= int64(cfg.MaxConnections) {
			t.stats.rejected.Add(1)
			t.srv.logger.Debug("rejecting connection: max.connections reached",
				"remote", nc.RemoteAddr().String(), "max.connections", cfg.MaxConnections)
			nc.Close()
			continue
		}
		t.configure(nc)
		c := &portableConn{
			t:        t,
			nc:       nc,
			conn:     nc,
			remote:   nc.RemoteAddr(),
			local:    nc.LocalAddr(),
			resp:     make(chan Response, 1),
			peerGone: make(chan struct{}),
		}
		c.id = connID(c.local, c.remote, t.nextIndex.Add(1))
		c.state.SetMaxFrameBytes(t.l.InitialMaxFrameBytes)
		t.srv.openConns.Add(1)
		t.mu.Lock()
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go c.serve()
	}
}

// acceptWithSpare answers EMFILE or ENFILE (err) from accept as the
// reactor's Acceptor does (Acceptor.acceptWithSpare): with the spare
// descriptor given up, the next connection is accepted (here waiting for
// one, like any accept: the queue may be empty, since Linux takes the
// descriptor before it looks); if the spare cannot be taken back
// afterwards, that connection is closed at once and errNoDescriptor
// returned, else it is served. Without a spare, err is returned and the
// accept loop backs off.
func (t *portableTransport) acceptWithSpare(err error) (*net.TCPConn, error) {
	if t.spare == nil {
		if t.spare, _ = os.Open(os.DevNull); t.spare == nil {
			return nil, err
		}
	}
	t.spare.Close()
	nc, aerr := t.ln.AcceptTCP()
	t.spare, _ = os.Open(os.DevNull)
	if aerr != nil || t.spare != nil {
		return nc, aerr
	}
	nc.Close()
	t.spare, _ = os.Open(os.DevNull) // nil if the number was taken meanwhile: tried again next time
	t.stats.accepted.Add(1)
	t.stats.rejected.Add(1)
	if !t.shedding {
		t.srv.logger.Warn("out of file descriptors: new connections are closed at accept until some are free", "err", err)
		t.shedding = true
	}
	return nil, errNoDescriptor
}

// closeSpare releases the spare descriptor, once the accept loop is done.
func (t *portableTransport) closeSpare() {
	if t.spare != nil {
		t.spare.Close()
		t.spare = nil
	}
}

// configure applies the socket options the reactor's Acceptor applies.
func (t *portableTransport) configure(nc *net.TCPConn) {
	cfg := &t.srv.cfg
	var errs []error
	errs = append(errs, nc.SetNoDelay(true), nc.SetKeepAlive(true))
	if cfg.SendBufferBytes > 0 {
		errs = append(errs, nc.SetWriteBuffer(cfg.SendBufferBytes))
	}
	if cfg.ReceiveBufferBytes > 0 {
		errs = append(errs, nc.SetReadBuffer(cfg.ReceiveBufferBytes))
	}
	if err := errors.Join(errs...); err != nil {
		t.srv.logger.Warn("setting socket options failed", "remote", nc.RemoteAddr().String(), "err", err)
	}
}

// stopAccepting closes the listener and waits for the accept loop.
func (t *portableTransport) stopAccepting() {
	t.ln.Close()
	<-t.acceptDone
	t.closeSpare()
}

// drain stops every connection from reading a new request. A goroutine
// blocked reading is woken by a read deadline in the past; one handling a
// request finishes it and then sees draining in armRead.
func (t *portableTransport) drain() <-chan struct{} {
	t.draining.Store(true)
	t.mu.Lock()
	conns := make([]*portableConn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		c.nc.SetReadDeadline(time.Now())
		c.mu.Unlock()
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	return done
}

// forceClose closes every connection and waits for their goroutines.
func (t *portableTransport) forceClose() {
	t.stopOnce.Do(func() { close(t.stop) })
	t.mu.Lock()
	for c := range t.conns {
		c.nc.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// serve runs the connection until it closes.
func (c *portableConn) serve() {
	defer c.t.wg.Done()
	if c.t.l.TLS != nil {
		if reason, err := c.handshake(); err != nil {
			c.close(reason, err)
			return
		}
	}
	reason, err := c.loop()
	c.close(reason, err)
}

// loop reads a request, queues it, waits for its response and writes it,
// until something ends the connection; it returns why.
func (c *portableConn) loop() (closeReason, error) {
	t := c.t
	maxBytes := t.srv.cfg.SocketRequestMaxBytes
	var size [4]byte
	for {
		if !c.armRead() {
			return closedAtShutdown, nil
		}
		if _, err := io.ReadFull(c.conn, size[:]); err != nil {
			return c.readFailed(err)
		}
		t.stats.bytesIn.Add(4)
		n := int32(binary.BigEndian.Uint32(size[:]))
		if err := checkSize(n, c.state.frameLimit(maxBytes)); err != nil {
			return closedBadSize, err
		}
		body, err := c.readBody(int(n))
		if err != nil {
			t.srv.memory.release(int64(cap(body)), false)
			if errors.Is(err, errStopped) {
				return closedAtShutdown, nil
			}
			return c.readFailed(err)
		}
		t.srv.memory.completed(int64(cap(body)))
		t.stats.requestsRead.Add(1)
		r := &Request{Body: body, Received: time.Now(), RemoteAddr: c.remote, LocalAddr: c.local, ConnID: c.id,
			Listener: t.l.Name, SecurityProtocol: t.l.SecurityProtocol, TLS: c.tlsState, from: c, pool: t.srv.memory}
		r.reserved.Store(int64(cap(body)))
		r.Conn = &c.state
		c.mu.Lock()
		c.inflight = r
		c.mu.Unlock()

		if !t.srv.channel.TrySend(r) {
			t.stats.backPressure.Add(1) // the queue is full: wait for room
			if !t.srv.channel.Send(r, t.stop) {
				r.release() // no handler will have it; close counts the drop
				return closedAtShutdown, nil
			}
		}
		resp, reason, ok := c.await()
		if !ok {
			return reason, nil // the response, when it comes, is dropped
		}
		if resp.NoResponse {
			t.stats.noResponses.Add(1)
			if resp.Written != nil {
				resp.Written()
			}
		} else {
			if err := c.write(resp.Sends); err != nil {
				t.stats.responsesDropped.Add(1)
				return c.writeFailed(err)
			}
			t.stats.responsesSent.Add(1)
			if resp.Written != nil {
				resp.Written()
			}
		}
		if resp.Close {
			return closedByResponse, nil
		}
	}
}

// await waits for the response of the request in flight. It gives up, and
// returns false with the reason, when the server is forced to stop, the
// peer closed (if a watcher looks, see watch), or no byte moved for
// connections.max.idle.ms, which a waiting request does not suspend (as in
// Kafka).
func (c *portableConn) await() (resp Response, reason closeReason, ok bool) {
	select {
	case resp = <-c.resp: // the usual case: answered at once, no timer needed
		c.stopWatching()
		return resp, 0, true
	default:
	}
	var idle <-chan time.Time
	if d := c.t.srv.cfg.ConnectionsMaxIdle; d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		idle = timer.C
	}
	select {
	case resp = <-c.resp:
		c.stopWatching()
		return resp, 0, true
	case <-c.t.stop:
		return resp, closedAtShutdown, false
	case <-c.peerGone:
		return resp, closedByPeer, false
	case <-idle:
		return resp, closedIdle, false
	}
}

// errStopped: the server was forced to stop while a frame waited for
// memory.
var errStopped = errors.New("network: server stopped")

// readBody reads a frame of n bytes into a buffer that grows as the bytes
// arrive, so a peer that announces more than it sends costs what it sent.
// Each growth is reserved from the memory pool first, waiting while the
// pool says no. On an error, the buffer (whose capacity is reserved) is
// returned too, for the caller to release.
func (c *portableConn) readBody(n int) ([]byte, error) {
	var body []byte
	for len(body) < n {
		if len(body) == cap(body) {
			newCap := nextFrameCap(body, n, 0)
			if !c.grow(int64(newCap - cap(body))) {
				return body, errStopped
			}
			// Not from the free list: this transport does not hand
			// buffers back (Request.Recycle is the reactor's).
			body = append(make([]byte, 0, newCap), body...)
		}
		m, err := io.ReadFull(c.conn, body[len(body):cap(body)])
		body = body[:len(body)+m]
		c.t.stats.bytesIn.Add(uint64(m))
		if err != nil {
			return body, err
		}
	}
	if body == nil {
		body = []byte{} // a zero-size frame
	}
	return body, nil
}

// grow reserves n more bytes for the frame being read, waiting while the
// memory pool says no. It returns false if the server is forced to stop
// first.
func (c *portableConn) grow(n int64) bool {
	pool := c.t.srv.memory
	if pool.tryGrow(n) {
		return true
	}
	c.t.stats.memoryWaits.Add(1)
	for {
		freed := make(chan struct{}, 1)
		pool.notifyWhenFree(func() {
			select {
			case freed <- struct{}{}:
			default:
			}
		})
		if pool.tryGrow(n) { // released between the try and the registration
			return true
		}
		select {
		case <-freed:
		case <-c.t.stop:
			return false
		}
		if pool.tryGrow(n) {
			return true
		}
	}
}

// armRead prepares the read of the next request: it refuses once the
// server drains, and sets the idle deadline. mu makes "check draining, set
// the deadline" atomic with respect to drain's "set draining, set a past
// deadline", so a goroutine that is about to read either sees draining or
// has its deadline overwritten by drain's.
func (c *portableConn) armRead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.draining.Load() {
		return false
	}
	var deadline time.Time
	if idle := c.t.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		deadline = time.Now().Add(idle)
	}
	c.nc.SetReadDeadline(deadline)
	return true
}

// readFailed classifies a read error.
func (c *portableConn) readFailed(err error) (closeReason, error) {
	switch {
	case c.t.draining.Load():
		return closedAtShutdown, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return closedIdle, nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return closedByPeer, err
	default:
		return closedOnError, err
	}
}

// writeFailed classifies a write error.
func (c *portableConn) writeFailed(err error) (closeReason, error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return closedIdle, err
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		return closedByPeer, err
	default:
		return closedOnError, err
	}
}

// write writes the sends in order: runs of byte buffers with one writev
// (net.Buffers; through TLS, a Write each), file regions with io.Copy from
// a SectionReader. Go handles partial writes inside Write.
func (c *portableConn) write(sends []Send) error {
	if idle := c.t.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(idle))
	}
	for i := 0; i < len(sends); {
		if sends[i].File != nil {
			s := &sends[i]
			// On a TLS listener the region is read into memory and
			// encrypted: no sendfile, whatever RegionSender says.
			n, err := io.Copy(c.conn, io.NewSectionReader(s.File, s.Pos, s.Len))
			c.t.stats.bytesOut.Add(uint64(n))
			if err == nil && n < s.Len {
				err = io.ErrUnexpectedEOF // the region ends past the end of the file
			}
			if err != nil {
				return fmt.Errorf("write file region: %w", err)
			}
			i++
			continue
		}
		var bufs net.Buffers
		for ; i < len(sends) && sends[i].File == nil; i++ {
			if len(sends[i].Bytes) > 0 {
				bufs = append(bufs, sends[i].Bytes)
			}
		}
		n, err := bufs.WriteTo(c.conn)
		c.t.stats.bytesOut.Add(uint64(n))
		if err != nil {
			return fmt.Errorf("write response: %w", err)
		}
	}
	return nil
}

// respond implements responder.
func (c *portableConn) respond(r *Request, resp Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return // close counted the drop
	}
	c.inflight = nil
	c.resp <- resp
}

func (c *portableConn) logDuplicate(r *Request) {
	c.t.srv.logger.Error("Respond called twice for one request; ignoring the second", "conn", r.ConnID)
}

// close ends the connection for reason.
func (c *portableConn) close(reason closeReason, err error) {
	t := c.t
	c.stopWatching()
	c.mu.Lock()
	c.closed = true
	inflight := c.inflight
	c.inflight = nil
	select {
	case <-c.resp: // answered, but the goroutine left before writing it
		t.stats.responsesDropped.Add(1)
	default:
	}
	c.mu.Unlock()
	if inflight != nil {
		// Outside mu: Done takes the request's lock and then ours.
		inflight.cancel() // a handler holding it can let go now, and need not answer
		t.stats.responsesDropped.Add(1)
	}
	c.nc.Close()

	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	t.srv.openConns.Add(-1)
	t.stats.countClose(reason)
	logClose(t.srv.logger, c.id, reason, err)
}
