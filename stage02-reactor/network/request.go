package network

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A Request is one frame read from a connection: the bytes after the 4-byte
// size prefix. The network layer does not look inside it; parsing the request
// header (api_key, api_version, correlation_id, client_id) is the protocol
// layer's job.
type Request struct {
	// Body is the whole request, header and body, without the size prefix.
	// It is a fresh allocation owned by the handler.
	Body []byte

	// Received is when the processor finished reading the frame. Kafka's
	// request metrics (RequestQueueTimeMs, ...) start from this instant.
	Received time.Time

	// RemoteAddr and LocalAddr are the two ends of the connection. They are
	// shared by every request of the connection: do not modify them.
	RemoteAddr, LocalAddr net.Addr

	// ConnID names the connection the Kafka way,
	// "localHost:localPort-remoteHost:remotePort-index", unique per
	// connection for the life of the server.
	ConnID string

	// Conn is the connection's state slot, shared by every request of the
	// connection (see ConnState); nil for a Request built by hand.
	Conn *ConnState

	// Listener and SecurityProtocol are the name and the security protocol
	// of the listener the connection came in on (Listener.Name,
	// Listener.SecurityProtocol): a broker answers Metadata with the
	// addresses of that listener, and puts SASL in front of the requests
	// of a SASL listener.
	Listener, SecurityProtocol string

	// TLS is the connection's TLS state (the client's certificates, when
	// it showed some) on a TLS listener, shared by every request of the
	// connection; nil otherwise. Do not modify it.
	TLS *tls.ConnectionState

	// from is the connection the request was read from; Respond hands the
	// response to it (a reactor Processor's response queue, or the portable
	// server's connection goroutine). Set once before the request is queued.
	from responder

	// responded is set by the first Respond; later calls are errors.
	responded atomic.Bool

	// pool and reserved: the bytes the request holds in the server's
	// memory pool (queued.max.request.bytes), released, as in Kafka's
	// KafkaRequestHandler, when its handler returns (whatever the handler
	// still holds was parsed out of them), or when the request is dropped
	// before reaching a handler. Set before the request is queued.
	pool     *memoryPool
	reserved atomic.Int64

	// buf is the free-list buffer Body lives in (nil for a zero-size
	// frame, or from a transport that does not recycle); recycle holds
	// handlerDone and recycleAsked: the buffer goes back to its list once
	// both are set (Recycle).
	buf     *frameBuffer
	recycle atomic.Uint32

	// doneMu protects done and canceled. done is made by the first Done
	// call and closed by cancel; canceled records a cancel that came
	// before anyone asked for Done.
	doneMu   sync.Mutex
	done     chan struct{}
	canceled bool
}

// Done returns a channel that is closed when the request's connection
// closes before the request is answered: the client went away (the
// reactor sees the peer's close while the request waits, the portable
// server watches for it once Done is asked), the connection was idle past
// connections.max.idle.ms, or the server shut down. A handler that holds a
// request for a while (a long-poll Fetch, a produce waiting for its
// replicas) selects on it, stops waiting and lets go of what it holds; it
// need not Respond (an answer would be dropped). Done costs nothing for
// requests that never ask.
func (r *Request) Done() <-chan struct{} {
	r.doneMu.Lock()
	first := r.done == nil
	if first {
		r.done = make(chan struct{})
		if r.canceled {
			close(r.done)
		}
	}
	done, watch := r.done, first && !r.canceled && r.from != nil
	r.doneMu.Unlock()
	// Outside doneMu: watch takes the connection's lock, and the two never
	// nest (a closing connection cancels after it has released its own).
	if watch {
		r.from.watch(r)
	}
	return done
}

// cancel closes Done's channel: the request will not be answered.
func (r *Request) cancel() {
	r.doneMu.Lock()
	defer r.doneMu.Unlock()
	if r.canceled {
		return
	}
	r.canceled = true
	if r.done != nil {
		close(r.done)
	}
}

// release returns the request's bytes to the memory pool, once, when its
// handler returns (or it is dropped before reaching one); its buffer goes
// back to the free list too if Recycle was called.
func (r *Request) release() {
	if r.pool != nil {
		if n := r.reserved.Swap(0); n != 0 {
			r.pool.release(n, true)
		}
	}
	r.markRecycle(handlerDone)
}

const (
	handlerDone  = 1 << iota // release: the handler returned
	recycleAsked             // Recycle was called
)

// Recycle says that nothing reads Body, nor any slice of it, from now on
// (once the handler has returned): its buffer may then go back to the
// frame buffers' free list, to hold another request's bytes. A handler
// that parsed the request keeps slices of Body in what it parsed (kmsg
// aliases a batch's records, for instance), so it calls Recycle only when
// it is done with all of them; the Produce handler does, once its batches
// are appended and counted. Calling it is never required: a buffer not
// recycled is left to the garbage collector. Safe from any goroutine,
// before or after the handler returns; calls after the first do nothing.
func (r *Request) Recycle() { r.markRecycle(recycleAsked) }

