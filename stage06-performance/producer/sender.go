package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// build 06.E: a sender per broker: drain ready batches into Produce requests, five in flight, handle each answer
// tests: TestEverySenderAcknowledgesEachRecordOnceInOrderWithFiveInFlight, TestABrokerWhoseAnswersAreHeldDoesNotStallTheOthers, TestOrderPerPartitionHoldsWithFiveRequestsInFlight

// A sender drives one broker connection (see the package comment for why
// one goroutine per broker rather than Kafka's single Sender thread): it
// drains the batches of the partitions that broker leads into a Produce
// request, sends it on the broker's wire.Conn, and goes on draining while
// the answers come back. wire.Conn.Send waits while
// max.in.flight.requests.per.connection requests are unanswered: that
// wait is where batches grow while the broker is busy.
//
// With Options.SingleSender no sender runs: each broker's sender only
// carries the wake channel of the one senderLoop (sender_loop.go).
type sender struct {
	p      *Producer
	broker int32
	wake   chan struct{} // capacity 1: "look again", coalesced; the senderLoop's, shared, with SingleSender
}

// startSender returns the sender of a broker the metadata names for the
// first time, running its goroutine unless the senderLoop drives every
// broker.
func (p *Producer) startSender(ctx context.Context, broker int32) *sender {
	if p.loop != nil {
		return &sender{p: p, broker: broker, wake: p.loop.wake}
	}
	s := &sender{p: p, broker: broker, wake: make(chan struct{}, 1)}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		s.run(ctx)
	}()
	return s
}

// signal asks the sender to look at its partitions again; it never
// blocks.
func (s *sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the sender's loop: wait for a signal or for the next linger or
// backoff to end, then drain and send until nothing is ready.
func (s *sender) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := 0 // rotates where drain begins, so no partition always goes last (Kafka's drainIndex)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
		for ctx.Err() == nil {
			r, wait := s.p.nextRequest(ctx, s.broker, start)
			start++
			if r == nil {
				if wait > 0 {
					timer.Reset(wait)
				}
				break
			}
			s.send(ctx, r)
		}
	}
}

// nextRequest drains broker's ready batches into a Produce request, built
// and ready to send; or returns nil and how long until a batch of broker's
// may be ready (0: nothing pending), or retry.backoff.ms when no producer
// id could be had. Both senders start here.
func (p *Producer) nextRequest(ctx context.Context, broker int32, start int) (*produceRequest, time.Duration) {
	id := noProducerID
	if p.cfg.Idempotence {
		var err error
		if id, err = p.producerID(ctx); err != nil {
			p.logf("InitProducerId: %v", err)
			return nil, p.cfg.RetryBackoff
		}
	}
	r := p.requests.Get().(*produceRequest)
	var wait time.Duration
	r.batches, wait = p.acc.drain(broker, time.Now(), id, start, r.batches)
	if len(r.batches) == 0 {
		p.requests.Put(r)
		return nil, wait
	}
	r.req.Acks = p.cfg.Acks
	r.req.TimeoutMillis = int32(p.cfg.RequestTimeout.Milliseconds())
	for _, b := range r.batches {
		r.add(b)
	}
	return r, wait
}

// send writes one Produce request with r's batches; its answer is handled
// on the connection's reader goroutine.
func (s *sender) send(ctx context.Context, r *produceRequest) {
	conn, err := s.p.pool.Broker(ctx, s.broker)
	if err != nil {
		r.handle(nil, fmt.Errorf("broker %d: %w", s.broker, err))
		return
	}
	if err := conn.Send(ctx, r.request(), r.done); err != nil {
		r.handle(nil, err) // done will not run
	}
}

// A produceRequest is one Produce request and its batches, from the drain
// to the answer. It is reused, slices and all, once its answer is handled
// (done returned: wire.Conn no longer looks at the request), so that a
// request costs no allocations of ours either.
type produceRequest struct {
	p       *Producer                  // whose requests pool it returns to
	batches []*batch                   // in the order of the request
	req     kmsg.ProduceRequest        // its Topics and their Partitions keep their capacity
	done    func(kmsg.Response, error) // handle, bound once
}

