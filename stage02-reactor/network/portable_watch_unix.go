//go:build unix

package network

import (
	"time"

	"golang.org/x/sys/unix"
)

// watch implements responder for the portable server: a handler asked for
// r.Done, so the request will wait, and the connection goroutine, blocked
// on the response, reads nothing. A watcher goroutine waits for the socket
// to become readable and peeks at it without taking the byte: end of file
// or a reset means the peer is gone, and the connection goroutine closes
// the connection (cancelling r). Bytes mean the client pipelined another
// request: it is alive, and the watcher stops. stopWatching ends a watcher
// still waiting once the response comes, so that only one goroutine ever
// reads the socket.
func (c *portableConn) watch(r *Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.inflight != r || c.watchDone != nil {
		return // answered already, or watched
	}
	rc, err := c.nc.SyscallConn()
	if err != nil {
		return
	}
	done := make(chan struct{})
	c.watchDone = done
	go func() {
		defer close(done)
		gone := false
		var b [1]byte
		// Read waits in the Go netpoller until the socket is readable,
		// or until stopWatching moves the read deadline to the past.
		rc.Read(func(fd uintptr) bool {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err == unix.EAGAIN || err == unix.EINTR {
				return false // not readable yet: wait
			}
			gone = err != nil || n == 0
			return true
		})
		if gone {
			c.peerGoneOnce.Do(func() { close(c.peerGone) })
		}
	}()
}

// stopWatching ends the watcher, if one runs, and waits for it. The read
// deadline it moves is set again by armRead before the next read.
func (c *portableConn) stopWatching() {
	c.mu.Lock()
	done := c.watchDone
	c.watchDone = nil
	c.mu.Unlock()
	if done == nil {
		return
	}
	c.nc.SetReadDeadline(time.Unix(1, 0))
	<-done
}
