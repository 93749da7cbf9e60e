//go:build linux

package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// build 02.C: a connection: read size-prefixed frames, write responses across partial writes, mute and unmute
// tests: TestLargeResponsesSurvivePartialWrites, TestBadFramesCloseOnlyTheirConnection, TestFrameOfMaxSizeIsAccepted, TestBytesReadAheadOfAMutedConnectionKeepTheirOrder, TestPipelinedRequestsAreAnsweredInOrder

// conn is one connection of the reactor (Kafka: a KafkaChannel with its
// NetworkReceive and Send). Every field but fd, proc, id and the addresses
// belongs to the owning Processor's goroutine and is touched by nothing
// else; handlers reach a conn only through Respond, which goes through the
// Processor's locked response queue.
//
// A conn is kept small because an idle connection costs exactly this
// struct (plus its map entry, its ConnID and its address): no goroutine, no
// stack, no read buffer. Buffers exist only while a frame is being read or
// a response written.
type conn struct {
	fd     int        // the socket, non-blocking; immutable
	proc   *Processor // the Processor that owns it; immutable
	id     string     // ConnID; immutable
	remote net.Addr   // immutable
	local  net.Addr   // immutable, shared with other connections of the listener
	state  ConnState  // Request.Conn of its requests

	// Read side: a frame is a 4-byte size, then size bytes.

	// sizeBuf collects the size prefix; sizeN bytes of it are filled.
	sizeBuf [4]byte
	sizeN   uint8
	// inFrame is set once the size is known: frameSize is that size.
	inFrame   bool
	frameSize int
	// body is the frame being read: len(body) bytes so far. It grows as
	// bytes arrive (doubling, never past frameSize), so a client that
	// announces 100 MiB and sends 1 MiB costs 1 MiB. Its capacity is
	// reserved in the server's memory pool (queued.max.request.bytes). It
	// becomes the Request's Body. bodyBuf is the free-list buffer it lives
	// in (frame_buffers.go); nil until the body's first bytes come.
	body    []byte
	bodyBuf *frameBuffer
	// memWait is set while the frame needs a bigger buffer and the memory
	// pool said no: the connection waits in Processor.memParked, unread.
	// growWant is how much it wanted.
	memWait  bool
	growWant int
	// ahead holds bytes read past a complete frame (a client pipelining
	// requests) while the connection is muted or waits for memory; they
	// are parsed before the socket is read again. aheadBuf is the
	// free-list buffer they were copied into (keepAhead), if any: it goes
	// back once they are all parsed.
	ahead    []byte
	aheadBuf *frameBuffer
	// inflight is the request read and not yet answered, to cancel if the
	// connection closes first (Request.Done).
	inflight *Request

	// Mute state (Kafka: KafkaChannel's ChannelMuteState).

	// muted is set from the moment a request is complete until its
	// response is written (or NoResponse arrives): a muted connection is
	// not read, so it has one request in flight and answers in order.
	muted bool
	// awaiting is set while the request is with the handlers (queued,
	// parked in Processor.pending, or being handled): the response has
	// not arrived yet. Such a connection is never idle.
	awaiting bool
	// parked is set while the connection is in Processor.parked: it wants
	// to read but the RequestChannel is full.
	parked bool
	// interest is the epoll interest set registered for fd. EPOLLIN is
	// dropped lazily: only when epoll reports data the Processor does not
	// want to read yet, which spares two epoll_ctl calls per request for
	// clients that wait for each answer.
	interest uint32

	// Write side: the response being written.

	// sends is the response; nil when none is being written.
	sends []Send
	// sendIdx is the Send being written, sendOff the bytes of it written.
	sendIdx int
	sendOff int64
	// closeAfterWrite is Response.Close: close once sends are written.
	closeAfterWrite bool
	// written is Response.Written, called when sends are written.
	written func()

	// closed is set by Processor.closeConn; a closed conn is out of every
	// Processor structure except, possibly, pending and parked, which
	// skip it.
	closed bool

	// Idle tracking: the Processor's connections form a list ordered by
	// lastActive (nanoseconds since the Processor's epoch), oldest first.
	lastActive int64
	prev, next *conn
}

// respond implements responder: the response goes to the Processor's
// response queue.
func (c *conn) respond(r *Request, resp Response) { c.proc.queueResponse(c, resp) }

// watch implements responder: the reactor always hears the peer's close
// (EPOLLRDHUP), so there is nothing to start.
func (c *conn) watch(*Request) {}

func (c *conn) logDuplicate(r *Request) {
	c.proc.logger.Error("Respond called twice for one request; ignoring the second", "conn", r.ConnID)
}

