package producer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactions (KIP-98), the producer's side. With transactional.id set:
//
//	InitTransactions          finds the id's coordinator (FindCoordinator
//	                          key type 1) and gets the producer id and a new
//	                          epoch, which fences older producers of the id
//	BeginTransaction          opens a transaction, in this producer only
//	Produce                   a partition's first record of the transaction
//	                          adds the partition (AddPartitionsToTxn) before
//	                          it is appended; every batch is transactional
//	SendOffsetsToTransaction  a consumer group's offsets, committed with the
//	                          transaction (AddOffsetsToTxn, then
//	                          TxnOffsetCommit to the group's coordinator)
//	CommitTransaction         flushes, then EndTxn(commit)
//	AbortTransaction          flushes, then EndTxn(abort)
//
// Kafka's producer adds partitions from its sender thread, batched; this
// one adds a partition from the Produce that first writes to it, which
// waits one round trip to the coordinator: Produce from a callback to a
// partition not yet in the transaction would wait on the goroutine that
// reads the answer, so a callback must not do it. A Produce while Commit
// or Abort flushes answers ErrTransactionEnding (Java: "cannot send in
// state COMMITTING_TRANSACTION").
//
// A record that fails inside a transaction makes it abortable: Commit
// answers ErrAbortableTransaction and the application aborts. A newer
// producer of the same id fences this one (ErrFenced): every call fails
// from then on.

// Errors of the transactional API.
var (
	ErrNotTransactional     = errors.New("producer: no transactional.id")
	ErrNoTransaction        = errors.New("producer: no transaction open (BeginTransaction)")
	ErrTransactionOpen      = errors.New("producer: a transaction is already open")
	ErrAbortableTransaction = errors.New("producer: the transaction cannot commit: abort it")
	ErrFenced               = errors.New("producer: fenced by a newer producer with the same transactional.id")
	ErrTransactionEnding    = errors.New("producer: the transaction is being committed or aborted")
)

// txnState is the producer's transaction. Its mutex serializes the
// transactional calls and the adding of partitions; it is never taken by
// the senders or the callbacks' goroutines.
type txnState struct {
	// gate is held for reading by a Produce from adding its partition to
	// the transaction to appending its record, and for writing by Commit
	// and Abort from their flush to their end: a record cannot land in
	// the log after its transaction's marker (it would open a transaction
	// nothing closes). Taken before mu.
	gate    sync.RWMutex
	mu      sync.Mutex
	open    atomic.Bool    // between Begin and Commit or Abort; read by the senders
	added   map[tpKey]bool // partitions in the open transaction. Protected by mu.
	offsets bool           // a group's offsets were added. Protected by mu.
	fatal   error          // ErrFenced: nothing works any more. Protected by mu.

	coordMu     sync.Mutex // guards coordinator: InitProducerId may run on a sender
	coordinator string     // the coordinator's address; "" to look up

	failedMu sync.Mutex // guards failed: set by callbacks' goroutines
	failed   error      // the first record failure of the open transaction
}

type tpKey struct {
	topic     string
	partition int32
}

// GroupMetadata is what the group coordinator checks of a transactional
// offset commit: the consumer's generation and member id (KIP-447), or
// generation -1 and no member for a commit that names none.
type GroupMetadata struct {
	GroupID    string
	Generation int32
	MemberID   string
	InstanceID *string
}

func (p *Producer) transactional() error {
	if p.cfg.TransactionalID == "" {
		return ErrNotTransactional
	}
	return p.txn.fatal
}

// InitTransactions gets the transactional id's producer id and a new
// epoch from its coordinator, fencing every older producer of the id;
// a transaction an older producer left open is aborted first by the
// coordinator. Call it once, before the first transaction.
func (p *Producer) InitTransactions(ctx context.Context) error {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if err := p.transactional(); err != nil {
		return err
	}
	_, err := p.producerID(ctx)
	return p.txnErr(err)
}

