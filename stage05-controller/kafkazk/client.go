package kafkazk

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Errors of the operations below, besides go-zookeeper's own (zk.ErrNoNode,
// zk.ErrNodeExists, zk.ErrBadVersion), which pass through wrapped.
var (
	// ErrControllerMoved: a controller's write was refused because
	// /controller_epoch is no longer at the version its election wrote:
	// another broker has been elected since (Kafka's
	// ControllerMovedException). The writer is a zombie and must resign.
	ErrControllerMoved = errors.New("kafkazk: the controller moved: /controller_epoch changed since this controller's election")
	// ErrControllerExists: another broker won the controller election.
	ErrControllerExists = errors.New("kafkazk: another broker is the controller")
	// ErrBrokerIDTaken: /brokers/ids/<id> belongs to another live session,
	// another broker started with the same broker.id.
	ErrBrokerIDTaken = errors.New("kafkazk: broker id is registered by another live session")
	// ErrTopicExists: /brokers/topics/<topic> exists.
	ErrTopicExists = errors.New("kafkazk: topic already exists")
	// ErrNotConnected: Connect found no session within its timeout.
	ErrNotConnected = errors.New("kafkazk: no ZooKeeper session")
)

// DefaultSessionTimeout is zookeeper.session.timeout.ms's default since
// Kafka 2.5 (6 s before).
const DefaultSessionTimeout = 18 * time.Second

// Options configure Connect.
type Options struct {
	// SessionTimeout is zookeeper.session.timeout.ms: how long the
	// ensemble keeps the session, and its ephemeral znodes, after it last
	// heard from this client. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// ConnectionTimeout is zookeeper.connection.timeout.ms: how long
	// Connect waits for the first session. Default SessionTimeout.
	ConnectionTimeout time.Duration
	Logger            *slog.Logger
}

// Client is a ZooKeeper session with Kafka's operations on it (Kafka's
// KafkaZkClient over its ZooKeeperClient). go-zookeeper reconnects by
// itself, to another server if need be, and when the ensemble has
// expired the session it opens a new one: the ephemeral znodes are gone
// then, and OnNewSession's callbacks put back what they owned (a broker
// registers again; a controller has lost its office).
type Client struct {
	// conn is the session's connection, under the chroot if
	// zookeeper.connect names one (chroot.go).
	conn           *conn
	logger         *slog.Logger
	sessionTimeout time.Duration

	events chan zk.Event // session events, from go-zookeeper's goroutine to dispatch
	done   chan struct{} // closed by Close

	mu           sync.Mutex
	onNewSession []func()  // Protected by mu.
	session      int64     // the session last seen established. Protected by mu.
	disconnected time.Time // when the connection was last lost; zero while connected. Protected by mu.
	closed       bool      // Protected by mu.
}

// Connect opens a session on the servers of connect, a zookeeper.connect
// string ("host:port,host:port[/chroot]"), and waits for it. With a
// chroot every znode of this client is under it (chroot.go); the chroot
// itself is created by CreateTopLevelPaths, as a starting broker creates
// it.
func Connect(connect string, opts Options) (*Client, error) {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.ConnectionTimeout <= 0 {
		opts.ConnectionTimeout = opts.SessionTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	servers, chroot, err := ParseConnect(connect)
	if err != nil {
		return nil, err
	}
	c := &Client{logger: opts.Logger, sessionTimeout: opts.SessionTimeout,
		events: make(chan zk.Event, 64), done: make(chan struct{})}
	zc, _, err := zk.Connect(servers, opts.SessionTimeout,
		zk.WithLogger(zkLogger{opts.Logger}), zk.WithEventCallback(c.event),
		zk.WithDialer(BoundedDialer(opts.SessionTimeout*2/3)))
	if err != nil {
		return nil, fmt.Errorf("kafkazk: connect to %s: %w", connect, err)
	}
	c.mu.Lock()
	c.conn = &conn{zk: zc, root: chroot}
	c.mu.Unlock()
	go c.dispatch()
	deadline := time.Now().Add(opts.ConnectionTimeout)
	for zc.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("%w on %s after %v (zookeeper.connection.timeout.ms)", ErrNotConnected, connect, opts.ConnectionTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, nil
}

// ParseConnect splits a zookeeper.connect string into its servers and
// its chroot ("" for none): everything from the first "/" is the chroot,
// which applies to every server ("zk1:2181,zk2:2181/kafka"), as Kafka and
// ZooKeeper read it.
func ParseConnect(connect string) (servers []string, chroot string, err error) {
	hosts := connect
	if i := strings.IndexByte(connect, '/'); i >= 0 {
		hosts = connect[:i]
		if chroot, err = parseChroot(strings.TrimSpace(connect[i:])); err != nil {
			return nil, "", fmt.Errorf("kafkazk: zookeeper.connect %q: %w", connect, err)
		}
	}
	for s := range strings.SplitSeq(hosts, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("kafkazk: zookeeper.connect %q names no server", connect)
	}
	return servers, chroot, nil
}

// Conn is the underlying go-zookeeper connection, for what this package
// does not wrap (tests, tools). Its paths are the ensemble's: with a
// chroot, Kafka's /brokers/ids is Chroot()+"/brokers/ids" on it.
func (c *Client) Conn() *zk.Conn { return c.conn.zk }

// Chroot is zookeeper.connect's chroot ("/kafka"), "" for none.
func (c *Client) Chroot() string { return c.conn.root }

// SessionID is the current session's id.
func (c *Client) SessionID() int64 { return c.conn.SessionID() }

// SessionTimeout is the session timeout asked for.
func (c *Client) SessionTimeout() time.Duration { return c.sessionTimeout }

// Connected reports whether the client has a live session now.
func (c *Client) Connected() bool { return c.conn.State() == zk.StateHasSession }

// DisconnectedFor is how long the client has been without a connection
// (0 while it has one). The ensemble may expire the session while the
// client is cut off, and the client learns it only when it reconnects: a
// controller uses this to stop acting before that can happen.
func (c *Client) DisconnectedFor() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disconnected.IsZero() {
		return 0
	}
	return time.Since(c.disconnected)
}

// OnNewSession registers f to run, on a goroutine of the client's, each
// time a session other than the first is established (the first expired;
// its ephemeral znodes are gone). Callbacks run one at a time, in order.
func (c *Client) OnNewSession(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNewSession = append(c.onNewSession, f)
}

// Close ends the session: the ensemble deletes its ephemeral znodes at
// once (a broker's registration, a controller's /controller), which is
// how a clean stop hands the controller over without waiting for the
// session timeout.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.conn.Close()
	close(c.done)
}

