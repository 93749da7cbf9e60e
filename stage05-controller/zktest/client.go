package zktest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
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
		zk.WithDialer(kafkazk.BoundedDialer(cfg.sessionTimeout*2/3)))
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
