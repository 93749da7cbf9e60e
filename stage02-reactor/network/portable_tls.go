package network

import (
	"crypto/tls"
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// handshake does the server side of the TLS handshake of a connection
// accepted on a TLS listener, on the connection's own goroutine (a slow or
// silent client holds up nobody else), within the listener's
// TLSHandshakeTimeout. From then on the connection's requests are read and
// its responses written through the tls.Conn: the bytes of a file region
// too, read into memory and encrypted, since sendfile(2) cannot encrypt.
//
// A client that speaks plaintext to a TLS port fails here (its first bytes
// are not a TLS record) and is closed; so is one that shows no certificate
// when the tls.Config requires one (ClientAuth). Nothing reaches the
// RequestChannel before the handshake succeeds.
func (c *portableConn) handshake() (closeReason, error) {
	l := c.t.l
	tc := tls.Server(c.nc, l.TLS)
	// Under mu, like armRead: drain either sees this deadline and
	// overwrites it, or we see draining.
	c.mu.Lock()
	if c.t.draining.Load() {
		c.mu.Unlock()
		return closedAtShutdown, nil
	}
	c.nc.SetDeadline(time.Now().Add(l.TLSHandshakeTimeout))
	c.mu.Unlock()
	if err := tc.Handshake(); err != nil {
		switch {
		case c.t.draining.Load():
			return closedAtShutdown, nil
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			return closedByPeer, err
		case errors.Is(err, os.ErrDeadlineExceeded):
			return closedOnError, errors.New("TLS handshake timed out")
		}
		return closedOnError, err // not TLS, no certificate, a bad one: logged at Warn
	}
	// write sets a write deadline only when connections.max.idle.ms is
	// positive: clear the handshake's. armRead sets the read deadline.
	c.nc.SetWriteDeadline(time.Time{})
	st := tc.ConnectionState()
	c.conn, c.tlsState = tc, &st
	return 0, nil
}
