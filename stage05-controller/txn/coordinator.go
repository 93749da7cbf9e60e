package txn

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Config is the coordinator's configuration, with Kafka's broker keys and
// defaults (DefaultConfig).
type Config struct {
	// Partitions is transaction.state.log.num.partitions (50).
	Partitions int32
	// MaxTimeout is transaction.max.timeout.ms (15 min): the longest
	// transaction.timeout.ms a producer may ask for.
	MaxTimeout time.Duration
	// AbortCheck is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s):
	// how often open transactions are checked against their timeouts.
	AbortCheck time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days): an id idle
	// (no transaction open) for longer is removed.
	IDExpiration time.Duration
	// IDExpirationCheck is
	// transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
	IDExpirationCheck time.Duration
	// WriteTimeout is how long a write to __transaction_state waits for
	// the ISR (acks=all): Kafka's request.timeout.ms for it (30 s).
	WriteTimeout time.Duration
	// LoadBufferBytes is transaction.state.log.load.buffer.size (5 MiB).
	LoadBufferBytes int
	// MarkerRetryBackoff is how long a marker that could not be written
	// (no leader, too few replicas) waits before it is sent again.
	MarkerRetryBackoff time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{Partitions: 50, MaxTimeout: 15 * time.Minute, AbortCheck: 10 * time.Second, IDExpiration: 7 * 24 * time.Hour,
		IDExpirationCheck: time.Hour, WriteTimeout: 30 * time.Second, LoadBufferBytes: 5 << 20, MarkerRetryBackoff: 100 * time.Millisecond}
}

// Writer appends to __transaction_state as its leader, with acks=all:
// the group coordinator's Writer. done gets the produce error code,
// exactly once, possibly on another goroutine or before Append returns.
type Writer interface {
	Append(partition int32, batch []byte, timeout time.Duration, done func(code int16))
}

// ProducerIDs hands out producer ids (stage 04's Allocator, with blocks
// claimed in ZooKeeper).
type ProducerIDs interface {
	Next() (int64, error)
}

// Markers has the leaders of partitions write a transaction marker
// (WriteTxnMarkers). done gets each partition's error code (0: written
// and replicated), exactly once, on any goroutine.
type Markers interface {
	Write(m record.Marker, parts []commitlog.TopicPartition, done func(codes map[commitlog.TopicPartition]int16))
}

// Options are the parts of a Coordinator that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger     // slog.Default if nil
	Now    func() time.Time // time.Now if nil
}

// ownership is this broker's hold on one partition of __transaction_state,
// from one Elected to the next Resigned; compared by pointer, so that
// what a load or a write started under an older hold installs nothing.
// Protected by Coordinator.mu.
type ownership struct {
	epoch   int32 // the leader epoch: the coordinator epoch of its markers
	loading bool
	failed  bool // the load could not read the log: NOT_COORDINATOR until a newer epoch
}

// entry is a transactional id's state and what is under way for it.
// Protected by Coordinator.mu.
type entry struct {
	Metadata
	partition int32
	// pending is the state a write (or the markers, then a write) in
	// progress moves to; nil when nothing is under way. While it is set,
	// most requests answer CONCURRENT_TRANSACTIONS (Kafka's pendingState).
	pending *State
	// waiting are AddPartitions calls that came while the last
	// transaction's markers were being written: each is tried again when
	// nothing is under way any more (parkLocked).
	waiting []func()
}

// parkWait bounds how long an AddPartitionsToTxn waits for the last
// transaction's markers before it answers CONCURRENT_TRANSACTIONS.
const parkWait = time.Second

// maxParked bounds the calls parked on one id: each holds a request and
// its answer until the markers are written.
const maxParked = 64

// parkLocked holds retry until e's pending state clears, or answers
// giveUp after parkWait. Kafka answers CONCURRENT_TRANSACTIONS at once,
// and its clients retry after 20 ms (franz-go, Java's producer): a
// producer that commits and begins its next transaction at once would
// wait that long every time, where the markers take a few milliseconds.
// Waiting here, within the request's timeout, changes no outcome: the
// answer is the one the retry would get.
func (c *Coordinator) parkLocked(e *entry, retry func(), giveUp func()) {
	if len(e.waiting) >= maxParked { // a client retrying in a loop: no more to hold
		go giveUp()
		return
	}
	var once sync.Once
	run := func(f func()) func() { return func() { once.Do(f) } }
	e.waiting = append(e.waiting, run(retry))
	time.AfterFunc(parkWait, run(giveUp))
}