// event is go-zookeeper's callback, on its own goroutine: it must not
// block, and must not call the connection (which that goroutine serves).
func (c *Client) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	switch ev.State {
	case zk.StateDisconnected, zk.StateExpired:
		if c.disconnected.IsZero() {
			c.disconnected = time.Now()
		}
	case zk.StateHasSession:
		c.disconnected = time.Time{}
	}
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	select {
	case c.events <- ev:
	default: // dispatch is behind: it reads the session id itself, so a lost event loses nothing
	}
}

// dispatch runs OnNewSession's callbacks when the session changes.
func (c *Client) dispatch() {
	for {
		select {
		case <-c.done:
			return
		case ev := <-c.events:
			if ev.State != zk.StateHasSession {
				c.logger.Info("zookeeper session state", "state", ev.State.String(), "server", ev.Server)
				continue
			}
			id := c.conn.SessionID()
			c.mu.Lock()
			first, changed := c.session == 0, id != c.session
			c.session = id
			callbacks := append([]func(){}, c.onNewSession...)
			c.mu.Unlock()
			if !changed {
				continue
			}
			c.logger.Info("zookeeper session established", "session", fmt.Sprintf("%#x", id), "server", ev.Server)
			if first {
				continue
			}
			for _, f := range callbacks {
				f()
			}
		}
	}
}

// zkLogger sends go-zookeeper's messages to slog at debug level: they
// are chatty (every reconnect attempt), and the session states that
// matter are logged by dispatch.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) { z.l.Debug(fmt.Sprintf(format, args...)) }

// multi runs ops as one transaction and returns the failing op's error
// and index (ZooKeeper answers the ops before it with success and those
// after with "runtime inconsistency": the first error is the cause).
func (c *Client) multi(ops ...any) ([]zk.MultiResponse, int, error) {
	resp, err := c.conn.Multi(ops...)
	if err == nil {
		return resp, -1, nil
	}
	for i, r := range resp {
		if r.Error != nil {
			return resp, i, r.Error
		}
	}
	return resp, -1, err
}

// ControllerEpoch is what a controller won in its election: the epoch, and
// the version of /controller_epoch its election wrote. Every write the
// controller makes afterwards is a multi whose first op checks that
// version (Fenced), so a controller that lost its office cannot write
// (KAFKA-6082).
type ControllerEpoch struct {
	Epoch     int32
	ZkVersion int32
}

// fenced runs ops after a check that /controller_epoch is still at e's
// version; ErrControllerMoved if it is not.
func (c *Client) fenced(e ControllerEpoch, ops ...any) ([]zk.MultiResponse, error) {
	all := append([]any{&zk.CheckVersionRequest{Path: ControllerEpochPath, Version: e.ZkVersion}}, ops...)
	resp, i, err := c.multi(all...)
	if err == nil {
		return resp[1:], nil
	}
	if i == 0 {
		return nil, fmt.Errorf("%w (epoch %d at version %d)", ErrControllerMoved, e.Epoch, e.ZkVersion)
	}
	if i > 0 {
		return nil, fmt.Errorf("kafkazk: %s: %w", opPath(ops[i-1]), err)
	}
	return nil, fmt.Errorf("kafkazk: fenced write: %w", err)
}

// opPath names the znode of a multi op, for errors.
func opPath(op any) string {
	switch op := op.(type) {
	case *zk.CreateRequest:
		return "create " + op.Path
	case *zk.SetDataRequest:
		return "set " + op.Path
	case *zk.DeleteRequest:
		return "delete " + op.Path
	case *zk.CheckVersionRequest:
		return "check " + op.Path
	}
	return fmt.Sprintf("%T", op)
}

// acl is every znode's ACL: open, as Kafka's without zookeeper.set.acl.
var acl = zk.WorldACL(zk.PermAll)

// createPersistent creates a persistent znode, and its missing parents
// empty (Kafka's makeSurePersistentPathExists); one that exists is left as
// it is.
func (c *Client) createPersistent(p string, data []byte) error {
	if p == "/" { // the chroot (without one, the root, which always exists)
		return c.conn.ensureChroot()
	}
	_, err := c.conn.Create(p, data, 0, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := c.createPersistent(path.Dir(p), nil); err != nil {
			return err
		}
		_, err = c.conn.Create(p, data, 0, acl)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("kafkazk: create %s: %w", p, err)
	}
	return nil
}

// CreateTopLevelPaths creates the persistent znodes a Kafka broker creates
// at start (KafkaZkClient.createTopLevelPaths), those that exist left,
// and first the chroot if zookeeper.connect names one that is missing (as
// Kafka's KafkaServer.initZkClient does).
func (c *Client) CreateTopLevelPaths() error {
	if err := c.conn.ensureChroot(); err != nil {
		return err
	}
	for _, p := range PersistentPaths {
		if err := c.createPersistent(p, nil); err != nil {
			return err
		}
	}
	return nil
}
