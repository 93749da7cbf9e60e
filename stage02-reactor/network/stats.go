package network

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Server's counters. Counters only grow; the
// fields marked "now" are gauges. Each counter is read atomically, but the
// snapshot as a whole is not taken at one instant.
type Stats struct {
	OpenConnections     int64  // now: connections accepted and not yet closed
	AcceptedConnections uint64 // connections accepted, including rejected ones
	RejectedConnections uint64 // closed at accept because of MaxConnections, or for want of a file descriptor

	RequestsRead     uint64 // complete frames read and handed on
	ResponsesSent    uint64 // responses written in full (Close with no Sends counts too)
	NoResponses      uint64 // requests answered with Response.NoResponse
	ResponsesDropped uint64 // requests whose response was never written: their connection closed first (counted at the close)
	InFlight         int64  // now: RequestsRead - ResponsesSent - NoResponses - ResponsesDropped
	QueueDepth       int    // now: requests waiting in the RequestChannel

	// BackPressure counts the times a request found the RequestChannel full
	// and its processor (or portable connection) had to wait.
	BackPressure uint64
	// MemoryWaits counts the times a frame being read had to wait for the
	// memory pool (queued.max.request.bytes) before its buffer could grow.
	MemoryWaits uint64
	// QueuedRequestBytes is now: the bytes reserved by frames being read
	// and by requests whose handler has not returned.
	QueuedRequestBytes int64
	// BuffersRecycled counts the frame buffers handed back to the free
	// list by Request.Recycle, to hold later requests.
	BuffersRecycled uint64

	BytesIn  uint64 // bytes read from sockets, size prefixes included
	BytesOut uint64 // bytes written to sockets

	ClosedByPeer     uint64 // the client closed (EOF or reset), including mid-frame
	ClosedBadSize    uint64 // negative size prefix or larger than SocketRequestMaxBytes
	ClosedIdle       uint64 // no bytes moved for ConnectionsMaxIdle
	ClosedByResponse uint64 // a Response with Close
	ClosedOnError    uint64 // another I/O error (a failed write, a file region that could not be read)
	ClosedAtShutdown uint64 // closed by Shutdown

	// ProcessorIdle is the time the Processors have spent waiting for
	// events, summed over them (a wait under way counts up to now); divided
	// by the elapsed time and Processors it is Kafka's
	// NetworkProcessorAvgIdlePercent (final's metrics read it). The
	// portable transport (and so a TLS listener) has no Processors: 0.
	ProcessorIdle time.Duration
	// Processors is how many reactor Processors ProcessorIdle sums:
	// num.network.threads per listener served by the reactor.
	Processors int
	// HandlerIdle is the same for the RequestHandlerPool's goroutines
	// waiting for a request: Kafka's RequestHandlerAvgIdlePercent once
	// divided by the elapsed time and num.io.threads. 0 before Start.
	HandlerIdle time.Duration
}

// idleClock adds up the time its owner spends waiting for work. A wait
// under way is counted up to the reader's now, so that a goroutine blocked
// for minutes reads as idle without having to wake up. Its owner calls
// begin and end; anyone calls read. The mutex is taken by its owner twice
// a wait and by a reader now and then: it costs the owner an uncontended
// lock, and makes successive reads never go back.
type idleClock struct {
	mu    sync.Mutex
	total time.Duration // finished waits. Protected by mu.
	since time.Time     // when the wait under way began; zero if none. Protected by mu.
}

func (c *idleClock) begin(now time.Time) {
	c.mu.Lock()
	c.since = now
	c.mu.Unlock()
}

func (c *idleClock) end(now time.Time) {
	c.mu.Lock()
	if !c.since.IsZero() {
		c.total += now.Sub(c.since)
		c.since = time.Time{}
	}
	c.mu.Unlock()
}

// read is the idle time so far.
func (c *idleClock) read(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.total
	if !c.since.IsZero() {
		t += max(now.Sub(c.since), 0)
	}
	return t
}

// counters are the Stats of one Processor, of the Acceptor, or of the
// portable server. Every field is atomic: it is written by its owner and
// read by Stats from any goroutine; responsesDropped is also written by
// handlers (Respond after a close).
type counters struct {
	accepted, rejected              atomic.Uint64
	requestsRead, responsesSent     atomic.Uint64
	noResponses, responsesDropped   atomic.Uint64
	backPressure, memoryWaits       atomic.Uint64
	bytesIn, bytesOut               atomic.Uint64
	closedByPeer, closedBadSize     atomic.Uint64
	closedIdle, closedByResponse    atomic.Uint64
	closedOnError, closedAtShutdown atomic.Uint64
	idle                            idleClock // a Processor's waits in poll (locked, not atomic)
	processor                       bool      // a Processor's counters: set before they are read
	_                               [64]byte  // keep two Processors' counters off one cache line
}

// closeReason says why a connection was closed; it picks the counter and
// the log level.
type closeReason int

const (
	closedByPeer closeReason = iota
	closedBadSize
	closedIdle
	closedByResponse
	closedOnError
	closedAtShutdown
)

func (r closeReason) String() string {
	return [...]string{"closed by peer", "bad size prefix", "idle", "closed by response", "I/O error", "shutdown"}[r]
}

// countClose adds one to the counter of reason.
func (c *counters) countClose(reason closeReason) {
	switch reason {
	case closedByPeer:
		c.closedByPeer.Add(1)
	case closedBadSize:
		c.closedBadSize.Add(1)
	case closedIdle:
		c.closedIdle.Add(1)
	case closedByResponse:
		c.closedByResponse.Add(1)
	case closedOnError:
		c.closedOnError.Add(1)
	case closedAtShutdown:
		c.closedAtShutdown.Add(1)
	}
}

// addTo adds c's counters to s.
func (c *counters) addTo(s *Stats) {
	s.AcceptedConnections += c.accepted.Load()
	s.RejectedConnections += c.rejected.Load()
	s.RequestsRead += c.requestsRead.Load()
	s.ResponsesSent += c.responsesSent.Load()
	s.NoResponses += c.noResponses.Load()
	s.ResponsesDropped += c.responsesDropped.Load()
	s.BackPressure += c.backPressure.Load()
	s.MemoryWaits += c.memoryWaits.Load()
	s.BytesIn += c.bytesIn.Load()
	s.BytesOut += c.bytesOut.Load()
	s.ClosedByPeer += c.closedByPeer.Load()
	s.ClosedBadSize += c.closedBadSize.Load()
	s.ClosedIdle += c.closedIdle.Load()
	s.ClosedByResponse += c.closedByResponse.Load()
	s.ClosedOnError += c.closedOnError.Load()
	s.ClosedAtShutdown += c.closedAtShutdown.Load()
	s.ProcessorIdle += c.idle.read(time.Now())
	if c.processor {
		s.Processors++
	}
}
