package producer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// build 06.C: the record accumulator: a deque of batches per partition, linger and batch.size, what is ready to drain
// tests: TestALoneRecordWaitsLingerMs, TestFlushSendsALingeringBatchAtOnce, TestBatchesFillUpToBatchSize, TestAFullBatchLeavesWithoutWaitingOutLinger, TestExhaustedBufferMemoryBlocksProduceThenFails

// The RecordAccumulator of seed §2.2.1: one deque of batches per
// partition. Produce appends a record to the last batch of its partition's
// deque, or opens a new batch with a buffer from the BufferPool; each
// broker's sender drains, for the partitions that broker leads, the batch
// at the front of each deque that is ready.
//
//	Produce ──► partition 0: [batch full][batch filling]      ◄── BufferPool
//	            partition 1: [batch filling]                   (free list of
//	            partition 2: [retry][batch full][batch filling]  batch.size)
//	                  │ drain: one ready batch per partition
//	                  ▼
//	            sender(broker) ──► ProduceRequest ──► wire.Conn (≤ max.in.flight)

// errAbortForNewBatch: a keyless record would open a new batch on the
// sticky partition; the producer moves the sticky partition first
// (KIP-480's abortOnNewBatch).
var errAbortForNewBatch = errors.New("producer: new batch needed")

// producerID is an idempotent producer's id and epoch (InitProducerId).
type producerID struct {
	id    int64
	epoch int16
}

var noProducerID = producerID{record.NoProducerID, record.NoProducerEpoch}

// A topicState is a topic the producer writes to.
type topicState struct {
	name  string
	parts atomic.Pointer[[]*partition] // replaced when the partition count grows
	err   atomic.Pointer[error]        // the last metadata error for the topic, nil once known
}

// partitions returns the topic's partitions, nil until its metadata came.
func (t *topicState) partitions() []*partition {
	if p := t.parts.Load(); p != nil {
		return *p
	}
	return nil
}

// A partition is one deque of batches and what its sender must know about
// the batches in flight.
type partition struct {
	topic  string
	index  int32
	leader atomic.Int32 // the leader's broker id from the last metadata; -1: none

	mu sync.Mutex // guards the fields below
	// batches is the deque, oldest first. Invariant: batches that come
	// back for a retry are put back in the order they were made (number),
	// ahead of the newer ones.
	batches []*batch
	made    uint64 // batches made so far: the next one's number
	// inFlight counts this partition's batches in requests not yet
	// answered, all to broker inFlightTo. Invariant: while inFlight > 0,
	// no batch is sent to another broker (after a leader change, the old
	// leader's answers come first), so per-partition order holds.
	inFlight   int
	inFlightTo int32
	// blocked: a batch came back for a retry while others were in flight;
	// nothing is sent until they are all back, and then the deque is
	// resent in order.
	blocked bool

	// Idempotence: the sequence numbers count for id.
	id        producerID
	nextSeq   int32 // base sequence of the next batch sent for the first time
	lastAcked int32 // last sequence number acknowledged; -1 before any
}

// accumulator holds every partition's deque.
type accumulator struct {
	cfg  *Config
	pool *BufferPool

	topicsMu sync.Mutex                             // serializes changes to topics
	topics   atomic.Pointer[map[string]*topicState] // copy on write: read without a lock on every Produce
	all      atomic.Pointer[[]*partition]           // every partition, for drain and expiry

	flushing atomic.Int32 // Flush calls under way: every batch is ready
	closing  atomic.Bool  // Close under way: every batch is ready
	dead     atomic.Bool  // Close gave up: nothing is put back in a deque

	batches batchFreeList // done batches for reuse

	incMu      sync.Mutex          // guards incomplete
	incomplete map[*batch]struct{} // batches made and not done, for Flush
}

func newAccumulator(cfg *Config, pool *BufferPool) *accumulator {
	a := &accumulator{cfg: cfg, pool: pool, incomplete: map[*batch]struct{}{}}
	a.batches.max = int(cfg.BufferMemory/int64(cfg.BatchSize)) + 1
	a.topics.Store(&map[string]*topicState{})
	a.all.Store(&[]*partition{})
	return a
}

