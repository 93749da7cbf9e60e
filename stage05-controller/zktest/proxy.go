package zktest

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one ZooKeeper server. A
// client that connects through it can be cut off from ZooKeeper while the
// server goes on serving everyone else: a broker partitioned from the
// ensemble, say.
//
// Cut plays a partition, not a crash: nothing is closed and no byte is
// lost. Bytes sent during a cut wait (in the proxy and in the kernels'
// buffers, as they would in TCP retransmissions) and arrive after Restore
// if both ends are still there. Neither end learns of the cut except by its
// own timeouts, which is exactly how a ZooKeeper session expires: the
// server hears nothing for the session timeout and ends the session; the
// client notices silence after 2/3 of it and reconnects, in vain, until
// Restore.
type Proxy struct {
	t      testing.TB    // for logs
	ln     net.Listener  // clients connect here
	target string        // the server's address
	done   chan struct{} // closed by close: wakes every goroutine waiting on a cut

	mu     sync.Mutex
	open   chan struct{}         // closed while traffic flows, open while cut. Protected by mu.
	conns  map[net.Conn]struct{} // both ends of every link, closed by close. Protected by mu.
	closed bool                  // protected by mu

	wg sync.WaitGroup // the accept loop and every link's goroutines
}

// StartProxy starts a proxy to target (host:port) on a free port of
// 127.0.0.1. It is stopped, and its connections closed, in t.Cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy to %s: %v", target, err)
	}
	p := &Proxy{
		t:      t,
		ln:     ln,
		target: target,
		done:   make(chan struct{}),
		open:   make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
	}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients connect to instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops all traffic through the proxy, in both directions, on existing
// and new connections, until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
		p.t.Logf("zktest: proxy %s -> %s: cut", p.Addr(), p.target)
	default: // already cut
	}
}

// Restore lets traffic flow again; what waited during the cut is delivered.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open: // not cut
	default:
		close(p.open)
		p.t.Logf("zktest: proxy %s -> %s: restored", p.Addr(), p.target)
	}
}

// wait blocks while the proxy is cut. It reports false when the proxy has
// been closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-p.done:
		return false
	case <-open:
		return true
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(conn) {
			return
		}
		p.wg.Add(1)
		go p.link(conn)
	}
}

// link connects one client to the server and copies both ways.
func (p *Proxy) link(client net.Conn) {
	defer p.wg.Done()
	// A connection made during a cut reaches the server only after Restore.
	// (The client's connect succeeds at once: the kernel accepts for us. A
	// real partition would leave its SYN unanswered; either way the client
	// hears nothing back.)
	if !p.wait() {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The server is down: the client sees its connection closed.
		p.t.Logf("zktest: proxy %s -> %s: %v", p.Addr(), p.target, err)
		p.drop(client)
		return
	}
	if !p.track(server) {
		p.drop(client)
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(server, client)
	}()
	p.pipe(client, server)
}

// pipe copies src to dst, holding bytes while the proxy is cut, then closes
// both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.drop(src)
	defer p.drop(dst)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			// src closed or broke. During a cut dst must not hear of it:
			// a FIN does not cross a partition either.
			p.wait()
			return
		}
	}
}

// track registers conn for close; it reports false, having closed conn,
// when the proxy is already closed.
func (p *Proxy) track(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		conn.Close()
		return false
	}
	p.conns[conn] = struct{}{}
	return true
}

// drop closes conn and forgets it.
func (p *Proxy) drop(conn net.Conn) {
	p.mu.Lock()
	delete(p.conns, conn)
	p.mu.Unlock()
	if err := conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		p.t.Logf("zktest: proxy %s: close: %v", p.Addr(), err)
	}
}

// close stops the proxy, closes every connection and waits for its
// goroutines, so none of them logs after the test.
func (p *Proxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.done)
	p.ln.Close()
	for conn := range p.conns {
		conn.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