// read reads once from c's socket and parses what arrived. One read per
// readiness event keeps the Processor fair across connections; epoll is
// level-triggered, so whatever is left is reported again in the next round.
func (p *Processor) read(c *conn) {
	if c.aheadBuf != nil && len(c.ahead) == 0 {
		// Every byte read ahead was parsed (into frames of their own
		// buffers) before the socket is read again.
		c.aheadBuf.free()
		c.aheadBuf = nil
	}
	// Mid-frame, read straight into the frame; otherwise into the
	// Processor's shared scratch buffer, so that an idle connection owns
	// no buffer at all.
	direct := c.inFrame
	buf := p.scratch
	if direct {
		if !p.growBody(c, 0) {
			p.stopReading(c, 0) // waiting for memory
			return
		}
		buf = c.body[len(c.body):cap(c.body)]
	}
	n, err := readFD(c.fd, buf)
	switch {
	case err == unix.EAGAIN:
		return // a spurious wake-up
	case err != nil:
		p.closeConn(c, classifyIOError(err), fmt.Errorf("read: %w", err))
		return
	case n == 0:
		var cut error
		if c.inFrame || c.sizeN > 0 {
			cut = errors.New("connection closed in the middle of a frame")
		}
		p.closeConn(c, closedByPeer, cut)
		return
	}
	p.stats.bytesIn.Add(uint64(n))
	p.touch(c)
	if direct {
		c.body = c.body[:len(c.body)+n]
		if len(c.body) == c.frameSize {
			p.completeFrame(c)
		}
		return
	}
	p.consume(c, p.scratch[:n], false)
}

// aheadPooled is the least read-ahead that keepAhead copies into a buffer
// of the free list: a 64 KiB buffer for a few bytes would make every
// pipelining connection hold one.
const aheadPooled = 16 << 10

// keepAhead copies data, bytes read from the scratch buffer past a complete
// frame, for a connection that may not parse them yet. They are at most
// one read's worth (64 KiB), and would be copied once anyway (into their
// own frames' buffers) when the connection resumes; a copy of 16 KiB or
// more goes into a free-list buffer, so that a pipelining client makes no
// garbage. (Kafka reads the size prefix, then exactly the frame: never
// ahead, at the cost of a read(2) per frame, 1.2 µs on this machine's
// virtual CPUs.)
func (p *Processor) keepAhead(c *conn, data []byte) []byte {
	if len(data) < aheadPooled {
		return append([]byte(nil), data...)
	}
	fb := newFrameBuffer(len(data))
	c.aheadBuf = fb // read() freed any earlier one
	return fb.b[:copy(fb.b, data)]
}

// growBody makes room in a full frame buffer (nextFrameCap), reserving the
// growth from the memory pool first. If the pool says no, the connection
// waits in memParked, unread, and growBody returns false; retryMemory
// grows the buffer and resumes it when bytes are released.
//
// Invariant: memParked is empty, or memWaiting is set (the pool will wake
// the Processor at its next release).
func (p *Processor) growBody(c *conn, want int) bool {
	if cap(c.body) > len(c.body) {
		return true
	}
	if len(p.memParked) == 0 { // waiting connections go first
		if p.tryGrow(c, want) {
			return true
		}
		if !p.memWaiting {
			// Register, then try once more: a release in between would
			// otherwise be missed (see wakeList).
			p.memWaiting = true
			p.memory.notifyWhenFree(p.memoryFreed)
			if p.tryGrow(c, want) {
				return true
			}
		}
	}
	p.stats.memoryWaits.Add(1)
	c.memWait, c.growWant = true, want
	p.memParked = append(p.memParked, c)
	return false
}

// tryGrow grows c's frame buffer if the memory pool grants the growth.
func (p *Processor) tryGrow(c *conn, want int) bool {
	newCap := nextFrameCap(c.body, c.frameSize, want)
	if !p.memory.tryGrow(int64(newCap - cap(c.body))) {
		return false
	}
	c.body, c.bodyBuf = growFrameTo(c.body, c.bodyBuf, newCap)
	return true
}

// retryMemory grows the buffers of the connections waiting for memory,
// oldest first, while the pool allows, and resumes them.
func (p *Processor) retryMemory() {
	for len(p.memParked) > 0 {
		c := p.memParked[0]
		if !c.closed {
			if !p.tryGrow(c, c.growWant) {
				if !p.memWaiting {
					p.memWaiting = true
					p.memory.notifyWhenFree(p.memoryFreed)
					continue // and try once more
				}
				return
			}
			c.memWait = false
		}
		p.memParked[0] = nil
		p.memParked = p.memParked[1:]
		if !c.closed {
			p.resume(c)
		}
	}
	p.memParked = nil
}