// BeginTransaction opens a transaction: the records produced until
// CommitTransaction or AbortTransaction belong to it.
func (p *Producer) BeginTransaction() error {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if err := p.transactional(); err != nil {
		return err
	}
	if p.txn.open.Load() {
		return ErrTransactionOpen
	}
	if _, err := p.currentID(); err != nil { // lost in the last transaction: a new epoch first
		if _, err := p.producerID(context.Background()); err != nil {
			return p.txnErr(err)
		}
	}
	p.txn.added, p.txn.offsets = map[tpKey]bool{}, false
	p.txn.open.Store(true)
	p.txn.failedMu.Lock()
	p.txn.failed = nil
	p.txn.failedMu.Unlock()
	return nil
}

// addToTxn adds part to the open transaction before its first record is
// appended (Produce).
func (p *Producer) addToTxn(ctx context.Context, part *partition) error {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if err := p.transactional(); err != nil {
		return err
	}
	if !p.txn.open.Load() {
		return ErrNoTransaction
	}
	key := tpKey{part.topic, part.index}
	if p.txn.added[key] {
		return nil
	}
	id, err := p.producerID(ctx)
	if err != nil {
		return p.txnErr(err)
	}
	_, err = p.coordinatorRequest(ctx, func() (kmsg.Request, func(kmsg.Response) error) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.cfg.TransactionalID, id.id, id.epoch
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: part.topic, Partitions: []int32{part.index}}}
		return req, func(resp kmsg.Response) error {
			for _, t := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
				for _, rp := range t.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
						return err
					}
				}
			}
			return nil
		}
	})
	if err != nil {
		return p.txnErr(fmt.Errorf("producer: adding %s-%d to the transaction: %w", part.topic, part.index, err))
	}
	p.txn.added[key] = true
	return nil
}

// SendOffsetsToTransaction commits a consumer group's offsets (the next
// offset to read, by topic and partition) in the open transaction: they
// become the group's committed offsets if, and when, it commits.
func (p *Producer) SendOffsetsToTransaction(ctx context.Context, group GroupMetadata, offsets map[string]map[int32]int64) error {
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if err := p.transactional(); err != nil {
		return err
	}
	if !p.txn.open.Load() {
		return ErrNoTransaction
	}
	id, err := p.producerID(ctx)
	if err != nil {
		return p.txnErr(err)
	}
	if !p.txn.offsets {
		_, err = p.coordinatorRequest(ctx, func() (kmsg.Request, func(kmsg.Response) error) {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.cfg.TransactionalID, id.id, id.epoch, group.GroupID
			return req, func(resp kmsg.Response) error {
				return kerr.ErrorForCode(resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode)
			}
		})
		if err != nil {
			return p.txnErr(fmt.Errorf("producer: adding group %s's offsets to the transaction: %w", group.GroupID, err))
		}
		p.txn.offsets = true
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.cfg.TransactionalID, group.GroupID, id.id, id.epoch
	req.Generation, req.MemberID, req.InstanceID = group.Generation, group.MemberID, group.InstanceID
	for topic, parts := range offsets {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = topic
		for partition, offset := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	err = p.retryCoordinator(ctx, 0, group.GroupID, func(resp kmsg.Response) error {
		for _, t := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("%s-%d: %w", t.Topic, rp.Partition, err)
				}
			}
		}
		return nil
	}, req)
	return p.txnErr(err)
}

// CommitTransaction flushes the transaction's records and commits it. If
// a record failed, it answers ErrAbortableTransaction (wrapping the
// failure): abort then.
func (p *Producer) CommitTransaction(ctx context.Context) error { return p.endTxn(ctx, true) }

// AbortTransaction flushes the transaction's records and aborts it: no
// read_committed consumer ever reads them.
func (p *Producer) AbortTransaction(ctx context.Context) error { return p.endTxn(ctx, false) }

