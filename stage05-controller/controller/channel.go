package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// channels is Kafka's ControllerChannelManager: one queue and one
// connection per live broker, each drained by its own goroutine, so a slow
// or dead broker delays only its own requests. A request that fails is
// sent again on a new connection until it is answered or the broker is
// removed (the controller learns from ZooKeeper that it died): what the
// controller decided must reach every live broker, in the order decided.
type channels struct {
	clientID string
	active   func() bool // false: the controller stopped acting; nothing more is sent
	logger   *slog.Logger

	mu      sync.Mutex
	brokers map[int32]*brokerChannel // Protected by mu.
}

// brokerChannel is one broker's queue.
type brokerChannel struct {
	id     int32
	addr   string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	queue []queued // the head is removed once answered. Protected by mu.
	wake  chan struct{}
}

// queued is a request and what to do with its answer (nil: nothing).
type queued struct {
	req      kmsg.Request
	callback func(kmsg.Response)
}

func newChannels(controllerID int32, active func() bool, logger *slog.Logger) *channels {
	return &channels{clientID: fmt.Sprintf("controller-%d", controllerID), active: active, logger: logger,
		brokers: map[int32]*brokerChannel{}}
}

// add starts a broker's queue, at addr. A broker already there at another
// address (it restarted elsewhere) is replaced.
func (cs *channels) add(id int32, addr string) {
	cs.mu.Lock()
	old := cs.brokers[id]
	if old != nil && old.addr == addr {
		cs.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &brokerChannel{id: id, addr: addr, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	cs.brokers[id] = b
	cs.mu.Unlock()
	if old != nil {
		old.stop() // outside mu: it waits for the old sender to end
	}
	go b.run(cs.clientID, cs.active, cs.logger.With("to_broker", id))
}

// remove stops a broker's queue; what was queued is dropped.
func (cs *channels) remove(id int32) {
	cs.mu.Lock()
	b := cs.brokers[id]
	delete(cs.brokers, id)
	cs.mu.Unlock()
	if b != nil {
		b.stop()
	}
}

// closeAll stops every queue (the controller resigned).
func (cs *channels) closeAll() {
	cs.mu.Lock()
	bs := cs.brokers
	cs.brokers = map[int32]*brokerChannel{}
	cs.mu.Unlock()
	for _, b := range bs {
		b.stop()
	}
}

// send queues req for broker id; callback, if not nil, runs on the
// broker's goroutine with the answer. A broker without a queue (not live)
// gets nothing.
func (cs *channels) send(id int32, req kmsg.Request, callback func(kmsg.Response)) {
	cs.mu.Lock()
	b := cs.brokers[id]
	cs.mu.Unlock()
	if b == nil {
		return
	}
	b.mu.Lock()
	b.queue = append(b.queue, queued{req, callback})
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *brokerChannel) stop() {
	b.cancel()
	<-b.done
}

// requestTimeout bounds one attempt (Kafka's controller.socket.timeout.ms).
const requestTimeout = 30 * time.Second

// run sends the queue's requests one at a time, in order.
func (b *brokerChannel) run(clientID string, active func() bool, logger *slog.Logger) {
	defer close(b.done)
	var client *protocol.Client
	defer func() {
		if client != nil {
			client.Close()
		}
		b.mu.Lock()
		b.queue = nil
		b.mu.Unlock()
	}()
	backoff := 50 * time.Millisecond
	for {
		b.mu.Lock()
		var next queued
		if len(b.queue) > 0 {
			next = b.queue[0]
		}
		b.mu.Unlock()
		if next.req == nil {
			select {
			case <-b.ctx.Done():
				return
			case <-b.wake:
				continue
			}
		}
		if !active() {
			// The controller stopped acting (cut off from ZooKeeper): hold
			// the queue until it resigns, which drops it.
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		var err error
		if client == nil {
			ctx, cancel := context.WithTimeout(b.ctx, requestTimeout)
			client, err = protocol.Dial(ctx, b.addr, clientID)
			cancel()
		}
		var resp kmsg.Response
		if err == nil {
			ctx, cancel := context.WithTimeout(b.ctx, requestTimeout)
			resp, err = client.Request(ctx, next.req)
			cancel()
		}
		if b.ctx.Err() != nil {
			return
		}
		if err != nil {
			logger.Info("request to broker failed; retrying", "request", kmsg.NameForKey(next.req.Key()), "addr", b.addr, "err", err)
			if client != nil {
				client.Close()
				client = nil
			}
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if next.callback != nil {
			next.callback(resp)
		}
		b.mu.Lock()
		b.queue[0] = queued{}
		b.queue = b.queue[1:]
		b.mu.Unlock()
	}
}
