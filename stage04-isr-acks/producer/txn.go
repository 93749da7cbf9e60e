package producer

import (
	"errors"
	"fmt"
	"maps"
)

// Transactions, the partition's side (KIP-98; Kafka's ProducerStateManager
// with its ongoing and unreplicated transactions). A transactional
// producer's first batch in a partition opens a transaction there; the
// coordinator's marker (a control batch, COMMIT or ABORT) closes it. While
// one is open, every reader with isolation_level=read_committed stops at
// its first offset: the last stable offset (LSO) is the smallest first
// offset of the transactions still open, or whose markers the followers
// have not all copied yet, and at most the high watermark.
//
//	offsets   100  101  102  103  104  105  106
//	batches   P1   x    P1   P2   x    P1c  P2
//	                                   ^ P1's COMMIT marker
//	open:     P2 from 103          LSO = min(103, HW)
//
// A transaction closed by ABORT becomes an entry of the aborted
// transaction index (commitlog.AbortedTxn): a read_committed fetch hands
// those entries to its consumer, which drops the producer's records from
// the first offset up to the marker.

// Errors of the transactional checks, each a Kafka error code.
var (
	// ErrInvalidTxnState: a producer with a transaction open in the
	// partition sent a batch that is not transactional (INVALID_TXN_STATE,
	// 48).
	ErrInvalidTxnState = errors.New("producer: a non-transactional batch from a producer with an open transaction")
	// ErrCoordinatorFenced: a marker from a coordinator older than the
	// one that wrote the producer's last marker
	// (TRANSACTION_COORDINATOR_FENCED, 52).
	ErrCoordinatorFenced = errors.New("producer: marker from a fenced transaction coordinator")
)

// CompletedTxn is a transaction closed by a marker.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64 // its first record
	LastOffset  int64 // the marker's offset
	Aborted     bool
}

// build 04.I: the partition's transactions: open ones, markers, the last stable offset
// tests: TestTheLastStableOffsetWaitsForOpenTransactions, TestTransactionalChecks, TestTruncationReopensATransactionWhoseMarkerItCuts, TestASnapshotKeepsOpenTransactionsAndMarkers, TestAnOpenTransactionIsNotExpired, TestOpeningHoldsTheLSOBeforeTheFirstBatchIsRecorded

// CheckTransactional refuses a data batch that does not fit the producer's
// transaction: a non-transactional batch while the producer has one open
// (Kafka's ProducerAppendInfo.updateCurrentTxnFirstOffset).
func (s *State) CheckTransactional(pid int64, epoch int16, transactional bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	if !ok || transactional || e.TxnFirstOffset < 0 || epoch != e.Epoch {
		return nil
	}
	return fmt.Errorf("%w: producer %d has had a transaction open since offset %d", ErrInvalidTxnState, pid, e.TxnFirstOffset)
}

// CheckEpoch refuses a batch of an older epoch than the producer's
// (ErrInvalidProducerEpoch), for a coordinator's write, which has no
// sequence to check (Kafka's AppendOrigin.COORDINATOR).
func (s *State) CheckEpoch(pid int64, epoch int16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.producers[pid]; ok && epoch < e.Epoch {
		return fmt.Errorf("%w: producer %d sent epoch %d, the partition has seen %d", ErrInvalidProducerEpoch, pid, epoch, e.Epoch)
	}
	return nil
}

// Opening holds the LSO at offset (the log end) for a transaction of pid
// about to open with a batch being appended, before the append: the
// append may move the high watermark at once (an ISR of the leader alone)
// and wake a read_committed fetch before Append records the transaction,
// which would then read the batch as stable. Append sets the real first
// offset; undo, if the append failed, takes the bound back. Nothing
// happens if pid has a transaction open.
func (s *State) Opening(pid int64, epoch int16, offset int64) (undo func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	if ok && e.TxnFirstOffset >= 0 {
		return func() {}
	}
	if !ok {
		e = &Entry{ProducerID: pid, Epoch: epoch, TxnFirstOffset: -1, CoordinatorEpoch: -1}
		s.producers[pid] = e
	}
	s.setTxn(e, offset)
	e.opening = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.producers[pid] != e || !e.opening {
			return
		}
		s.setTxn(e, -1)
		e.opening = false
		if !ok && len(e.Batches) == 0 {
			delete(s.producers, pid)
		}
	}
}