func (p *Producer) endTxn(ctx context.Context, commit bool) error {
	p.txn.gate.Lock()
	defer p.txn.gate.Unlock()
	p.txn.mu.Lock()
	defer p.txn.mu.Unlock()
	if err := p.transactional(); err != nil {
		return err
	}
	if !p.txn.open.Load() {
		return ErrNoTransaction
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	p.txn.failedMu.Lock()
	failed := p.txn.failed
	p.txn.failedMu.Unlock()
	if commit && failed != nil {
		return fmt.Errorf("%w: %w", ErrAbortableTransaction, failed)
	}
	if len(p.txn.added) > 0 || p.txn.offsets {
		id, err := p.currentID()
		if err != nil { // the id was lost in this transaction
			if commit {
				return fmt.Errorf("%w: %w", ErrAbortableTransaction, err)
			}
			// Abort with the id and epoch the transaction was written
			// under, as Java's producer does: the coordinator does not
			// care about lost sequences. The InitProducerId that follows
			// then bumps the epoch of a decided transaction; sent first,
			// it would find the transaction open, fence it, and answer the
			// retry PRODUCER_FENCED.
			p.idMu.Lock()
			id = p.prevID
			p.idMu.Unlock()
		}
		_, err = p.coordinatorRequest(ctx, func() (kmsg.Request, func(kmsg.Response) error) {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.cfg.TransactionalID, id.id, id.epoch, commit
			return req, func(resp kmsg.Response) error { return kerr.ErrorForCode(resp.(*kmsg.EndTxnResponse).ErrorCode) }
		})
		if err != nil {
			return p.txnErr(fmt.Errorf("producer: ending the transaction: %w", err))
		}
	}
	p.txn.added, p.txn.offsets = nil, false
	p.txn.open.Store(false)
	if _, err := p.currentID(); err != nil {
		// Lost in this transaction: InitProducerId with the old id and
		// epoch bumps the epoch, and the coordinator aborts what the old
		// epoch left open.
		if _, err := p.producerID(ctx); err != nil {
			return p.txnErr(err)
		}
	}
	return nil
}

// currentID is the producer id, without asking for one.
func (p *Producer) currentID() (producerID, error) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	if p.id.id < 0 {
		return noProducerID, errors.New("producer: the producer id was lost during the transaction")
	}
	return p.id, nil
}

// txnErr records a fencing as fatal.
func (p *Producer) txnErr(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		p.txn.fatal = fmt.Errorf("%w: %w", ErrFenced, err)
		return p.txn.fatal
	}
	return err
}

// txnRecordFailed makes the open transaction abortable: a record of it
// failed (fail, on a callbacks' goroutine).
func (p *Producer) txnRecordFailed(err error) {
	p.txn.failedMu.Lock()
	if p.txn.failed == nil {
		p.txn.failed = err
	}
	p.txn.failedMu.Unlock()
}

