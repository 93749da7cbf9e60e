package broker

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// API is one Kafka API the broker serves: its key, the versions it
// implements (ApiVersions advertises exactly these) and its handler.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	// AdvertiseV0 makes ApiVersions advertise v0 as the minimum although
	// v0..MinVersion-1 are refused (the connection closes, as for any
	// version not served). Only Produce does this: see ProduceAPI.
	AdvertiseV0 bool
	// Handle serves one request. It runs on a RequestHandlerPool goroutine
	// and must answer exactly once, now or later (a long-poll fetch answers
	// from a timer): with Respond, RespondSends or NoResponse.
	Handle func(r *Request)
}

// Request is a parsed request and the means to answer it.
type Request struct {
	Header protocol.Header
	Body   kmsg.Request // at Header.APIVersion
	Broker *Broker
	net    *network.Request

	// For ObserveRequests: when a handler took the request, when its
	// handler returned (Unix ns, atomic: the answer may come first, from
	// another goroutine), and when it was answered. Unset without an
	// observer.
	dequeued  time.Time
	returned  atomic.Int64
	responded time.Time
}

// RemoteAddr is the client's end of the connection (a group member's
// client host, stage 05).
func (r *Request) RemoteAddr() net.Addr { return r.net.RemoteAddr }

// Received is when the network layer finished reading the request.
func (r *Request) Received() time.Time { return r.net.Received }

// Done is closed when the request's connection closed before the request
// was answered (network.Request.Done): a handler that holds the request
// stops waiting and need not answer.
func (r *Request) Done() <-chan struct{} { return r.net.Done() }

// Respond encodes resp at the request's version and hands it to the
// network layer.
func (r *Request) Respond(resp kmsg.Response) {
	resp.SetVersion(r.Header.APIVersion)
	r.respond(network.Response{Sends: []network.Send{network.BytesSend(protocol.AppendResponse(nil, r.Header, resp))}})
}

// RespondSends answers with an already framed response (a fetch whose
// records are file regions).
func (r *Request) RespondSends(sends []network.Send) {
	r.respond(network.Response{Sends: sends})
}

// NoResponse answers nothing and lets the connection read its next request
// (Produce with acks=0).
func (r *Request) NoResponse() { r.respond(network.Response{NoResponse: true}) }

// CloseConnection answers by closing the connection, as Kafka does for an
// acks=0 produce that failed: the client has no other way to learn it.
func (r *Request) CloseConnection() { r.respond(network.Response{Close: true}) }

// recycle gives the request's bytes back to the network layer's free list
// (network.Request.Recycle): nothing reads them any more.
func (r *Request) recycle() {
	if r.net != nil {
		r.net.Recycle()
	}
}

// respond hands resp to the network layer, timing the request if the broker
// has an observer.
func (r *Request) respond(resp network.Response) {
	if r.Broker != nil && r.Broker.observer != nil && !r.dequeued.IsZero() {
		r.responded = time.Now()
		resp.Written = r.written
	}
	r.net.Respond(resp)
}

// RequestTiming is the life of one request through the broker, for Kafka's
// RequestMetrics (final's metrics read it; see ObserveRequests). Kafka
// splits a request's TotalTimeMs into RequestQueueTimeMs (Received to
// Dequeued), LocalTimeMs (Dequeued to LocalDone), RemoteTimeMs (LocalDone
// to Responded: a produce or fetch waiting in a purgatory) and the response
// queue and send times (Responded to Sent), which are one span here.
type RequestTiming struct {
	Header protocol.Header
	Body   kmsg.Request // the parsed request: a Fetch's replica id tells a follower from a consumer
	// Received: the network layer read the request's last byte.
	Received time.Time
	// Dequeued: a RequestHandlerPool goroutine took it.
	Dequeued time.Time
	// LocalDone: the handler returned, or answered before it returned.
	LocalDone time.Time
	// Responded: the answer was handed to the network layer.
	Responded time.Time
	// Sent: the answer's last byte was written (for NoResponse: it was
	// handed over).
	Sent time.Time
}

// written runs on the connection's goroutine once the answer is written.
func (r *Request) written() {
	t := RequestTiming{Header: r.Header, Body: r.Body, Received: r.net.Received, Dequeued: r.dequeued,
		LocalDone: r.responded, Responded: r.responded, Sent: time.Now()}
	if ns := r.returned.Load(); ns != 0 && ns < r.responded.UnixNano() {
		t.LocalDone = time.Unix(0, ns) // the handler returned and the answer came later
	}
	r.Broker.observer(&t)
}

// ObserveRequests makes the broker call f with the timing of every request
// it answers (one it cannot parse is not timed), once the answer is
// written, on the connection's goroutine: f must be quick and must not keep
// t. Call it before Start; one observer at a time.
func (b *Broker) ObserveRequests(f func(t *RequestTiming)) { b.observer = f }

// Register adds or replaces an API. Later stages build their broker from
// this one by registering this package's handlers over their own seams
// (ProduceAPI, FetchAPI, ListOffsetsAPI), replacing others (Metadata) and
// adding their own. Call it before Start.
func (b *Broker) Register(api API) { b.apis[api.Key] = api }

// Unregister removes an API; ApiVersions stops advertising it.
func (b *Broker) Unregister(key int16) { delete(b.apis, key) }

// APIs lists the registered APIs by key.
func (b *Broker) APIs() []API {
	out := make([]API, 0, len(b.apis))
	for k := int16(0); len(out) < len(b.apis); k++ {
		if api, ok := b.apis[k]; ok {
			out = append(out, api)
		}
	}
	return out
}

// versions reports a key's registered versions, for the protocol parser.
func (b *Broker) versions(key int16) (int16, int16, bool) {
	api, ok := b.apis[key]
	return api.MinVersion, api.MaxVersion, ok
}

// Handle is the network layer's handler: it parses a request and
// dispatches it by API key.
func (b *Broker) Handle(nr *network.Request) {
	h, req, err := protocol.ParseRequest(nr.Body, b.versions)
	switch {
	case err == nil:
		r := &Request{Header: h, Body: req, Broker: b, net: nr}
		if b.observer == nil {
			b.apis[h.APIKey].Handle(r)
			return
		}
		r.dequeued = time.Now()
		b.apis[h.APIKey].Handle(r)
		r.returned.Store(time.Now().UnixNano())
	case errors.Is(err, protocol.ErrUnsupportedVersion) && h.APIKey == protocol.ApiVersionsKey:
		// A client newer than the broker: answer in v0, which every
		// client reads, with the error and what the broker does support
		// (KIP-511). The client retries with a version from the list.
		b.logger.Debug("unsupported ApiVersions version", "version", h.APIVersion, "conn", nr.ConnID)
		resp := b.apiVersionsResponse()
		resp.ErrorCode = kerrUnsupportedVersion
		h.APIVersion, h.Flexible = 0, false
		(&Request{Header: h, Broker: b, net: nr}).Respond(resp)
	default:
		// Kafka closes the connection on any other request it cannot read:
		// it cannot know how the client would parse an answer.
		b.logger.Info("closing connection after a request it cannot serve", "conn", nr.ConnID,
			"remote", nr.RemoteAddr, "api_key", h.APIKey, "api_version", h.APIVersion, "err", err)
		nr.Respond(network.Response{Close: true})
	}
}
