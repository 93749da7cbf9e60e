package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// Record is a record to produce. Produce keeps it until its callback has
// run: the caller must not change it meanwhile, and may reuse it after.
type Record struct {
	Topic     string
	Key       []byte          // nil: no key (the sticky partition); else murmur2 chooses the partition
	Value     []byte          // nil: a null value (a tombstone)
	Headers   []record.Header // in order
	Timestamp time.Time       // CreateTime; the zero time means now

	// Set by the producer.
	Partition int32 // the partition chosen, set by Produce
	Offset    int64 // the offset the leader assigned, set before the callback; -1 with acks=0 or on error
}

// ErrRecordTooLarge: a record that cannot fit in a request
// (max.request.size) or in buffer.memory (Kafka's RecordTooLargeException).
var ErrRecordTooLarge = errors.New("producer: record too large")

// ErrNoMetadata: a topic's metadata did not come within max.block.ms.
var ErrNoMetadata = errors.New("producer: topic not present in metadata")

// Options are the parts of a producer that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger // slog.Default if nil
	// SingleSender runs Kafka's design: one goroutine (Kafka's Sender
	// thread) drives every broker connection, sending only where a slot
	// is free (sender_loop.go). false, the default: one sender goroutine
	// per broker, which may block on its own connection (sender.go).
	SingleSender bool
}

// metadataMaxAge is Kafka's metadata.max.age.ms default: the metadata is
// refreshed at least this often even when nothing fails.
const metadataMaxAge = 5 * time.Minute

// expiryInterval is how often batches older than delivery.timeout.ms are
// looked for in the deques.
const expiryInterval = 50 * time.Millisecond

// Producer is an asynchronous, batching Kafka producer. Safe for
// concurrent use.
type Producer struct {
	cfg    Config
	logger *slog.Logger
	pool   *wire.Pool
	buffer *BufferPool
	acc    *accumulator
	sticky stickyPartitions

	runCtx  context.Context // canceled when Close stops the goroutines
	stop    context.CancelFunc
	wg      sync.WaitGroup // the metadata loop and the senders
	closing atomic.Bool    // Close was called: Produce refuses

	senders  atomic.Pointer[map[int32]*sender] // by broker id; copy on write by the metadata loop
	loop     *senderLoop                       // Options.SingleSender: the one loop that drives every broker; nil otherwise
	requests sync.Pool                         // *produceRequest, reused once answered
	refresh  chan struct{}                     // capacity 1: a metadata refresh is wanted

	metaMu      sync.Mutex    // guards metaChanged
	metaChanged chan struct{} // closed and replaced at every metadata update

	idMu   sync.Mutex    // guards the three fields below; never held across a request
	id     producerID    // noProducerID until InitProducerId answers, and after a reset
	idInit chan struct{} // closed when the InitProducerId under way ends; nil when none is
	prevID producerID    // the id before the last reset: a transactional producer bumps its epoch (KIP-360)

	txn txnState // transactional.id's state (txn.go)
}

// New returns a producer; it connects to the brokers when it first needs
// them.
func New(cfg Config, opts Options) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Producer{
		cfg: cfg, logger: opts.Logger,
		pool: wire.NewPool(cfg.BootstrapServers, wire.Options{ClientID: cfg.ClientID, MaxInFlight: cfg.MaxInFlight,
			RequestTimeout: cfg.RequestTimeout + time.Second}), // the broker answers a slow acks=all at request.timeout.ms: give it the time to
		buffer:      NewBufferPool(cfg.BufferMemory, cfg.BatchSize),
		runCtx:      ctx,
		stop:        stop,
		refresh:     make(chan struct{}, 1),
		metaChanged: make(chan struct{}),
		id:          noProducerID,
		prevID:      noProducerID,
	}
	p.acc = newAccumulator(&p.cfg, p.buffer)
	p.requests.New = func() any { return newProduceRequest(p) }
	p.senders.Store(&map[int32]*sender{})
	if opts.SingleSender {
		p.loop = newSenderLoop(p)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop.run(ctx)
		}()
	}
	p.wg.Add(1)
	go p.metadataLoop(ctx)
	return p, nil
}

