package zktest

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Client is a ZooKeeper session opened by a test: the full go-zookeeper
// API, plus a record of the session states it went through, so a test can
// wait for "this session expired" instead of draining an event channel.
type Client struct {
	*zk.Conn

	t testing.TB // for logs

	mu     sync.Mutex
	states []zk.State // every session state seen, in order. Protected by mu.
	closed bool       // set by Close; no logging after it. Protected by mu.
}

// ClientOption changes how NewClient and Connect open a session.
type ClientOption func(*clientConfig)

// clientConfig collects the ClientOptions.
type clientConfig struct {
	sessionTimeout time.Duration // asked of the server, which may adjust it
}

// WithSessionTimeout asks for a session timeout other than SessionTimeout.
// The servers grant between 2 and 20 ticks (1 s to 10 s).
func WithSessionTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.sessionTimeout = d }
}

// NewClient starts a ZooKeeper client for addrs and returns at once; the
// session is established in the background, if ever (see Connect). The
// client is closed in t.Cleanup.
func NewClient(t testing.TB, addrs []string, opts ...ClientOption) *Client {
	t.Helper()
	cfg := clientConfig{sessionTimeout: SessionTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	c := &Client{t: t}
	conn, _, err := zk.Connect(addrs, cfg.sessionTimeout,
		zk.WithLogger(c), zk.WithEventCallback(c.record),
		zk.WithDialer(cappedDialer(cfg.sessionTimeout*2/3)))
	if err != nil {
		t.Fatalf("zktest: connect to %v: %v", addrs, err)
	}
	c.mu.Lock() // the client's goroutines may already be logging
	c.Conn = conn
	c.mu.Unlock()
	t.Cleanup(c.Close)
	return c
}

// Connect opens a ZooKeeper session on addrs and waits until the session is
// established. The session is closed in t.Cleanup.
func Connect(t testing.TB, addrs []string, opts ...ClientOption) *Client {
	t.Helper()
	c := NewClient(t, addrs, opts...)
	WaitFor(t, 3*SessionTimeout, fmt.Sprintf("a ZooKeeper session on %v", addrs), c.HasSession)
	return c
}

// HasSession reports whether the client is connected with a live session.
func (c *Client) HasSession() bool { return c.State() == zk.StateHasSession }

// Saw reports whether the session has been in state s since it was opened
// (zk.StateExpired, zk.StateDisconnected, ...). go-zookeeper moves on by
// itself (an expired client opens a new session), so a test that waits for
// the current state could miss one.
func (c *Client) Saw(s zk.State) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.states, s)
}

// Close closes the session: the server deletes its ephemeral znodes at
// once, without waiting for the session timeout. Closing twice is harmless.
func (c *Client) Close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		c.Conn.Close()
	}
}

// record is the go-zookeeper event callback: it runs on the client's own
// goroutine for every event, and keeps the session state changes.
func (c *Client) record(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states = append(c.states, ev.State)
}

// Printf is go-zookeeper's logger: its messages go to the test log, tagged
// with the session, until Close (a log after the test ends would panic).
func (c *Client) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	var session int64
	if c.Conn != nil {
		session = c.Conn.SessionID()
	}
	c.t.Logf("zk client %#x: %s", session, fmt.Sprintf(format, args...))
}

// cappedDialer dials like go-zookeeper's default dialer, but its
// connections never wait for a reply longer than max, which NewClient sets
// to go-zookeeper's own read timeout (2/3 of the session timeout).
//
// The cap is for the session handshake: go-zookeeper waits ten read
// timeouts for the server's answer (27 s with 4 s sessions), while Kafka's
// Java client gives a server the session timeout divided by the number of
// servers. A paused server accepts TCP connections (the kernel does) and
// never answers, so an uncapped client that picks it hangs there while its
// session expires, instead of trying the next server.
func cappedDialer(max time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: conn, max: max}, nil
	}
}

// cappedConn is a connection whose deadlines are at most max away.
type cappedConn struct {
	net.Conn
	max time.Duration // the longest wait for a read or a write
}

func (c *cappedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.cap(t))
}

func (c *cappedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.cap(t))
}

// cap brings a deadline in to max from now; no deadline stays none
// (go-zookeeper clears its deadlines between operations).
func (c *cappedConn) cap(t time.Time) time.Time {
	if limit := time.Now().Add(c.max); !t.IsZero() && t.After(limit) {
		return limit
	}
	return t
}