// wakeLocked hands e's parked calls to new goroutines: they take mu.
func wakeLocked(e *entry) {
	for _, f := range e.waiting {
		go f()
	}
	e.waiting = nil
}

// Coordinator is the transaction coordinator of one broker: it serves the
// transactional ids of the __transaction_state partitions this broker
// leads.
type Coordinator struct {
	cfg     Config
	out     Writer
	ids     ProducerIDs
	markers Markers
	logger  *slog.Logger
	now     func() time.Time

	mu     sync.Mutex
	owned  map[int32]*ownership // Protected by mu.
	txns   map[string]*entry    // Protected by mu.
	closed bool                 // Protected by mu.
	stop   chan struct{}
	wg     sync.WaitGroup // loads and the timers' loops
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config, out Writer, ids ProducerIDs, markers Markers, opts Options) *Coordinator {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Coordinator{cfg: cfg, out: out, ids: ids, markers: markers, logger: opts.Logger, now: opts.Now,
		owned: map[int32]*ownership{}, txns: map[string]*entry{}, stop: make(chan struct{})}
	c.every(cfg.AbortCheck, c.AbortTimedOut)
	c.every(cfg.IDExpirationCheck, c.ExpireIDs)
	return c
}

func (c *Coordinator) every(d time.Duration, f func()) {
	if d <= 0 {
		return
	}
	c.wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				f()
			}
		}
	})
}

// Close stops the coordinator: it forgets every id; writes and markers
// under way finish without effect.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	clear(c.owned)
	clear(c.txns)
	c.mu.Unlock()
	close(c.stop)
	c.wg.Wait()
}

// Partitions is transaction.state.log.num.partitions.
func (c *Coordinator) Partitions() int32 { return c.cfg.Partitions }

// MaxTimeout is transaction.max.timeout.ms.
func (c *Coordinator) MaxTimeout() time.Duration { return c.cfg.MaxTimeout }

// Codes the coordinator answers with.
var (
	codeNone            = int16(0)
	codeNotCoordinator  = kerr.NotCoordinator.Code
	codeLoading         = kerr.CoordinatorLoadInProgress.Code
	codeNotAvailable    = kerr.CoordinatorNotAvailable.Code
	codeConcurrent      = kerr.ConcurrentTransactions.Code
	codeFenced          = kerr.ProducerFenced.Code
	codeInvalidMapping  = kerr.InvalidProducerIDMapping.Code
	codeInvalidTxnState = kerr.InvalidTxnState.Code
	codeInvalidRequest  = kerr.InvalidRequest.Code
	codeInvalidTimeout  = kerr.InvalidTransactionTimeout.Code
)

// Elected tells the coordinator that this broker now leads partition p of
// __transaction_state in leader epoch epoch: it reads the partition's
// transactional ids from l on its own goroutine, answering
// COORDINATOR_LOAD_IN_PROGRESS for them until it is done, then sends the
// markers of every transaction found prepared (Kafka's
// loadTransactionsForTxnTopicPartition). A newer epoch with the same
// leader only records the epoch.
func (c *Coordinator) Elected(p, epoch int32, l *commitlog.Log) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if o := c.owned[p]; o != nil && !(o.failed && epoch > o.epoch) {
		o.epoch = max(o.epoch, epoch)
		c.mu.Unlock()
		return
	}
	o := &ownership{epoch: epoch, loading: true}
	c.owned[p] = o
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		start := c.now()
		found, err := c.read(l)
		c.mu.Lock()
		if c.owned[p] != o {
			c.mu.Unlock()
			return
		}
		o.loading = false
		if err != nil {
			o.failed = true
			c.mu.Unlock()
			c.logger.Error("loading transactions failed: answering NOT_COORDINATOR until elected in a newer epoch", "partition", p, "err", err)
			return
		}
		var resume []func()
		for id, m := range found {
			e := &entry{Metadata: *m, partition: p}
			c.txns[id] = e
			if to, commit := m.State.complete(); to != m.State {
				resume = append(resume, c.completeLocked(e, o, to, commit))
			}
		}
		c.mu.Unlock()
		c.logger.Info("loaded transactions", "partition", p, "epoch", epoch, "ids", len(found), "resumed", len(resume),
			"took", c.now().Sub(start).Round(time.Millisecond))
		for _, f := range resume {
			f()
		}
	}()
}