// initTxnProducerID is InitProducerId with the transactional id, sent to
// its coordinator; after a lost sequence, with the previous id and epoch,
// so that the coordinator bumps the epoch (KIP-360).
func (p *Producer) initTxnProducerID(ctx context.Context) (producerID, error) {
	p.idMu.Lock()
	prev := p.prevID
	p.idMu.Unlock()
	if prev.id >= 0 && p.txn.open.Load() {
		// A transaction is open: a new epoch would abort it under the
		// application's feet. Its records fail until it aborts.
		return noProducerID, fmt.Errorf("%w: the producer id was lost in the open transaction", ErrAbortableTransaction)
	}
	var out producerID
	_, err := p.coordinatorRequest(ctx, func() (kmsg.Request, func(kmsg.Response) error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &p.cfg.TransactionalID
		req.TransactionTimeoutMillis = int32(p.cfg.TransactionTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = prev.id, prev.epoch
		if prev.id < 0 {
			req.ProducerID, req.ProducerEpoch = -1, -1
		}
		return req, func(resp kmsg.Response) error {
			r := resp.(*kmsg.InitProducerIDResponse)
			out = producerID{r.ProducerID, r.ProducerEpoch}
			return kerr.ErrorForCode(r.ErrorCode)
		}
	})
	if err != nil {
		return noProducerID, err // the transactional calls record a fencing (txnErr)
	}
	p.logger.Debug("transactional producer id", "transactional_id", p.cfg.TransactionalID, "id", out.id, "epoch", out.epoch)
	return out, nil
}

// coordinatorRequest sends a request to the transaction coordinator:
// build makes it and the function that reads the answer's error. The
// coordinator is looked up again when it moved (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, a dead connection), and the request retried
// while the coordinator is busy (COORDINATOR_LOAD_IN_PROGRESS,
// CONCURRENT_TRANSACTIONS), up to max.block.ms.
func (p *Producer) coordinatorRequest(ctx context.Context, build func() (kmsg.Request, func(kmsg.Response) error)) (kmsg.Response, error) {
	req, check := build()
	var resp kmsg.Response
	err := p.retryCoordinator(ctx, 1, p.cfg.TransactionalID, func(r kmsg.Response) error {
		resp = r
		return check(r)
	}, req)
	return resp, err
}

// retryCoordinator sends req to the coordinator of key (type 0: a group,
// 1: a transactional id) until check accepts the answer, an error is not
// one to retry, or max.block.ms passes.
func (p *Producer) retryCoordinator(ctx context.Context, keyType int8, key string, check func(kmsg.Response) error, req kmsg.Request) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxBlock)
	defer cancel()
	var addr string
	if keyType == 1 {
		p.txn.coordMu.Lock()
		addr = p.txn.coordinator
		p.txn.coordMu.Unlock()
	}
	for attempt := 0; ; attempt++ {
		err := func() error {
			if addr == "" {
				var err error
				if addr, err = p.findCoordinator(ctx, keyType, key); err != nil {
					return err
				}
			}
			rctx, rcancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
			defer rcancel()
			conn, err := p.pool.Conn(rctx, addr)
			if err != nil {
				return err
			}
			resp, err := conn.Request(rctx, classic(req))
			if err != nil {
				return err
			}
			return check(resp)
		}()
		if keyType == 1 {
			p.txn.coordMu.Lock()
			p.txn.coordinator = addr
			p.txn.coordMu.Unlock()
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable), !isKafkaErr(err):
			addr = "" // look it up again
			if keyType == 1 {
				p.txn.coordMu.Lock()
				p.txn.coordinator = ""
				p.txn.coordMu.Unlock()
			}
		case errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions),
			errors.Is(err, kerr.UnstableOffsetCommit):
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("producer: %s to the coordinator of %q: %w (last: %w)", kmsg.NameForKey(req.Key()), key, ctx.Err(), err)
		case <-time.After(min(p.cfg.RetryBackoff, 20*time.Millisecond) << min(attempt, 3)):
		}
	}
}

// classicVersions are the highest versions of the transaction requests
// this producer sends: the flow of KIP-98 (Kafka 0.11 to 3.x). Newer
// versions belong to KIP-890's second part (transaction.version 2: the
// epoch bumped at every EndTxn, partitions added by the brokers), which a
// broker may serve to a client that asks for them.
var classicVersions = map[int16]int16{22: 4, 24: 3, 25: 3, 26: 4, 28: 3}

// capped lowers the highest version Conn negotiates for a request.
type capped struct {
	kmsg.Request
	max int16
}

func (r capped) MaxVersion() int16 { return min(r.max, r.Request.MaxVersion()) }

func classic(req kmsg.Request) kmsg.Request {
	if max, ok := classicVersions[req.Key()]; ok {
		return capped{req, max}
	}
	return req
}

func isKafkaErr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// findCoordinator asks a broker where key's coordinator is.
func (p *Producer) findCoordinator(ctx context.Context, keyType int8, key string) (string, error) {
	m := p.pool.Metadata()
	if m == nil || len(m.Brokers) == 0 {
		p.requestRefresh()
		return "", errors.New("producer: no broker known yet")
	}
	var errs []error
	for _, addr := range m.Brokers {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
		conn, err := p.pool.Conn(rctx, addr)
		if err == nil {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = keyType, key, []string{key}
			var resp kmsg.Response
			if resp, err = conn.Request(rctx, req); err == nil {
				r := resp.(*kmsg.FindCoordinatorResponse)
				code, host, port := r.ErrorCode, r.Host, r.Port
				if len(r.Coordinators) > 0 {
					c := r.Coordinators[0]
					code, host, port = c.ErrorCode, c.Host, c.Port
				}
				if err = kerr.ErrorForCode(code); err == nil {
					cancel()
					return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
				}
			}
		}
		cancel()
		if isKafkaErr(err) {
			return "", err // the coordinator is being chosen: retried
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return "", errors.Join(errs...)
}