// topic returns the topic's state, adding it (with no partitions yet) the
// first time.
func (a *accumulator) topic(name string) *topicState {
	if t, ok := (*a.topics.Load())[name]; ok {
		return t
	}
	a.topicsMu.Lock()
	defer a.topicsMu.Unlock()
	old := *a.topics.Load()
	if t, ok := old[name]; ok {
		return t
	}
	next := make(map[string]*topicState, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	t := &topicState{name: name}
	next[name] = t
	a.topics.Store(&next)
	return t
}

// topicNames lists the topics produced to, for a metadata refresh.
func (a *accumulator) topicNames() []string {
	var names []string
	for name := range *a.topics.Load() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// setPartitions grows a topic to n partitions (a topic never shrinks in
// Kafka) and sets each one's leader.
func (a *accumulator) setPartitions(t *topicState, leaders []int32) {
	a.topicsMu.Lock()
	defer a.topicsMu.Unlock()
	parts := t.partitions()
	if len(leaders) > len(parts) {
		grown := slices.Clone(parts)
		all := slices.Clone(*a.all.Load())
		for i := len(parts); i < len(leaders); i++ {
			p := &partition{topic: t.name, index: int32(i), id: noProducerID, lastAcked: -1}
			p.leader.Store(-1)
			grown = append(grown, p)
			all = append(all, p)
		}
		t.parts.Store(&grown)
		a.all.Store(&all)
		parts = grown
	}
	for i, l := range leaders {
		parts[i].leader.Store(l)
	}
}

// append adds r to p's last batch, or to a new batch whose buffer it
// waits for (up to max.block.ms). With abortOnNewBatch, it returns
// errAbortForNewBatch instead of opening a batch. opened reports whether
// a batch was opened: the partition's sender may have work.
func (a *accumulator) append(ctx context.Context, p *partition, r *Record, ts int64, size int,
	cb func(*Record, error), abortOnNewBatch bool) (opened bool, err error) {
	// exercise 06.3: append a record to its partition's open batch, or open a new one
	// hint: try the open batch first; waiting for a buffer must not hold p.mu, so the world may have changed when you get it
	// tests: TestBatchesFillUpToBatchSize, TestARecordLargerThanBatchSizeGetsABufferOfItsOwn, TestAFullBatchLeavesWithoutWaitingOutLinger, TestEveryRecordIsAcknowledgedOnceWithTheOffsetItWasStoredAt, TestExhaustedBufferMemoryBlocksProduceThenFails
	p.mu.Lock()
	if a.tryAppendLocked(p, r, ts, cb) {
		p.mu.Unlock()
		return false, nil
	}
	p.mu.Unlock()
	if abortOnNewBatch {
		return false, errAbortForNewBatch
	}
	bufSize := max(a.cfg.BatchSize, record.HeaderSize+size)
	buf, err := a.pool.Allocate(ctx, bufSize, a.cfg.MaxBlock)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	if a.tryAppendLocked(p, r, ts, cb) { // another Produce opened one meanwhile
		p.mu.Unlock()
		a.pool.Deallocate(buf)
		return false, nil
	}
	b := a.batches.get(p, buf, time.Now(), p.made, size)
	p.made++
	b.tryAppend(r, ts, cb)
	p.batches = append(p.batches, b)
	p.mu.Unlock()
	a.incMu.Lock()
	a.incomplete[b] = struct{}{}
	a.incMu.Unlock()
	return true, nil
	// end exercise
}

// tryAppendLocked appends to the last batch if it is still open and has
// room; a batch a record did not fit takes no more. p.mu is held.
func (a *accumulator) tryAppendLocked(p *partition, r *Record, ts int64, cb func(*Record, error)) bool {
	if len(p.batches) == 0 {
		return false
	}
	last := p.batches[len(p.batches)-1]
	return !last.closed && !last.sealed && last.tryAppend(r, ts, cb)
}

// drain takes, for the partitions broker leads, the front batch of each
// deque that is ready, as long as the request stays within
// max.request.size (Kafka's RecordAccumulator.ready and drain in one
// pass). The batches are given id and the partition's sequence numbers
// and counted in flight under the partition's lock, then closed
// (compressed) and their headers written without it. wait is how long until the
// next batch of this broker's may become ready (0: nothing pending).
func (a *accumulator) drain(broker int32, now time.Time, id producerID, start int, out []*batch) (_ []*batch, wait time.Duration) {
	all := *a.all.Load()
	exhausted := a.pool.Waiting()
	forced := a.flushing.Load() > 0 || a.closing.Load() || exhausted
	size := 0
	for i := range all {
		p := all[(start+i)%len(all)]
		if p.leader.Load() != broker {
			continue
		}
		p.mu.Lock()
		b, until := a.readyLocked(p, broker, now, forced)
		if until > 0 && (wait == 0 || until < wait) {
			wait = until
		}
		if b == nil {
			p.mu.Unlock()
			continue
		}
		if len(out) > 0 && size+len(b.buf) > a.cfg.MaxRequestSize {
			p.mu.Unlock()
			break // the rest waits for the next request
		}
		p.batches[0] = nil
		p.batches = p.batches[1:]
		a.sequenceLocked(p, b, id)
		p.inFlight++
		p.inFlightTo = broker
		b.attempts++
		p.mu.Unlock()
		if !b.closed {
			b.close(a.cfg.Compression, a.cfg.TransactionalID != "")
		}
		b.writeHeader()
		size += len(b.buf)
		out = append(out, b)
	}
	return out, wait
}

// readyLocked returns p's front batch if it may be sent to broker now,
// else nil and how long until it may be (0: not a matter of time). p.mu
// is held.
//
// A batch is ready when waiting longer gains nothing (Kafka's
// RecordAccumulator.ready; chapter 6, "§2.2.1 Batching").
func (a *accumulator) readyLocked(p *partition, broker int32, now time.Time, forced bool) (*batch, time.Duration) {
	if len(p.batches) == 0 {
		return nil, 0
	}
	if p.inFlight > 0 && (p.inFlightTo != broker || p.blocked) {
		return nil, 0 // the answers in flight come first; they wake the sender
	}
	if a.cfg.Idempotence && p.inFlight >= 5 {
		return nil, 0 // the broker remembers the last 5 batches of a producer
	}
	b := p.batches[0]
	if b.attempts > 0 {
		if d := b.retryAt.Sub(now); d > 0 {
			return nil, d
		}
		return b, 0
	}
	// exercise 06.4: decide whether a partition's front batch may leave now, or how long it lingers
	// hint: nothing is gained by holding a batch that cannot grow or that somebody needs now; otherwise it waits out linger.ms, and the answer says how long is left
	// tests: TestALoneRecordWaitsLingerMs, TestAFullBatchLeavesWithoutWaitingOutLinger, TestFlushSendsALingeringBatchAtOnce, TestBatchesFillUpToBatchSize
	if forced || len(p.batches) > 1 || b.full() {
		return b, 0
	}
	if d := b.created.Add(a.cfg.Linger).Sub(now); d > 0 {
		return nil, d
	}
	return b, 0
	// end exercise
}

// sequenceLocked gives b its producer id and base sequence the first
// time it is sent, or again after the producer id changed. p.mu is held.
func (a *accumulator) sequenceLocked(p *partition, b *batch, id producerID) {
	if !a.cfg.Idempotence {
		if !b.stamped {
			b.setSequence(noProducerID, record.NoSequence)
		}
		return
	}
	if p.id != id { // a new producer id: sequences start again at 0
		p.id, p.nextSeq, p.lastAcked = id, 0, -1
	}
	if b.stamped && b.header.ProducerID == id.id && b.header.ProducerEpoch == id.epoch {
		return // a retry: the same bytes, the same sequence
	}
	b.setSequence(id, p.nextSeq)
	p.nextSeq += int32(b.records())
}

// reenqueue puts a batch back for a retry after backoff, in its place: the
// deque stays in the order the batches were made. While others of the
// partition are still in flight, the partition is blocked: they come back
// too (or are acknowledged) before anything is sent again.
// It returns false, and keeps nothing, once the producer has given up
// (takeAll): the caller fails the batch.
func (a *accumulator) reenqueue(b *batch, now time.Time) bool {
	p := b.part
	p.mu.Lock()
	defer p.mu.Unlock()
	if a.dead.Load() {
		return false // still in flight: the caller fails it (fail with inFlight)
	}
	p.inFlight--
	p.blocked = p.inFlight > 0
	b.retryAt = now.Add(a.cfg.RetryBackoff)
	i, _ := slices.BinarySearchFunc(p.batches, b.number, func(x *batch, n uint64) int {
		switch {
		case x.number < n:
			return -1
		case x.number > n:
			return 1
		}
		return 0
	})
	p.batches = slices.Insert(p.batches, i, b)
	return true
}

// acknowledged records that b is done (acknowledged or failed for good).
func (a *accumulator) acknowledged(b *batch, ok bool) {
	p := b.part
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight--
	if p.inFlight == 0 {
		p.blocked = false
	}
	if ok && b.header.ProducerID == p.id.id && b.header.ProducerEpoch == p.id.epoch && b.header.BaseSequence >= 0 {
		p.lastAcked = max(p.lastAcked, b.header.BaseSequence+b.header.NumRecords-1)
	}
}

// nextExpected reports whether b's sequence is the one after the last
// acknowledged on its partition: a broker that refuses it as out of order
// lost the producer's state, as opposed to missing an earlier batch that
// is still on its way.
func (a *accumulator) nextExpected(b *batch) bool {
	p := b.part
	p.mu.Lock()
	defer p.mu.Unlock()
	return b.header.ProducerID == p.id.id && b.header.BaseSequence == p.lastAcked+1
}

// behindAcked reports whether a later sequence of b's partition was
// acknowledged, under b's producer id and epoch, before b: the broker took
// a later batch first, and b cannot be appended under this id.
func (a *accumulator) behindAcked(b *batch) bool {
	p := b.part
	p.mu.Lock()
	defer p.mu.Unlock()
	return b.header.ProducerID == p.id.id && b.header.ProducerEpoch == p.id.epoch && b.header.BaseSequence <= p.lastAcked
}

// expire removes from the deques the batches older than
// delivery.timeout.ms that are not in flight (Kafka's expiredBatches); the
// ones in flight are judged when they come back.
func (a *accumulator) expire(now time.Time) []*batch {
	var out []*batch
	for _, p := range *a.all.Load() {
		p.mu.Lock()
		kept := p.batches[:0]
		for _, b := range p.batches {
			if now.Sub(b.created) >= a.cfg.DeliveryTimeout {
				out = append(out, b)
			} else {
				kept = append(kept, b)
			}
		}
		clear(p.batches[len(kept):])
		p.batches = kept
		p.mu.Unlock()
	}
	return out
}

// takeAll empties every deque for good, for a Close that gives up: a
// batch that comes back from a request afterwards is not put back.
func (a *accumulator) takeAll() []*batch {
	a.dead.Store(true)
	var out []*batch
	for _, p := range *a.all.Load() {
		p.mu.Lock()
		out = append(out, p.batches...)
		clear(p.batches)
		p.batches = p.batches[:0]
		p.mu.Unlock()
	}
	return out
}

// done marks b complete for Flush, returns its memory to the pool and
// the batch itself to the free list: b is not used again.
func (a *accumulator) done(b *batch) {
	a.pool.Deallocate(b.poolBuffer())
	a.incMu.Lock()
	delete(a.incomplete, b)
	if b.flushed != nil {
		close(b.flushed)
	}
	a.incMu.Unlock()
	a.batches.put(b)
}

// awaitIncomplete returns a channel per batch not yet done, each closed
// when its batch is.
func (a *accumulator) awaitIncomplete() []chan struct{} {
	a.incMu.Lock()
	defer a.incMu.Unlock()
	out := make([]chan struct{}, 0, len(a.incomplete))
	for b := range a.incomplete {
		if b.flushed == nil {
			b.flushed = make(chan struct{})
		}
		out = append(out, b.flushed)
	}
	return out
}

// end build