// read reads every record of the partition, the last one of each id
// winning (a tombstone removes it).
func (c *Coordinator) read(l *commitlog.Log) (map[string]*Metadata, error) {
	found := map[string]*Metadata{}
	reader := record.GetReader(0)
	defer record.PutReader(reader)
	end := l.EndOffset()
	for offset := l.StartOffset(); offset < end; {
		region, err := l.ReadUpTo(offset, c.cfg.LoadBufferBytes, end)
		if err != nil {
			return nil, err
		}
		data, err := region.Bytes()
		if err != nil {
			return nil, err
		}
		next := offset
		for len(data) >= record.LogOverhead {
			_, size, err := record.PeekSize(data)
			if err != nil || size > len(data) {
				break
			}
			h, err := record.ReadHeader(data)
			if err != nil {
				return nil, err
			}
			if !h.Attributes.Control() {
				it, err := reader.Records(data[:size])
				if err != nil {
					return nil, err
				}
				for it.Next() {
					r := it.Record()
					id, m, err := decode(r.Key, r.Value)
					switch {
					case err != nil:
						c.logger.Warn("skipping a record of "+Topic, "offset", h.BaseOffset+int64(r.OffsetDelta), "err", err)
					case m == nil:
						delete(found, id)
					default:
						found[id] = m
					}
				}
				if err := it.Err(); err != nil {
					return nil, err
				}
			}
			next = h.NextOffset()
			data = data[size:]
		}
		if next == offset {
			return nil, fmt.Errorf("no progress reading from offset %d: a batch larger than transaction.state.log.load.buffer.size (%d)?", offset, c.cfg.LoadBufferBytes)
		}
		offset = next
	}
	return found, nil
}

// Resigned tells the coordinator that this broker no longer leads
// partition p: its ids are forgotten, and writes and markers under way for
// them end without effect.
func (c *Coordinator) Resigned(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.owned[p]; !ok {
		return
	}
	delete(c.owned, p)
	for id, e := range c.txns {
		if e.partition == p {
			delete(c.txns, id)
		}
	}
	c.logger.Info("unloaded transactions", "partition", p)
}

// Owns answers whether this broker coordinates the id: 0, NOT_COORDINATOR
// or COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Owns(id string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.ownerLocked(PartitionFor(id, c.cfg.Partitions))
	return code
}

func (c *Coordinator) ownerLocked(p int32) (*ownership, int16) {
	o := c.owned[p]
	switch {
	case c.closed || o == nil || o.failed:
		return nil, codeNotCoordinator
	case o.loading:
		return nil, codeLoading
	}
	return o, codeNone
}

// appendCode maps a __transaction_state write's error to the answer a
// client gets (Kafka's appendTransactionToLog).
func appendCode(code int16) int16 {
	switch code {
	case 0:
		return 0
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return codeNotAvailable
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return codeNotCoordinator
	}
	return kerr.UnknownServerError.Code
}

// writeLocked starts writing e's next state (next, whose State is the
// target), with e.pending set; it returns the write to run once mu is
// released. then runs with mu held after the write: with 0 once next is
// e's state, or the code to answer (e unchanged). A write whose
// partition changed hands meanwhile answers NOT_COORDINATOR and changes
// nothing: the new leader reads the log.
func (c *Coordinator) writeLocked(e *entry, o *ownership, next Metadata, then func(code int16)) func() {
	state := next.State
	e.pending = &state
	var value []byte
	if state != Dead {
		value = recordValue(&next)
	}
	batch := recordBatch(recordKey(e.ID), value, c.now())
	return func() {
		c.out.Append(e.partition, batch, c.cfg.WriteTimeout, func(code int16) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.owned[e.partition] != o || c.txns[e.ID] != e {
				then(codeNotCoordinator)
				return
			}
			e.pending = nil
			defer wakeLocked(e)
			if code = appendCode(code); code != 0 {
				c.logger.Warn("writing a transaction's state failed", "transactional_id", e.ID, "state", state, "code", code)
				then(code)
				return
			}
			if state == Dead {
				delete(c.txns, e.ID)
			} else {
				e.Metadata = next
			}
			then(0)
		})
	}
}

