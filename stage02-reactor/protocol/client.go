package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoCommonVersion: the broker does not serve any version of an API that
// kmsg can encode.
var ErrNoCommonVersion = errors.New("protocol: no version in common with the broker")

// ErrResponseTooBig: a peer announced a response larger than
// MaxResponseBytes.
var ErrResponseTooBig = errors.New("protocol: response larger than the client accepts")

// MaxResponseBytes bounds the responses a Client reads: a follower's fetch
// asks for replica.fetch.response.max.bytes (10 MiB) and may get one batch
// more; the controller's requests are small. A peer that announces more is
// broken or hostile, and the connection is closed without allocating it.
const MaxResponseBytes = 256 << 20

// Client is one connection to a broker for requests from the broker side
// (Kafka's NetworkClient): a follower's fetches to its leader, the
// controller's LeaderAndIsr. It negotiates versions with ApiVersions when it
// connects and sends one request at a time, as Kafka's inter-broker
// connections do. Safe for concurrent use; requests are serialized.
type Client struct {
	addr      string
	formatter *kmsg.RequestFormatter

	mu       sync.Mutex // one request in flight
	conn     net.Conn
	r        *bufio.Reader
	next     int32           // next correlation id
	versions map[int16]int16 // the broker's max version per API key
}

// Dial connects to addr and learns the broker's API versions.
func Dial(ctx context.Context, addr, clientID string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Client{addr: addr, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0) // every broker understands v0
	resp, err := c.roundTrip(ctx, req)
	if err == nil {
		if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
			err = fmt.Errorf("ApiVersions error code %d", code)
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.versions = map[int16]int16{}
	for _, k := range resp.(*kmsg.ApiVersionsResponse).ApiKeys {
		c.versions[k.ApiKey] = k.MaxVersion
	}
	return c, nil
}

// Addr is the broker's address.
func (c *Client) Addr() string { return c.addr }

// Request sends req at the highest version both sides know and returns the
// response. An error leaves the connection closed: dial again.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	max, ok := c.versions[req.Key()]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoCommonVersion, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(max, req.MaxVersion()))
	return c.roundTrip(ctx, req)
}

// CapVersion lowers the highest version Request negotiates for req to max:
// a caller that does not speak a later version's fields (stage 03's
// follower, which names topics by name, keeps Fetch at v12 although
// brokers serve v13+ by topic id) asks for at most max.
func CapVersion(req kmsg.Request, max int16) kmsg.Request { return capped{req, max} }

type capped struct {
	kmsg.Request
	max int16
}

func (r capped) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

func (c *Client) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, net.ErrClosed
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Time{}
	}
	conn := c.conn
	conn.SetDeadline(deadline)
	// Unblock a read on cancellation, not only at the deadline.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	id := c.next
	c.next++
	if _, err := c.conn.Write(c.formatter.AppendRequest(nil, req, id)); err != nil {
		return nil, c.fail(ctx, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, c.fail(ctx, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > MaxResponseBytes {
		return nil, c.fail(ctx, fmt.Errorf("%w: %d bytes announced, the limit is %d", ErrResponseTooBig, n, MaxResponseBytes))
	}
	// The buffer grows as the bytes arrive: a peer that announces much
	// and sends little costs what it sent.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, c.r, int64(n)); err != nil {
		return nil, c.fail(ctx, err)
	}
	frame := buf.Bytes()
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != id {
		return nil, c.fail(ctx, fmt.Errorf("response does not match request %d", id))
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != ApiVersionsKey {
		r := reader{b: body, ok: true}
		if r.skipTags(); !r.ok {
			return nil, c.fail(ctx, errors.New("malformed response header"))
		}
		body = r.b
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, c.fail(ctx, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err))
	}
	return resp, nil
}

// fail closes the connection after an error, preferring the context's
// error when it caused the failure.
func (c *Client) fail(ctx context.Context, err error) error {
	c.conn.Close()
	c.conn = nil
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The socket's deadline is the context's, and may fire a moment before
	// the context says it is done.
	if _, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	return err
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}