// CheckMarker decides whether a leader may append a marker of this
// producer epoch from a coordinator of this epoch (Kafka's
// ProducerAppendInfo.appendEndTxnMarker): an older producer epoch is
// ErrInvalidProducerEpoch, an older coordinator ErrCoordinatorFenced.
func (s *State) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	switch {
	case !ok:
		return nil
	case epoch < e.Epoch:
		return fmt.Errorf("%w: marker for producer %d at epoch %d, the partition has seen %d", ErrInvalidProducerEpoch, pid, epoch, e.Epoch)
	case coordinatorEpoch < e.CoordinatorEpoch:
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, the partition has seen %d", ErrCoordinatorFenced, pid, coordinatorEpoch, e.CoordinatorEpoch)
	}
	return nil
}

// Complete closes the producer's transaction with its marker, appended at
// offset, and returns it (false if the producer had none open here: the
// marker is in the log all the same, and changes nothing but the epochs):
// on the leader after the marker's append, on a follower for every marker
// it copies, and when the state is rebuilt from the log. A marker of a
// newer epoch moves the producer to it (its next batch starts at sequence
// 0). The transaction stays unstable (it holds the LSO) until the high
// watermark passes its marker.
func (s *State) Complete(pid int64, epoch int16, commit bool, coordinatorEpoch int32, offset, timestamp int64) (CompletedTxn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	if !ok {
		e = &Entry{ProducerID: pid, Epoch: epoch, TxnFirstOffset: -1, CoordinatorEpoch: -1}
		s.producers[pid] = e
	}
	if epoch > e.Epoch {
		e.Epoch, e.Batches = epoch, nil
	}
	e.CoordinatorEpoch = max(e.CoordinatorEpoch, coordinatorEpoch)
	e.LastTimestamp = max(e.LastTimestamp, timestamp)
	if e.TxnFirstOffset < 0 {
		return CompletedTxn{}, false
	}
	txn := CompletedTxn{ProducerID: pid, FirstOffset: e.TxnFirstOffset, LastOffset: offset, Aborted: !commit}
	s.setTxn(e, -1)
	s.unreplicated = append(s.unreplicated, txn)
	return txn, true
}

// LastStableOffset is the offset below which every transaction is decided
// and its marker replicated, as of the high watermark hw (Kafka's
// UnifiedLog.lastStableOffset). It forgets the closed transactions that no
// longer hold it back.
func (s *State) LastStableOffset(hw int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	// exercise 04.7: the last stable offset: where read_committed consumers stop
	// hint: a transaction holds the LSO at its first offset while it is open, and after its marker until the high watermark passes the marker
	// tests: TestTheLastStableOffsetWaitsForOpenTransactions, TestTruncationReopensATransactionWhoseMarkerItCuts, ./cluster.TestReadCommittedReadsOnlyCommittedTransactions
	kept := s.unreplicated[:0]
	for _, t := range s.unreplicated {
		if t.LastOffset >= hw {
			kept = append(kept, t)
		}
	}
	clear(s.unreplicated[len(kept):])
	s.unreplicated = kept
	lso := hw
	for _, t := range s.unreplicated {
		lso = min(lso, t.FirstOffset)
	}
	for _, first := range s.open {
		lso = min(lso, first)
	}
	return lso
	// end exercise
}

// StableAfter is the LSO to record with an aborted transaction that just
// closed: the first offset of the oldest other transaction still unstable,
// or the marker's offset + 1 (Kafka's
// ProducerStateManager.lastStableOffset(completedTxn)). A read_committed
// fetch stops collecting aborted transactions once an entry's LSO reaches
// the end of what it read.
func (s *State) StableAfter(txn CompletedTxn) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	lso := txn.LastOffset + 1
	for _, t := range s.unreplicated {
		if t.ProducerID != txn.ProducerID {
			lso = min(lso, t.FirstOffset)
		}
	}
	for pid, first := range s.open {
		if pid != txn.ProducerID {
			lso = min(lso, first)
		}
	}
	return lso
}

// OpenTxns lists the transactions open in the partition: producer id to
// first offset (DescribeProducers' currentTxnStartOffset).
func (s *State) OpenTxns() map[int64]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.open)
}

// end build