// later collects what a request runs once mu is released, in order.
type later []func()

func (l *later) add(f func()) {
	if f != nil {
		*l = append(*l, f)
	}
}

func (l later) run() {
	for _, f := range l {
		f()
	}
}

// build 05.H: the transaction coordinator's state machine: InitProducerId and fencing, AddPartitions, EndTxn, markers, timeouts
// tests: TestATransactionCommitsThroughItsStates, TestInitProducerIDFencesAZombieAndAbortsItsTransaction, TestMarkersAreSentAgainUntilWritten, TestRequestsAreChecked, TestATimedOutTransactionIsAbortedAndItsProducerFenced, TestIdleIDsExpireAndListFilters, TestAddPartitionsWaitsForTheLastTransactionsMarkers

// InitRequest is an InitProducerId with a transactional id.
type InitRequest struct {
	ID         string
	Timeout    time.Duration
	ProducerID int64 // -1, or the producer's id and epoch (KIP-360, v3+)
	Epoch      int16
}

// InitProducerID gives the id its producer id and a new epoch (Kafka's
// handleInitProducerId), answering through respond, once, with no lock
// held: a first call allocates a producer id at epoch 0; later ones bump
// the epoch, which fences every producer of an older one; a transaction
// left open is aborted first (under the bumped epoch), and the caller,
// answered CONCURRENT_TRANSACTIONS, retries and gets the epoch after.
func (c *Coordinator) InitProducerID(req InitRequest, respond func(pid int64, epoch int16, code int16)) {
	fail := func(code int16) { respond(-1, -1, code) }
	switch {
	case req.ID == "":
		fail(codeInvalidRequest)
		return
	case req.Timeout <= 0 || req.Timeout > c.cfg.MaxTimeout:
		fail(codeInvalidTimeout)
		return
	case (req.ProducerID < 0) != (req.Epoch < 0):
		fail(codeInvalidRequest)
		return
	}
	p := PartitionFor(req.ID, c.cfg.Partitions)
	// A producer id is taken before the lock when the id may need one
	// (new, or its epoch exhausted): the allocator may wait on ZooKeeper.
	c.mu.Lock()
	e := c.txns[req.ID]
	needID := e == nil || e.Epoch >= maxEpoch
	c.mu.Unlock()
	newID := int64(-1)
	if needID {
		id, err := c.ids.Next()
		if err != nil {
			c.logger.Error("cannot allocate a producer id", "err", err)
			fail(codeNotAvailable)
			return
		}
		newID = id
	}

	var after later
	defer func() { after.run() }() // after, as filled by then; not a copy of it now
	c.mu.Lock()
	defer c.mu.Unlock()
	o, code := c.ownerLocked(p)
	if code != 0 {
		after.add(func() { fail(code) })
		return
	}
	e = c.txns[req.ID]
	if e == nil {
		if newID < 0 {
			after.add(func() { fail(codeConcurrent) }) // created and removed meanwhile: the client retries
			return
		}
		e = &entry{Metadata: Metadata{ID: req.ID, ProducerID: newID, Epoch: -1, LastProducerID: -1, LastEpoch: -1,
			Timeout: req.Timeout, State: Empty, Start: -1, Updated: c.now().UnixMilli()}, partition: p}
		c.txns[req.ID] = e
		newID = -1
	}
	if e.pending != nil {
		after.add(func() { fail(codeConcurrent) })
		return
	}
	if req.ProducerID >= 0 && e.Epoch >= 0 && req.ProducerID != e.ProducerID &&
		!(req.ProducerID == e.LastProducerID && req.Epoch >= maxEpoch) {
		after.add(func() { fail(codeFenced) })
		return
	}
	now := c.now().UnixMilli()
	switch e.State {
	case PrepareCommit, PrepareAbort:
		after.add(func() { fail(codeConcurrent) })
	case Ongoing:
		// Fence the open transaction's producer and abort it under the
		// bumped epoch; the caller retries once it is done.
		next := e.Metadata
		next.Epoch, next.State, next.Updated = e.Epoch+1, PrepareAbort, now
		after.add(c.writeLocked(e, o, next, func(code int16) {
			if code != 0 {
				go fail(code)
				return
			}
			go fail(codeConcurrent)
			go c.completeLocked(e, o, CompleteAbort, false)()
		}))
	default: // Empty, CompleteCommit, CompleteAbort
		next := e.Metadata
		next.State, next.Partitions, next.Start, next.Updated, next.Timeout = Empty, nil, -1, now, req.Timeout
		switch {
		case e.Epoch >= maxEpoch && (req.Epoch < 0 || req.Epoch == e.Epoch):
			if newID < 0 {
				after.add(func() { fail(codeConcurrent) })
				return
			}
			next.LastProducerID, next.ProducerID, next.Epoch = e.ProducerID, newID, 0
			next.LastEpoch = -1
			if req.Epoch >= 0 {
				next.LastEpoch = req.Epoch
			}
		case req.Epoch < 0:
			next.Epoch, next.LastEpoch, next.LastProducerID = e.Epoch+1, -1, -1
		case req.Epoch == e.Epoch || e.Epoch < 0:
			next.Epoch, next.LastEpoch, next.LastProducerID = e.Epoch+1, e.Epoch, -1
		case req.Epoch == e.LastEpoch:
			pid, epoch := e.ProducerID, e.Epoch // a retry of a call that succeeded
			after.add(func() { respond(pid, epoch, 0) })
			return
		default:
			after.add(func() { fail(codeFenced) })
			return
		}
		after.add(c.writeLocked(e, o, next, func(code int16) {
			pid, epoch := next.ProducerID, next.Epoch
			if code != 0 {
				pid, epoch = -1, -1
			}
			go respond(pid, epoch, code)
		}))
	}
}