// Produce appends r to its partition's batch and returns; cb runs once r
// is acknowledged (with r.Offset set) or has failed. Produce blocks only
// for buffer memory or for the topic's metadata, up to max.block.ms (and
// ctx); when it returns an error, cb is never called.
//
// Callbacks run on the goroutine that reads the broker's answers, in the
// order of each partition's records, as Kafka runs them on its I/O
// thread, and with no lock of the producer held: a callback may Produce,
// the next record of a chain for instance. It must be quick, and must not
// call Flush or Close, nor Produce where that Produce may wait: for
// buffer memory (the memory comes back on the goroutine the callback
// holds), or for the metadata of a topic not produced to before (the
// answer comes back on a connection whose reader may be that goroutine;
// Kafka's I/O thread has the same limit).
func (p *Producer) Produce(ctx context.Context, r *Record, cb func(*Record, error)) error {
	if p.closing.Load() {
		return ErrClosed
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	ms := ts.UnixMilli()
	probe := record.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}
	size := probe.EncodedSize() + 2*binaryVarintMax // room for the deltas, once known
	if record.HeaderSize+size > p.cfg.MaxRequestSize || int64(record.HeaderSize+size) > p.cfg.BufferMemory {
		return fmt.Errorf("%w: %d bytes when serialized, larger than max.request.size (%d) or buffer.memory (%d)",
			ErrRecordTooLarge, record.HeaderSize+size, p.cfg.MaxRequestSize, p.cfg.BufferMemory)
	}
	t := p.acc.topic(r.Topic)
	parts := t.partitions()
	if parts == nil {
		var err error
		if parts, err = p.waitForPartitions(ctx, t); err != nil {
			return err
		}
	}
	keyless := r.Key == nil
	var part *partition
	if keyless {
		part = parts[p.sticky.partition(t.name, parts)]
	} else {
		part = parts[KeyPartition(r.Key, len(parts))]
	}
	r.Partition = part.index
	if p.cfg.TransactionalID != "" {
		if !p.txn.gate.TryRLock() { // a Commit or Abort is flushing: too late for this transaction
			return ErrTransactionEnding
		}
		defer p.txn.gate.RUnlock()
		if err := p.addToTxn(ctx, part); err != nil {
			return err
		}
	}
	opened, err := p.acc.append(ctx, part, r, ms, size, cb, keyless)
	if errors.Is(err, errAbortForNewBatch) {
		// KIP-480: the sticky partition's batch is full or gone; stick
		// to another partition, and open a batch there if need be. The
		// full batch is ready now: its sender may be waiting out linger.ms.
		p.wakeLeader(part)
		part = parts[p.sticky.onNewBatch(t.name, part.index, parts)]
		r.Partition = part.index
		if p.cfg.TransactionalID != "" {
			if err := p.addToTxn(ctx, part); err != nil {
				return err
			}
		}
		opened, err = p.acc.append(ctx, part, r, ms, size, cb, false)
	}
	if err != nil {
		return err
	}
	if opened {
		p.wakeLeader(part)
	}
	return nil
}

// binaryVarintMax is the most bytes a timestamp or offset delta may add to
// a record over the one-byte deltas EncodedSize counted for probe.
const binaryVarintMax = 9

// waitForPartitions asks for t's metadata and waits for it, up to
// max.block.ms (Kafka's waitOnMetadata).
func (p *Producer) waitForPartitions(ctx context.Context, t *topicState) ([]*partition, error) {
	timer := time.NewTimer(p.cfg.MaxBlock)
	defer timer.Stop()
	for {
		p.metaMu.Lock()
		changed := p.metaChanged
		p.metaMu.Unlock()
		if parts := t.partitions(); parts != nil {
			return parts, nil
		}
		p.requestRefresh()
		select {
		case <-changed:
		case <-timer.C:
			err := fmt.Errorf("%w: topic %s after %d ms", ErrNoMetadata, t.name, p.cfg.MaxBlock.Milliseconds())
			if e := t.err.Load(); e != nil {
				err = fmt.Errorf("%w: %w", err, *e)
			}
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.runCtx.Done():
			return nil, ErrClosed
		}
	}
}

// Flush makes every record produced so far sendable at once, whatever
// linger.ms says, and waits until each has been acknowledged or has
// failed, or until ctx is done.
func (p *Producer) Flush(ctx context.Context) error {
	p.acc.flushing.Add(1)
	defer p.acc.flushing.Add(-1)
	waits := p.acc.awaitIncomplete()
	p.wakeAll()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close refuses new records, sends what is buffered and waits for the
// answers until ctx is done; then it stops, and the records still
// unanswered fail with ErrClosed.
func (p *Producer) Close(ctx context.Context) error {
	if p.closing.Swap(true) {
		return nil
	}
	p.acc.closing.Store(true)
	err := p.Flush(ctx)
	p.stop()
	p.pool.Close() // answers in flight fail, and are not retried: runCtx is done
	p.wg.Wait()
	for _, b := range p.acc.takeAll() {
		p.fail(b, ErrClosed, false)
	}
	// The connections' reader goroutines fail what was in flight.
	for _, w := range p.acc.awaitIncomplete() {
		<-w
	}
	p.buffer.Close()
	return err
}

// metadataLoop refreshes the metadata when asked (at most once per
// retry.backoff.ms) and every metadata.max.age.ms, and expires batches
// older than delivery.timeout.ms.
func (p *Producer) metadataLoop(ctx context.Context) {
	defer p.wg.Done()
	age := time.NewTicker(metadataMaxAge)
	defer age.Stop()
	expiry := time.NewTicker(expiryInterval)
	defer expiry.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			for _, b := range p.acc.expire(time.Now()) {
				err := fmt.Errorf("producer: expiring %d record(s) for %s-%d: %d ms has passed since batch creation",
					b.records(), b.part.topic, b.part.index, time.Since(b.created).Milliseconds())
				if b.lastErr != nil { // waiting for a retry: say why it was retried
					err = fmt.Errorf("%w: last attempt: %w", err, b.lastErr)
				}
				p.fail(b, err, false)
			}
			continue
		case <-age.C:
		case <-p.refresh:
		}
		if d := time.Until(last.Add(p.cfg.RetryBackoff)); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		last = time.Now()
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		m, err := p.pool.Refresh(rctx, p.acc.topicNames())
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				p.logf("metadata: %v", err)
				p.requestRefresh()
			}
			continue
		}
		p.apply(ctx, m)
	}
}

