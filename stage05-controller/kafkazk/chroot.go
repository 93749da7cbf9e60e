package kafkazk

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// JuteMaxBuffer is ZooKeeper's jute.maxbuffer default, 0xfffff bytes (one
// MiB less one): the largest request a ZooKeeper server reads. A longer
// one is not refused with an error code: the server closes the
// connection, the client reconnects and the request is lost (a broker
// asked for a topic of 100,000 partitions, whose assignment znode is
// larger, used to lose its connection this way). So every write is
// measured before it is sent, and one over this limit fails with
// ErrRequestTooLarge instead. The server's setting cannot be read by a
// client: an ensemble started with a larger jute.maxbuffer still gets
// writes only up to the default, as Kafka's tools assume too.
const JuteMaxBuffer = 0xfffff

// ErrRequestTooLarge: a write would be larger than JuteMaxBuffer, so it
// was not sent.
var ErrRequestTooLarge = errors.New("kafkazk: request larger than ZooKeeper's jute.maxbuffer (1048575 bytes)")

// conn is the ZooKeeper connection as this package's paths see it. With
// a chroot (zookeeper.connect's "/kafka" suffix, as in
// zk1:2181,zk2:2181/kafka) every path is under it: Kafka's /brokers/ids is
// /kafka/brokers/ids on the ensemble, so that several clusters share one
// ensemble without seeing each other. The paths ZooKeeper answers with (a
// sequential znode's name, a multi's created paths, a watch event's path)
// come back without the chroot. This is what ZooKeeper's Java client does
// for Kafka (the chroot is a client-side prefix there too); go-zookeeper
// has no chroot, so the prefix is added here, on every call.
type conn struct {
	zk *zk.Conn
	// root is the chroot, "/kafka", or "" for none; never a trailing
	// slash. Set once, before the conn is shared.
	root string
}

// abs is a path of this package's on the ensemble.
func (c *conn) abs(p string) string {
	if c.root == "" {
		return p
	}
	if p == "/" {
		return c.root
	}
	return c.root + p
}

// rel is a path ZooKeeper answered with, as this package names it.
func (c *conn) rel(p string) string {
	if c.root == "" {
		return p
	}
	if p == c.root {
		return "/"
	}
	return strings.TrimPrefix(p, c.root)
}

// watch hands on a watch's one event with its path made relative. The
// goroutine it starts ends when the watch fires or is dropped (go-zookeeper
// closes every watch channel when the connection closes).
func (c *conn) watch(ch <-chan zk.Event) <-chan zk.Event {
	if c.root == "" || ch == nil {
		return ch
	}
	out := make(chan zk.Event, 1)
	go func() {
		defer close(out)
		for ev := range ch {
			if ev.Path != "" {
				ev.Path = c.rel(ev.Path)
			}
			out <- ev
		}
	}()
	return out
}

func (c *conn) State() zk.State  { return c.zk.State() }
func (c *conn) SessionID() int64 { return c.zk.SessionID() }
func (c *conn) Close()           { c.zk.Close() }

func (c *conn) Get(p string) ([]byte, *zk.Stat, error) { return c.zk.Get(c.abs(p)) }

func (c *conn) GetW(p string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	data, stat, ch, err := c.zk.GetW(c.abs(p))
	return data, stat, c.watch(ch), err
}

func (c *conn) Exists(p string) (bool, *zk.Stat, error) { return c.zk.Exists(c.abs(p)) }

func (c *conn) ExistsW(p string) (bool, *zk.Stat, <-chan zk.Event, error) {
	ok, stat, ch, err := c.zk.ExistsW(c.abs(p))
	return ok, stat, c.watch(ch), err
}

// Children's names are relative to the parent, so they need no change.
func (c *conn) Children(p string) ([]string, *zk.Stat, error) { return c.zk.Children(c.abs(p)) }

func (c *conn) ChildrenW(p string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	names, stat, ch, err := c.zk.ChildrenW(c.abs(p))
	return names, stat, c.watch(ch), err
}

func (c *conn) Create(p string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	req := &zk.CreateRequest{Path: c.abs(p), Data: data, Acl: acl, Flags: flags}
	if err := checkSize(requestBytes(req)); err != nil {
		return "", err
	}
	created, err := c.zk.Create(req.Path, data, flags, acl)
	return c.rel(created), err
}

func (c *conn) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	req := &zk.SetDataRequest{Path: c.abs(p), Data: data, Version: version}
	if err := checkSize(requestBytes(req)); err != nil {
		return nil, err
	}
	return c.zk.Set(req.Path, data, version)
}