// maxEpoch is where an epoch is exhausted (Short.MAX_VALUE - 1): the id
// then gets a new producer id at epoch 0.
const maxEpoch = 32766

// checkLocked is the checks AddPartitionsToTxn, AddOffsetsToTxn and
// EndTxn share: the id is coordinated here and loaded, it is this
// producer's, of this epoch, and nothing is under way for it.
func (c *Coordinator) checkLocked(id string, pid int64, epoch int16) (*entry, *ownership, int16) {
	if id == "" {
		return nil, nil, codeInvalidRequest
	}
	o, code := c.ownerLocked(PartitionFor(id, c.cfg.Partitions))
	if code != 0 {
		return nil, nil, code
	}
	e := c.txns[id]
	switch {
	case e == nil || e.ProducerID != pid:
		return nil, nil, codeInvalidMapping
	case e.Epoch != epoch:
		return nil, nil, codeFenced
	case e.pending != nil:
		return e, nil, codeConcurrent
	}
	return e, o, 0
}

// AddPartitions adds partitions to the id's transaction, opening it if
// none is open (Kafka's handleAddPartitionsToTransaction), and answers
// one code for all of them.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []commitlog.TopicPartition, respond func(code int16)) {
	var after later
	defer func() { after.run() }() // after, as filled by then; not a copy of it now
	c.mu.Lock()
	defer c.mu.Unlock()
	e, o, code := c.checkLocked(id, pid, epoch)
	if code == codeConcurrent && (e != nil && e.pending != nil && (*e.pending == CompleteCommit || *e.pending == CompleteAbort)) {
		c.parkLocked(e, func() { c.AddPartitions(id, pid, epoch, parts, respond) }, func() { respond(codeConcurrent) })
		return
	}
	if code != 0 {
		after.add(func() { respond(code) })
		return
	}
	if e.State == PrepareCommit || e.State == PrepareAbort {
		after.add(func() { respond(codeConcurrent) })
		return
	}
	added := slices.Clone(e.Partitions)
	for _, tp := range parts {
		if !slices.Contains(added, tp) {
			added = append(added, tp)
		}
	}
	if e.State == Ongoing && len(added) == len(e.Partitions) {
		after.add(func() { respond(0) })
		return
	}
	sortPartitions(added)
	now := c.now().UnixMilli()
	next := e.Metadata
	next.Partitions, next.State, next.Updated = added, Ongoing, now
	if e.State != Ongoing {
		next.Start = now
	}
	after.add(c.writeLocked(e, o, next, func(code int16) { go respond(code) }))
}

