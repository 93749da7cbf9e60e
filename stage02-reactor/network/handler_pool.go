package network

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// RequestHandlerPool is the third layer of §3.1: num.io.threads goroutines
// (Kafka: KafkaRequestHandler threads, 8 by default) that take requests from
// the RequestChannel and call the Handler. The handler answers through
// Request.Respond, which routes the response back to the request's
// Processor; the pool itself never touches a socket.
type RequestHandlerPool struct {
	channel *RequestChannel // where requests come from
	handler Handler         // called for every request
	logger  *slog.Logger    // for handler panics
	wg      sync.WaitGroup  // counts the running handler goroutines
	done    chan struct{}   // closed when every handler goroutine has returned
	idle    []idleClock     // each goroutine's waits for a request, for Stats.HandlerIdle
}

// NewRequestHandlerPool starts n goroutines that handle the requests of
// channel until it is closed.
func NewRequestHandlerPool(n int, channel *RequestChannel, h Handler, logger *slog.Logger) *RequestHandlerPool {
	p := &RequestHandlerPool{channel: channel, handler: h, logger: logger, done: make(chan struct{}), idle: make([]idleClock, n)}
	p.wg.Add(n)
	for i := 0; i < n; i++ {
		go p.run(i)
	}
	go func() { p.wg.Wait(); close(p.done) }()
	return p
}

// run is one KafkaRequestHandler: take, handle, repeat.
func (p *RequestHandlerPool) run(id int) {
	defer p.wg.Done()
	for {
		p.idle[id].begin(time.Now())
		r, ok := p.channel.Receive()
		p.idle[id].end(time.Now())
		if !ok {
			return
		}
		p.handle(id, r)
	}
}

// handle calls the Handler. Like KafkaRequestHandler, it survives a
// handler's failure: a panic is logged and the request's connection closed,
// since its client would otherwise wait for an answer forever.
func (p *RequestHandlerPool) handle(id int, r *Request) {
	// The request's bytes go back to the memory pool when its handler
	// returns, as Kafka's handler releases its buffer: a handler that
	// holds the request longer (a long poll) holds only what it parsed.
	defer r.release()
	defer func() {
		if v := recover(); v != nil {
			p.logger.Error("request handler panicked; closing the connection",
				"handler", id, "conn", r.ConnID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			r.tryRespond(Response{Close: true})
		}
	}()
	p.handler.Handle(r)
}

// Idle is the time the handler goroutines have spent waiting for a
// request, summed over them.
func (p *RequestHandlerPool) Idle() time.Duration {
	var d time.Duration
	now := time.Now()
	for i := range p.idle {
		d += p.idle[i].read(now)
	}
	return d
}

// Done is closed when every handler goroutine has returned, which happens
// after the RequestChannel is closed and drained.
func (p *RequestHandlerPool) Done() <-chan struct{} { return p.done }