// apply takes a metadata answer: partitions and leaders, a sender per
// broker; and wakes whoever waits for it.
func (p *Producer) apply(ctx context.Context, m *wire.Metadata) {
	again := false
	var unknown []string
	for _, name := range p.acc.topicNames() {
		t := p.acc.topic(name)
		mt := m.Topics[name]
		if mt == nil || mt.Err != nil || len(mt.Partitions) == 0 {
			err := fmt.Errorf("metadata for %s: %w", name, kerr.UnknownTopicOrPartition)
			if mt != nil && mt.Err != nil {
				err = fmt.Errorf("metadata for %s: %w", name, mt.Err)
			}
			t.err.Store(&err)
			again = again || p.pendingIn(t)
			if mt == nil || errors.Is(mt.Err, kerr.UnknownTopicOrPartition) {
				unknown = append(unknown, name)
			}
			continue
		}
		t.err.Store(nil)
		leaders := make([]int32, len(mt.Partitions))
		for i, pt := range mt.Partitions {
			leaders[i] = pt.Leader
			if pt.Err != nil {
				leaders[i] = -1
			}
		}
		p.acc.setPartitions(t, leaders)
		for _, part := range t.partitions() {
			if part.leader.Load() < 0 {
				part.mu.Lock()
				again = again || len(part.batches) > 0 || part.inFlight > 0
				part.mu.Unlock()
			}
		}
	}
	if len(unknown) > 0 {
		p.autoCreate(ctx, m, unknown)
		again = true
	}
	old := *p.senders.Load()
	var next map[int32]*sender
	for id := range m.Brokers {
		if _, ok := old[id]; ok {
			continue
		}
		if next == nil {
			next = make(map[int32]*sender, len(m.Brokers))
			for k, v := range old {
				next[k] = v
			}
		}
		next[id] = p.startSender(ctx, id)
	}
	if next != nil {
		p.senders.Store(&next)
	}
	p.metaMu.Lock()
	close(p.metaChanged)
	p.metaChanged = make(chan struct{})
	p.metaMu.Unlock()
	p.wakeAll()
	if again {
		p.requestRefresh() // after retry.backoff.ms: a leader is being elected
	}
}

// autoCreate asks a broker for the metadata of topics it does not know
// with allowAutoTopicCreation, as Kafka's producer does: a broker with
// auto.create.topics.enable creates them (wire.Pool's refreshes do not
// ask for that, being shared with consumers).
func (p *Producer) autoCreate(ctx context.Context, m *wire.Metadata, topics []string) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	for _, addr := range m.Brokers {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		conn, err := p.pool.Conn(rctx, addr)
		if err == nil {
			_, err = conn.Request(rctx, req)
		}
		cancel()
		if err == nil {
			return
		}
		p.logf("metadata with auto-creation from %s: %v", addr, err)
	}
}

// pendingIn reports whether any of t's partitions holds batches.
func (p *Producer) pendingIn(t *topicState) bool {
	for _, part := range t.partitions() {
		part.mu.Lock()
		n := len(part.batches) + part.inFlight
		part.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// requestRefresh asks the metadata loop for a refresh; it never blocks.
func (p *Producer) requestRefresh() {
	select {
	case p.refresh <- struct{}{}:
	default:
	}
}

// wakeLeader signals the sender of part's leader, or asks for metadata
// if it has none.
func (p *Producer) wakeLeader(part *partition) {
	if s, ok := (*p.senders.Load())[part.leader.Load()]; ok {
		s.signal()
		return
	}
	p.requestRefresh()
}

func (p *Producer) wakeAll() {
	for _, s := range *p.senders.Load() {
		s.signal()
	}
}

func (p *Producer) logf(format string, args ...any) {
	p.logger.Debug("producer: " + fmt.Sprintf(format, args...))
}

// BufferPool is the producer's pool of batch buffers, for tests and
// metrics.
func (p *Producer) BufferPool() *BufferPool { return p.buffer }