// EndTxn commits or aborts the id's transaction (Kafka's
// endTransaction): it writes the decision, answers once it is in the
// log, and then has the markers written. A retry of an EndTxn that
// completed is answered as it was.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool, respond func(code int16)) {
	var after later
	defer func() { after.run() }() // after, as filled by then; not a copy of it now
	c.mu.Lock()
	defer c.mu.Unlock()
	e, o, code := c.checkLocked(id, pid, epoch)
	if code != 0 {
		after.add(func() { respond(code) })
		return
	}
	switch {
	case e.State == Ongoing:
		next := e.Metadata
		next.State, next.Updated = PrepareAbort, c.now().UnixMilli()
		to := CompleteAbort
		if commit {
			next.State, to = PrepareCommit, CompleteCommit
		}
		after.add(c.writeLocked(e, o, next, func(code int16) {
			go respond(code)
			if code == 0 {
				go c.completeLocked(e, o, to, commit)()
			}
		}))
	case e.State == CompleteCommit && commit, e.State == CompleteAbort && !commit:
		after.add(func() { respond(0) })
	case e.State == PrepareCommit && commit, e.State == PrepareAbort && !commit:
		after.add(func() { respond(codeConcurrent) })
	default:
		after.add(func() { respond(codeInvalidTxnState) })
	}
}

// completeLocked starts the second half of a decided transaction, with
// mu held: e is in PrepareCommit or PrepareAbort (or just written so); its
// pending state becomes to. It returns what to run once mu is released:
// every partition's leader is asked for the marker, again after a backoff
// for those that could not write it yet, and once all have, to is
// written.
func (c *Coordinator) completeLocked(e *entry, o *ownership, to State, commit bool) func() {
	e.pending = &to
	m := record.Marker{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch, Commit: commit, CoordinatorEpoch: o.epoch}
	parts := slices.Clone(e.Partitions)
	return func() { c.sendMarkers(e, o, m, parts, to) }
}

// sendMarkers asks for m on parts and goes on with those that failed.
func (c *Coordinator) sendMarkers(e *entry, o *ownership, m record.Marker, parts []commitlog.TopicPartition, to State) {
	if len(parts) == 0 {
		c.finish(e, o, to)
		return
	}
	c.markers.Write(m, parts, func(codes map[commitlog.TopicPartition]int16) {
		var retry []commitlog.TopicPartition
		for _, tp := range parts {
			switch code := codes[tp]; code {
			case 0:
			case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
				// A newer coordinator or producer epoch wrote there: this
				// coordinator is stale. Stop; the new one completes it.
				c.logger.Warn("a marker was refused as fenced; leaving the transaction to a newer coordinator (it stays pending here until this broker resigns the partition)",
					"transactional_id", e.ID, "partition", tp, "code", code)
				return
			default:
				retry = append(retry, tp)
			}
		}
		if len(retry) == 0 {
			c.finish(e, o, to)
			return
		}
		c.mu.Lock()
		current := c.owned[e.partition] == o && c.txns[e.ID] == e
		c.mu.Unlock()
		if !current {
			return
		}
		c.logger.Debug("resending markers", "transactional_id", e.ID, "partitions", retry)
		time.AfterFunc(c.cfg.MarkerRetryBackoff, func() {
			select {
			case <-c.stop:
			default:
				c.sendMarkers(e, o, m, retry, to)
			}
		})
	})
}