func (c *conn) Delete(p string, version int32) error { return c.zk.Delete(c.abs(p), version) }

// Multi runs ops, copied with their paths under the chroot (the caller's
// ops are not changed), as one transaction.
func (c *conn) Multi(ops ...any) ([]zk.MultiResponse, error) {
	rooted := make([]any, len(ops))
	size := requestHeaderBytes + multiHeaderBytes // the multi's own header and the closing one
	for i, op := range ops {
		switch op := op.(type) {
		case *zk.CreateRequest:
			r := *op
			r.Path = c.abs(op.Path)
			rooted[i] = &r
		case *zk.SetDataRequest:
			r := *op
			r.Path = c.abs(op.Path)
			rooted[i] = &r
		case *zk.DeleteRequest:
			r := *op
			r.Path = c.abs(op.Path)
			rooted[i] = &r
		case *zk.CheckVersionRequest:
			r := *op
			r.Path = c.abs(op.Path)
			rooted[i] = &r
		default:
			return nil, fmt.Errorf("kafkazk: multi: unknown operation %T", op)
		}
		size += multiHeaderBytes + requestBytes(rooted[i]) - requestHeaderBytes
	}
	if err := checkSize(size); err != nil {
		return nil, fmt.Errorf("multi of %d operations: %w", len(ops), err)
	}
	resp, err := c.zk.Multi(rooted...)
	for i := range resp {
		if resp[i].String != "" {
			resp[i].String = c.rel(resp[i].String)
		}
	}
	return resp, err
}

// The sizes of jute's encoding (ZooKeeper's zookeeper.jute): a string or
// a buffer is a 4-byte length and its bytes, a request has a header of
// its xid and opcode, a multi a header of type, done and err before each
// operation and after the last.
const (
	requestHeaderBytes = 4 + 4
	multiHeaderBytes   = 4 + 1 + 4
)

// requestBytes is the length ZooKeeper reads for a request of op alone
// (the packet after its 4-byte length), which the server compares with
// jute.maxbuffer.
func requestBytes(op any) int {
	str := func(s string) int { return 4 + len(s) }
	switch op := op.(type) {
	case *zk.CreateRequest:
		n := requestHeaderBytes + str(op.Path) + 4 + len(op.Data) + 4 + 4 // path, data, acl count, flags
		for _, a := range op.Acl {
			n += 4 + str(a.Scheme) + str(a.ID)
		}
		return n
	case *zk.SetDataRequest:
		return requestHeaderBytes + str(op.Path) + 4 + len(op.Data) + 4
	case *zk.DeleteRequest:
		return requestHeaderBytes + str(op.Path) + 4
	case *zk.CheckVersionRequest:
		return requestHeaderBytes + str(op.Path) + 4
	}
	return 0
}

// checkSize refuses a request longer than JuteMaxBuffer.
func checkSize(n int) error {
	if n > JuteMaxBuffer {
		return fmt.Errorf("%w: it would be %d bytes", ErrRequestTooLarge, n)
	}
	return nil
}

// parseChroot checks a zookeeper.connect chroot ("/kafka", "/a/b") as
// ZooKeeper checks a path: absolute, no empty, "." or ".." element, no
// trailing slash. "/" alone is no chroot, as in ZooKeeper's
// ConnectStringParser.
func parseChroot(s string) (string, error) {
	if s == "" || s == "/" {
		return "", nil
	}
	if strings.HasSuffix(s, "/") {
		return "", fmt.Errorf("the chroot %q must not end with /", s)
	}
	for _, el := range strings.Split(s[1:], "/") {
		if el == "" || el == "." || el == ".." {
			return "", fmt.Errorf("the chroot %q has an empty, . or .. element", s)
		}
	}
	if strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("the chroot %q has a null character", s)
	}
	return s, nil
}

// ensureChroot creates the chroot and its missing parents, empty, as a
// Kafka broker does at start (KafkaServer.initZkClient, with a client
// outside the chroot): an ensemble needs no preparation for a new
// cluster. Nothing without a chroot.
func (c *conn) ensureChroot() error {
	if c.root == "" {
		return nil
	}
	at := ""
	for el := range strings.SplitSeq(c.root[1:], "/") {
		at += "/" + el
		if _, err := c.zk.Create(at, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("kafkazk: create the chroot %s: %w", at, err)
		}
	}
	return nil
}
