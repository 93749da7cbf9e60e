package kafkazk

import (
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

// BoundedDialer dials like go-zookeeper's default dialer, but its
// connections never wait for a reply longer than max. Connect sets max to
// go-zookeeper's own read timeout (2/3 of the session timeout).
//
// The bound is for the session handshake: go-zookeeper waits ten read
// timeouts for the server's answer (two minutes with Kafka's 18 s
// sessions), while Kafka's Java client gives a server the session timeout
// divided by the number of servers. A paused server accepts TCP
// connections (the kernel does) and never answers, so an unbounded client
// that picks it hangs there while its session expires, instead of trying
// the next server. zktest found this; brokers and tests both dial with it.
func BoundedDialer(max time.Duration) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &boundedConn{Conn: conn, max: max}, nil
	}
}

// boundedConn is a connection whose deadlines are at most max away.
type boundedConn struct {
	net.Conn
	max time.Duration // the longest wait for a read or a write
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.bound(t))
}

func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound(t))
}

// bound brings a deadline in to max from now; no deadline stays none
// (go-zookeeper clears its deadlines between operations).
func (c *boundedConn) bound(t time.Time) time.Time {
	if limit := time.Now().Add(c.max); !t.IsZero() && t.After(limit) {
		return limit
	}
	return t
}