// finish writes CompleteCommit or CompleteAbort once every marker is
// written, and tries again after a backoff if the write fails while this
// broker still coordinates the id.
func (c *Coordinator) finish(e *entry, o *ownership, to State) {
	c.mu.Lock()
	if c.owned[e.partition] != o || c.txns[e.ID] != e {
		c.mu.Unlock()
		return
	}
	next := e.Metadata
	next.State, next.Partitions, next.Updated = to, nil, c.now().UnixMilli()
	write := c.writeLocked(e, o, next, func(code int16) {
		if code == 0 || c.owned[e.partition] != o || c.txns[e.ID] != e {
			return // written, or the partition changed hands: its new leader completes it
		}
		e.pending = &to // the markers are written: only the record is left
		time.AfterFunc(c.cfg.MarkerRetryBackoff, func() {
			select {
			case <-c.stop:
			default:
				c.finish(e, o, to)
			}
		})
	})
	c.mu.Unlock()
	write()
}

// AbortTimedOut aborts every transaction open for longer than its
// timeout, bumping the producer's epoch so that the producer, if alive,
// is fenced (Kafka's abortTimedOutTransactions): it runs every
// transaction.abort.timed.out.transaction.cleanup.interval.ms.
func (c *Coordinator) AbortTimedOut() {
	var after later
	c.mu.Lock()
	now := c.now().UnixMilli()
	for _, e := range c.txns {
		o, code := c.ownerLocked(e.partition)
		if code != 0 || e.pending != nil || e.State != Ongoing || now-e.Start < e.Timeout.Milliseconds() || e.Epoch == math.MaxInt16 {
			continue
		}
		c.logger.Info("aborting a transaction that timed out", "transactional_id", e.ID, "producer_id", e.ProducerID,
			"epoch", e.Epoch, "open_for", time.Duration(now-e.Start)*time.Millisecond, "timeout", e.Timeout)
		next := e.Metadata
		next.Epoch, next.State, next.Updated = e.Epoch+1, PrepareAbort, now
		after.add(c.writeLocked(e, o, next, func(code int16) {
			if code == 0 {
				go c.completeLocked(e, o, CompleteAbort, false)()
			}
		}))
	}
	c.mu.Unlock()
	after.run()
}

// ExpireIDs removes the ids idle (no transaction open) for longer than
// transactional.id.expiration.ms, writing a tombstone for each.
func (c *Coordinator) ExpireIDs() {
	if c.cfg.IDExpiration <= 0 {
		return
	}
	var after later
	c.mu.Lock()
	now := c.now().UnixMilli()
	for _, e := range c.txns {
		o, code := c.ownerLocked(e.partition)
		if code != 0 || e.pending != nil || !Dead.canFollow(e.State) || now-e.Updated < c.cfg.IDExpiration.Milliseconds() {
			continue
		}
		next := e.Metadata
		next.State = Dead
		after.add(c.writeLocked(e, o, next, func(int16) {}))
	}
	c.mu.Unlock()
	after.run()
}

// Describe is one id's state for DescribeTransactions: its metadata, or
// a code (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// TRANSACTIONAL_ID_NOT_FOUND).
func (c *Coordinator) Describe(id string) (Metadata, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		return Metadata{}, codeInvalidRequest
	}
	if _, code := c.ownerLocked(PartitionFor(id, c.cfg.Partitions)); code != 0 {
		return Metadata{}, code
	}
	e := c.txns[id]
	if e == nil {
		return Metadata{}, kerr.TransactionalIDNotFound.Code
	}
	m := e.Metadata
	m.Partitions = slices.Clone(m.Partitions)
	return m, 0
}

// List lists the ids this broker coordinates, filtered by state, producer
// id and how long their transaction has been open (ListTransactions); it
// answers COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
func (c *Coordinator) List(states []State, pids []int64, openFor time.Duration) ([]Metadata, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.owned {
		if o.loading {
			return nil, codeLoading
		}
	}
	now := c.now().UnixMilli()
	var out []Metadata
	for _, id := range slices.Sorted(maps.Keys(c.txns)) {
		e := c.txns[id]
		if o := c.owned[e.partition]; o == nil || o.failed {
			continue
		}
		switch {
		case len(states) > 0 && !slices.Contains(states, e.State),
			len(pids) > 0 && !slices.Contains(pids, e.ProducerID),
			openFor >= 0 && (e.Start < 0 || now-e.Start <= openFor.Milliseconds()):
			continue
		}
		out = append(out, e.Metadata)
	}
	return out, 0
}

// end build
