package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// A senderLoop is Kafka's Sender (Options.SingleSender): one goroutine
// that drives every broker connection. Each round it goes over the
// brokers of the metadata; for one whose connection has a free slot it
// drains the ready batches of the partitions that broker leads and sends
// them with wire.Conn.TrySend, which never waits; a broker whose
// connection is full is skipped, its batches left in their deques to
// grow (Kafka's NetworkClient.isReady before RecordAccumulator.drain).
// Then it waits until something changes: a batch opened, a linger or
// backoff ending, an answer (its done frees the slot, then wakes the
// loop), a dial ending, new metadata.
//
//	round: broker 1  slot free? ── drain ── TrySend ──► wire.Conn ──► broker 1
//	       broker 2  full: skip (its answers wake the loop)
//	       broker 3  slot free? ── drain ── TrySend ──► wire.Conn ──► broker 3
//	wait:  wake (Produce, answers, metadata, dials) or the next linger/backoff
//
// Nothing in the loop may block on one broker: a connection is dialled on
// a goroutine of its own, whose end wakes the loop. What still blocks it
// is InitProducerId with idempotence, as it blocks Kafka's Sender, and a
// write to a broker that stopped reading: TrySend writes a request whole,
// so a full socket holds the loop up to the connection's request timeout
// (request.timeout.ms and a second), when the connection fails. Kafka's
// Selector would keep the rest of the bytes and move on.
type senderLoop struct {
	p    *Producer
	wake chan struct{} // capacity 1, every broker's sender signals it

	// Owned by the loop goroutine.
	links map[int32]*link // by broker id
}

// A link is the loop's side of one broker's connection.
type link struct {
	broker int32
	conn   *wire.Conn      // nil until dialled, and after it died
	dialed chan dialResult // capacity 1: the dial under way reports here; nil when none is
	// pending is a request drained and built that found no slot (another
	// goroutine's request, a metadata refresh, took it between Ready and
	// TrySend) or no connection yet: it goes first, as soon as it can.
	// Its batches count as in flight, as they would in a per-broker
	// sender blocked in Send.
	pending *produceRequest
	start   int // rotates where drain begins (Kafka's drainIndex)
}

type dialResult struct {
	conn *wire.Conn
	err  error
}

// fullConnPoll bounds the loop's wait while a connection is full: the
// answers to its own requests wake it, but a slot held by a request of
// another goroutine (a metadata refresh, InitProducerId) frees without a
// word to the loop.
const fullConnPoll = 10 * time.Millisecond

func newSenderLoop(p *Producer) *senderLoop {
	return &senderLoop{p: p, wake: make(chan struct{}, 1), links: map[int32]*link{}}
}

func (l *senderLoop) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is the loop: wait for a signal or the next deadline, then a round
// over every broker.
func (l *senderLoop) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer l.failPending()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		if wait := l.round(ctx); wait > 0 {
			timer.Reset(wait)
		}
	}
}

// round serves each broker once and returns how long until the next
// deadline of any of them (0: none; a signal will come).
func (l *senderLoop) round(ctx context.Context) time.Duration {
	var wait time.Duration
	for id := range *l.p.senders.Load() {
		k := l.links[id]
		if k == nil {
			k = &link{broker: id}
			l.links[id] = k
		}
		if d := l.serve(ctx, k); d > 0 && (wait == 0 || d < wait) {
			wait = d
		}
	}
	return wait
}

// serve sends k's broker what is ready, as long as its connection takes
// requests without waiting, and returns how long until it should be
// looked at again (0: when signalled).
func (l *senderLoop) serve(ctx context.Context, k *link) time.Duration {
	for ctx.Err() == nil {
		if k.pending == nil {
			if k.conn != nil && k.conn.Err() == nil && !k.conn.Ready() {
				return fullConnPoll // full: leave the batches to grow in their deques
			}
			r, wait := l.p.nextRequest(ctx, k.broker, k.start)
			k.start++
			if r == nil {
				return wait
			}
			k.pending = r
		}
		conn, err := l.connection(ctx, k)
		if err != nil {
			k.pending.handle(nil, fmt.Errorf("broker %d: %w", k.broker, err))
			k.pending = nil
			return 0 // the batches come back after retry.backoff.ms and wake the loop
		}
		if conn == nil {
			return 0 // a dial is under way; its end wakes the loop
		}
		r := k.pending
		sent, err := conn.TrySend(r.request(), r.done)
		switch {
		case err != nil:
			k.conn = nil
			k.pending = nil
			r.handle(nil, err) // done will not run
			return 0
		case !sent:
			return fullConnPoll
		}
		k.pending = nil // r is the connection's now: its done may already have reused it
	}
	return 0
}

// connection returns k's live connection, or nil while a dial (started
// here if none is under way) has not ended, or the error it ended with.
func (l *senderLoop) connection(ctx context.Context, k *link) (*wire.Conn, error) {
	if k.conn != nil && k.conn.Err() == nil {
		return k.conn, nil
	}
	k.conn = nil
	if k.dialed == nil {
		ch := make(chan dialResult, 1)
		k.dialed = ch
		broker := k.broker
		l.p.wg.Add(1) // the loop's own count keeps the WaitGroup above 0
		go func() {
			defer l.p.wg.Done()
			c, err := l.p.pool.Broker(ctx, broker)
			ch <- dialResult{c, err}
			l.signal()
		}()
	}
	select {
	case d := <-k.dialed:
		k.dialed = nil
		if d.err != nil {
			return nil, d.err
		}
		k.conn = d.conn
		return d.conn, nil
	default:
		return nil, nil
	}
}

// failPending gives back, when the producer stops, the requests that
// never found a slot: their batches fail (runCtx is done: no retry).
func (l *senderLoop) failPending() {
	for _, k := range l.links {
		if k.pending != nil {
			k.pending.handle(nil, ErrClosed)
			k.pending = nil
		}
	}
}