// markRecycle sets bit and frees the buffer if that completes the pair.
func (r *Request) markRecycle(bit uint32) {
	old := r.recycle.Or(bit)
	if old&bit == 0 && old|bit == handlerDone|recycleAsked && r.buf != nil {
		r.buf.free()
		if r.pool != nil {
			r.pool.recycled.Add(1)
		}
	}
}

// responder is the way back from a handler to the connection a request came
// from.
type responder interface {
	// respond queues resp for the connection. It never blocks on I/O and is
	// safe from any goroutine; after the connection or the server closed, it
	// drops resp and counts it in Stats.ResponsesDropped.
	respond(r *Request, resp Response)
	// logDuplicate reports a second Respond for one request.
	logDuplicate(r *Request)
	// watch starts watching the connection for the peer's close while r
	// waits for its answer, for Done; a transport that always watches does
	// nothing.
	watch(r *Request)
}

// Respond hands the response back to the processor that read the request.
// Call it exactly once per request, from any goroutine, at any later time: a
// long-poll Fetch answers hundreds of milliseconds later from a timer
// goroutine (this is how a purgatory works in a later stage). Until Respond
// is called the connection stays muted and reads no further requests.
//
// Respond never blocks. After the connection closed or the server shut down
// it drops the response (counted in Stats.ResponsesDropped). A second call
// for the same request is a bug: it is logged and ignored.
//
// After Respond the network layer owns resp.Sends: do not modify their
// buffers, and keep their files open until the response is written (a
// closed file closes the connection).
func (r *Request) Respond(resp Response) {
	if !r.responded.CompareAndSwap(false, true) {
		if r.from != nil {
			r.from.logDuplicate(r)
		}
		return
	}
	if r.from == nil { // a Request built by hand, e.g. in a handler's unit test
		return
	}
	r.from.respond(r, resp)
}

// tryRespond is Respond without the duplicate report: the handler pool uses
// it to close the connection of a request whose handler panicked, which may
// or may not have responded already.
func (r *Request) tryRespond(resp Response) {
	if r.responded.CompareAndSwap(false, true) && r.from != nil {
		r.from.respond(r, resp)
	}
}

// A Response is what a handler hands back for one request.
type Response struct {
	// Sends are written in order, back to back. Usually the first one holds
	// the size prefix and the response header.
	Sends []Send

	// NoResponse means the request needs no answer (Produce with acks=0):
	// nothing is written and the connection is unmuted, so the processor
	// reads the next request.
	NoResponse bool

	// Close closes the connection, after writing Sends if there are any
	// (Kafka closes the connection when an acks=0 Produce fails, since it
	// cannot answer it).
	Close bool

	// Written, if set, is called once the response's last byte is on the
	// wire (at once for NoResponse), on the connection's goroutine: it
	// must be quick. It is not called for a response that is dropped.
	// The broker measures Kafka's TotalTimeMs to this instant (final's
	// metrics read it).
	Written func()
}

// Handler handles requests. The RequestHandlerPool calls Handle from its
// NumIOThreads goroutines, concurrently. Handle may return before responding
// and call r.Respond later from another goroutine.
type Handler interface {
	Handle(r *Request)
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(r *Request)

// Handle calls f(r).
func (f HandlerFunc) Handle(r *Request) { f(r) }

// ConnState is a slot a connection keeps for the layers above the network,
// one per connection, reached from each of its requests (Request.Conn).
// final's SASL gate keeps there whether the connection authenticated and
// as whom, as Kafka keeps it in the KafkaChannel's authenticator. A
// connection has one request in flight, so the requests of a connection
// never race on it; Load and Store are atomic so that the handler
// goroutines serving its successive requests see each other's Store.
type ConnState struct {
	v        atomic.Pointer[any]
	maxFrame atomic.Int32 // 0: socket.request.max.bytes alone
}

// SetMaxFrameBytes bounds the size prefix of the connection's next
// requests (0: only socket.request.max.bytes). A larger one closes the
// connection, as an oversized one always does. See
// Listener.InitialMaxFrameBytes.
func (s *ConnState) SetMaxFrameBytes(n int32) { s.maxFrame.Store(max(n, 0)) }

// frameLimit is the largest size prefix the connection accepts now.
func (s *ConnState) frameLimit(serverMax int32) int32 {
	if n := s.maxFrame.Load(); n > 0 && n < serverMax {
		return n
	}
	return serverMax
}

// Load returns what the last Store put in the slot, or nil.
func (s *ConnState) Load() any {
	if p := s.v.Load(); p != nil {
		return *p
	}
	return nil
}

// Store puts v in the slot.
func (s *ConnState) Store(v any) { s.v.Store(&v) }