func newProduceRequest(p *Producer) *produceRequest {
	r := &produceRequest{p: p, req: kmsg.NewProduceRequest()}
	r.done = r.handle
	return r
}

// request is what goes on the wire: the Produce request as nextRequest
// built it, capped at v12 unless acks=0 (see produceByName).
func (r *produceRequest) request() kmsg.Request {
	if r.req.Acks == 0 {
		return &r.req
	}
	return produceByName{&r.req}
}

// add puts b in the request, under its topic.
func (r *produceRequest) add(b *batch) {
	ts := r.req.Topics
	i := len(ts) - 1
	for ; i >= 0 && ts[i].Topic != b.part.topic; i-- {
	}
	if i < 0 {
		if len(ts) < cap(ts) { // a topic entry of an earlier use, with its Partitions' capacity
			ts = ts[:len(ts)+1]
			ts[len(ts)-1].Topic = b.part.topic
		} else {
			ts = append(ts, kmsg.ProduceRequestTopic{Topic: b.part.topic})
		}
		i = len(ts) - 1
	}
	ts[i].Partitions = append(ts[i].Partitions, kmsg.ProduceRequestTopicPartition{Partition: b.part.index, Records: b.buf})
	r.req.Topics = ts
}

// handle takes the answer (or the error that replaced it) and gives the
// request back for reuse.
func (r *produceRequest) handle(resp kmsg.Response, err error) {
	if err != nil {
		r.p.completeAll(r.batches, err)
	} else {
		r.p.complete(r.batches, resp)
	}
	for i := range r.req.Topics {
		t := &r.req.Topics[i]
		clear(t.Partitions) // drop the batches' buffers
		t.Partitions = t.Partitions[:0]
	}
	r.req.Topics = r.req.Topics[:0]
	clear(r.batches)
	r.batches = r.batches[:0]
	r.p.requests.Put(r)
}

// produceByName caps a Produce request at v12, the last that names topics:
// v13 (KIP-516) names them by topic id, which wire.Metadata does not keep.
// wire.Conn recognizes an acks=0 Produce (no response to wait for) by its
// type, so an acks=0 request goes out unwrapped, at the broker's highest
// version: against a broker that serves v13 (kfake; Kafka 4.1) acks=0 is
// not supported yet.
type produceByName struct{ *kmsg.ProduceRequest }

func (produceByName) MaxVersion() int16 { return 12 }

// complete handles a Produce response (nil for acks=0, whose requests
// have none): each batch is acknowledged, sent again or failed.
func (p *Producer) complete(batches []*batch, resp kmsg.Response) {
	now := time.Now()
	pr, _ := resp.(*kmsg.ProduceResponse)
	for _, b := range batches {
		if pr == nil {
			p.succeed(b, -1)
			continue
		}
		code, base, found := int16(0), int64(-1), false
		for i := range pr.Topics {
			if pr.Topics[i].Topic != b.part.topic {
				continue
			}
			for j := range pr.Topics[i].Partitions {
				if pp := &pr.Topics[i].Partitions[j]; pp.Partition == b.part.index {
					code, base, found = pp.ErrorCode, pp.BaseOffset, true
				}
			}
		}
		switch {
		case !found:
			p.retryOrFail(b, fmt.Errorf("producer: the response has no %s-%d", b.part.topic, b.part.index), now)
		case code == 0 || code == kerr.DuplicateSequenceNumber.Code:
			// A duplicate is a retry of a batch the broker already has:
			// it was delivered (the broker answers its first offset, or
			// -1 if it no longer knows it).
			p.succeed(b, base)
		default:
			p.retryOrFail(b, kerr.ErrorForCode(code), now)
		}
	}
	p.wakeAll()
}

// completeAll handles a request that got no answer: the connection died,
// timed out or could not be had. Every batch in it may be sent again.
func (p *Producer) completeAll(batches []*batch, err error) {
	now := time.Now()
	for _, b := range batches {
		p.retryOrFail(b, err, now)
	}
	p.requestRefresh() // the broker may be gone: ask who leads now
	p.wakeAll()
}