// consume parses data: size prefixes, frame bodies, complete frames. owned
// says whether data may be kept as it is (it is c.ahead) or must be copied
// (it is the scratch buffer).
func (p *Processor) consume(c *conn, data []byte, owned bool) {
	// exercise 02.1: cut a connection's bytes into frames, keeping what a muted connection may not read yet
	// hint: a frame is a 4-byte size then that many bytes, and either may arrive in pieces; once a frame mutes the connection, what is left is kept for later, not parsed
	// tests: TestPipelinedRequestsAreAnsweredInOrder, TestBadFramesCloseOnlyTheirConnection, TestZeroSizeFrameIsARequest, TestBackPressureLosesNothing
	for len(data) > 0 {
		if !p.wantsRead(c) {
			// Muted by the frame just completed (a pipelining client),
			// or waiting for memory: keep the rest for later.
			if !owned {
				data = p.keepAhead(c, data)
			}
			c.ahead = data
			if !c.muted && !c.memWait {
				p.park(c)
			}
			return
		}
		if !c.inFrame {
			k := copy(c.sizeBuf[c.sizeN:], data)
			c.sizeN += uint8(k)
			data = data[k:]
			if c.sizeN < 4 {
				return
			}
			c.sizeN = 0
			size := int32(binary.BigEndian.Uint32(c.sizeBuf[:]))
			if err := checkSize(size, c.state.frameLimit(p.maxRequestBytes)); err != nil {
				p.closeConn(c, closedBadSize, err)
				return
			}
			c.inFrame, c.frameSize = true, int(size)
			if size == 0 {
				p.completeFrame(c)
				continue
			}
			if len(data) == 0 {
				return // a buffer is reserved when the body's first bytes come
			}
		}
		if !p.growBody(c, len(data)) {
			continue // waiting for memory: the loop keeps the rest
		}
		k := min(c.frameSize-len(c.body), cap(c.body)-len(c.body), len(data))
		c.body = append(c.body, data[:k]...)
		data = data[k:]
		if len(c.body) == c.frameSize {
			p.completeFrame(c)
		}
	}
	// end exercise
}

// completeFrame turns the frame just read into a Request, mutes the
// connection (Kafka mutes a channel after every complete receive) and hands
// the request on.
func (p *Processor) completeFrame(c *conn) {
	r := &Request{
		Body:       c.body,
		Received:   p.now,
		RemoteAddr: c.remote,
		LocalAddr:  c.local,
		ConnID:     c.id,
		from:       c,

		Listener:         p.listener.Name,
		SecurityProtocol: p.listener.SecurityProtocol,
		pool:             p.memory,
		buf:              c.bodyBuf,
	}
	r.reserved.Store(int64(cap(c.body)))
	r.Conn = &c.state
	p.memory.completed(int64(cap(c.body)))
	if r.Body == nil {
		r.Body = []byte{} // a zero-size frame
	}
	c.body, c.bodyBuf, c.inFrame, c.frameSize = nil, nil, false, 0
	c.inflight = r
	c.muted, c.awaiting = true, true
	p.awaiting++
	p.stats.requestsRead.Add(1)
	p.dispatch(c, r)
}

// startResponse begins writing a response that came through the response
// queue.
func (p *Processor) startResponse(c *conn, resp Response) {
	if c.closed {
		return // closeConn counted the drop
	}
	c.awaiting, c.inflight = false, nil
	p.awaiting--
	p.touch(c)
	if resp.NoResponse {
		p.stats.noResponses.Add(1)
		if resp.Written != nil {
			resp.Written()
		}
		if resp.Close {
			p.closeConn(c, closedByResponse, nil)
			return
		}
		p.unmute(c)
		return
	}
	c.sends, c.sendIdx, c.sendOff = resp.Sends, 0, 0
	c.closeAfterWrite, c.written = resp.Close, resp.Written
	p.write(c)
}

// write writes as much of c's response as the socket takes; the Processor
// calls it again when epoll reports the socket writable. When the whole
// response is written the connection is unmuted.
func (p *Processor) write(c *conn) {
	// exercise 02.2: write a response across partial writes, then unmute
	// hint: write what the socket takes and remember where you stopped; when it takes less, ask epoll to say when there is room; the request ends only when its last byte is out
	// tests: TestLargeResponsesSurvivePartialWrites, TestClientThatNeverReadsDoesNotSlowOthers, TestFileRegionResponses, TestCloseResponseClosesTheConnection, TestWrittenRunsOnceTheResponseIsWritten
	for c.sendIdx < len(c.sends) {
		s := &c.sends[c.sendIdx]
		size := s.size()
		if c.sendOff >= size { // an empty Send
			c.sendIdx, c.sendOff = c.sendIdx+1, 0
			continue
		}
		var n int64
		var err error
		if s.File != nil {
			n, err = p.regionSender.SendRegion(c.fd, s.File, s.Pos+c.sendOff, size-c.sendOff)
		} else {
			n, err = writeFD(c.fd, s.Bytes[c.sendOff:])
		}
		if n > 0 {
			c.sendOff += n
			p.stats.bytesOut.Add(uint64(n))
			p.touch(c)
		}
		if err != nil {
			p.closeConn(c, classifyIOError(err), err)
			return
		}
		if c.sendOff < size {
			// The send buffer is full: wait for EPOLLOUT.
			p.setInterest(c, c.interest|epollOut)
			return
		}
		c.sendIdx, c.sendOff = c.sendIdx+1, 0
	}

	// The whole response is on the wire.
	c.sends = nil
	p.stats.responsesSent.Add(1)
	if w := c.written; w != nil {
		c.written = nil
		w()
	}
	if c.closeAfterWrite {
		p.closeConn(c, closedByResponse, nil)
		return
	}
	if c.interest&epollOut != 0 {
		if p.setInterest(c, c.interest&^epollOut); c.closed {
			return
		}
	}
	p.unmute(c)
	// end exercise
}