// retryOrFail sends b again after retry.backoff.ms if err allows it and
// b still has time and retries left; otherwise its records fail with err.
func (p *Producer) retryOrFail(b *batch, err error, now time.Time) {
	retry := p.retriable(b, err)
	if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.LeaderNotAvailable) || errors.Is(err, kerr.FencedLeaderEpoch) {
		p.requestRefresh() // Kafka's Sender: these errors mean our metadata is stale
	}
	switch {
	case !retry:
	case b.attempts > p.cfg.Retries:
		err = fmt.Errorf("producer: %s-%d: gave up after %d retries: %w", b.part.topic, b.part.index, p.cfg.Retries, err)
	case now.Sub(b.created) >= p.cfg.DeliveryTimeout:
		err = fmt.Errorf("producer: expiring %d record(s) for %s-%d: %d ms has passed since batch creation: %w",
			b.records(), b.part.topic, b.part.index, now.Sub(b.created).Milliseconds(), err)
	default:
		b.lastErr = err
		if p.acc.reenqueue(b, now) {
			return
		}
		err = ErrClosed
	}
	p.fail(b, err, true)
}

// retriable is Kafka's canRetry for one error. A sequence the broker
// refuses as out of order is retried when an earlier batch of the
// partition is unresolved (it will be resent first, and this one after
// it); when this batch was the next the broker should expect, the broker
// lost the producer's state and the batch fails (see fail). When a later
// batch of the partition was acknowledged before it, the batch was never
// appended (a retry of an appended one is answered as a duplicate, from
// the five batches a partition remembers) and never can be under this
// producer id: a leader that knew nothing of the producer took the later
// batch at its sequence (KIP-360) while this one was refused. The producer
// takes a new id and the batch goes again, stamped afresh (found by
// clusterbench on a fresh cluster, whose leaders refuse the first requests
// until they are ready: 444 records retried for delivery.timeout.ms).
func (p *Producer) retriable(b *batch, err error) bool {
	if p.cfg.Acks == 0 || p.runCtx.Err() != nil {
		return false
	}
	var kerrErr *kerr.Error
	if !errors.As(err, &kerrErr) {
		return true // the connection: died, timed out, refused
	}
	switch kerrErr {
	case kerr.OutOfOrderSequenceNumber:
		if p.acc.behindAcked(b) {
			p.resetProducerID(producerID{b.header.ProducerID, b.header.ProducerEpoch})
			return true
		}
		return !p.acc.nextExpected(b)
	case kerr.UnknownProducerID, kerr.InvalidProducerEpoch:
		return false
	}
	return kerrErr.Retriable
}

// succeed runs b's callbacks with the offsets the leader assigned.
func (p *Producer) succeed(b *batch, base int64) {
	p.acc.acknowledged(b, true)
	for i := range b.pending {
		pr := &b.pending[i]
		pr.r.Offset = -1
		if base >= 0 {
			pr.r.Offset = base + int64(i)
		}
		if pr.cb != nil {
			pr.cb(pr.r, nil)
		}
	}
	p.acc.done(b)
}

// fail runs b's callbacks with err. A batch that was sent with a sequence
// number and fails leaves a gap the broker would refuse every later batch
// for: the producer takes a new producer id (Kafka 2.5+ bumps the epoch,
// KIP-360), and the partition's sequences start again at 0. inFlight says
// whether b comes back from a request or from its deque.
func (p *Producer) fail(b *batch, err error, inFlight bool) {
	if inFlight {
		p.acc.acknowledged(b, false)
	}
	if p.cfg.Idempotence && b.stamped {
		p.resetProducerID(producerID{b.header.ProducerID, b.header.ProducerEpoch})
	}
	if p.cfg.TransactionalID != "" {
		p.txnRecordFailed(err) // the open transaction cannot commit
	}
	for i := range b.pending {
		pr := &b.pending[i]
		pr.r.Offset = -1
		if pr.cb != nil {
			pr.cb(pr.r, err)
		}
	}
	p.acc.done(b)
}

// end build