// unmute ends the connection's request: it may read the next one.
func (p *Processor) unmute(c *conn) {
	c.muted = false
	p.resume(c)
}

// resume lets a connection read again, after its response (unmute), after
// the RequestChannel made room (parked connections) or after the memory
// pool granted its frame's buffer (retryMemory). Frames already
// buffered in c.ahead go first; only when they are used up does the socket
// get read again.
func (p *Processor) resume(c *conn) {
	// exercise 02.3: let a connection read again, bytes it already sent first
	// hint: bytes the client already sent go before anything new from the socket, and every reason for the connection to stay quiet comes before both
	// tests: TestPipelinedRequestsAreAnsweredInOrder, TestNoResponseUnmutesTheConnection, TestBackPressureLosesNothing, TestRequestsPipelinedBeforeAHalfCloseAreAllHandled, TestShutdownLetsInFlightRequestsFinish
	switch {
	case c.closed:
		return
	case p.draining:
		p.closeConn(c, closedAtShutdown, nil)
		return
	case len(p.pending) > 0:
		p.park(c)
		return
	case c.memWait:
		return // retryMemory resumes it
	}
	if len(c.ahead) > 0 {
		data := c.ahead
		c.ahead = nil
		if p.consume(c, data, true); c.closed || c.muted || c.parked || c.memWait {
			return
		}
	}
	p.setInterest(c, c.interest|epollRead)
	// end exercise
}

// wantsRead reports whether c may read: not muted, not waiting for memory,
// and the Processor is neither waiting for room in the RequestChannel nor
// draining.
func (p *Processor) wantsRead(c *conn) bool {
	return !c.muted && !c.memWait && len(p.pending) == 0 && !p.draining
}

// stopReading drops EPOLLIN from c's interest set because epoll reported
// (events) data that c may not read now; without that, level-triggered
// epoll would report it in every round. A muted connection keeps
// EPOLLRDHUP until epoll has reported it: the peer's close is what ends a
// long poll nobody waits for, and tcp_poll, which takes no lock, can report
// a FIN's byte as data (EPOLLIN) an instant before it reports the shutdown
// (EPOLLRDHUP) — dropping both then would never hear the close. Once
// EPOLLRDHUP has been reported and the connection is still not closed (it
// pipelined requests, which are served first), it is dropped too, or
// level-triggered epoll would report it in every round. A connection held
// back only by back-pressure is parked, to be resumed when the
// RequestChannel has room.
func (p *Processor) stopReading(c *conn, events uint32) {
	keep := uint32(0)
	if c.muted && events&unix.EPOLLRDHUP == 0 {
		keep = unix.EPOLLRDHUP
	}
	if p.setInterest(c, c.interest&^epollRead|keep); c.closed {
		return
	}
	if !c.muted && !c.memWait && !p.draining {
		p.park(c)
	}
}

// setInterest registers a new interest set for c if it changed. On failure
// it closes c; callers that go on must check c.closed.
func (p *Processor) setInterest(c *conn, events uint32) {
	if events == c.interest {
		return
	}
	if err := p.poller.modify(c.fd, events); err != nil {
		p.closeConn(c, closedOnError, err)
		return
	}
	c.interest = events
}

// readFD is read(2) with EINTR retried.
func readFD(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// writeFD is write(2) with EINTR retried; a full socket (EAGAIN) is
// reported as 0 bytes written and no error.
func writeFD(fd int, b []byte) (int64, error) {
	for {
		n, err := unix.Write(fd, b)
		switch err {
		case nil:
			return int64(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		default:
			return 0, fmt.Errorf("write: %w", err)
		}
	}
}

// classifyIOError tells a client going away from a real failure.
func classifyIOError(err error) closeReason {
	if errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ETIMEDOUT) {
		return closedByPeer
	}
	return closedOnError
}

// end build
