package producer

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Errors of Check, each a Kafka error code.
var (
	// ErrOutOfOrderSequence: the batch's first sequence does not follow
	// the producer's last (OUT_OF_ORDER_SEQUENCE_NUMBER, 45), or a new
	// epoch does not start at 0.
	ErrOutOfOrderSequence = errors.New("producer: out of order sequence number")
	// ErrInvalidProducerEpoch: the batch's epoch is older than the
	// producer's (INVALID_PRODUCER_EPOCH, 47): a zombie producer.
	ErrInvalidProducerEpoch = errors.New("producer: producer epoch is older than the current one")
)

// Kafka's sentinels for "none".
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// BatchesKept is how many of a producer's last batches a partition
// remembers: the most a producer may have in flight (Kafka's
// ProducerStateEntry.NumBatchesToRetain; max.in.flight.requests.per.connection
// must be at most 5 for idempotence).
const BatchesKept = 5

// build 04.F: the producer state: each producer's last batches, the sequence rules, duplicates
// tests: TestARetriedBatchIsADuplicateAnsweredWithItsOffsets, TestSequenceRules, TestSequencesWrapAtMaxInt32, TestAnUnknownProducerIsAcceptedAtAnySequence, TestRetentionAndTruncationForgetBatches, TestFollowersBuildTheSameState, TestIdleProducersExpire

// Batch is what a partition remembers of one appended batch.
type Batch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	Timestamp               int64 // the batch's max timestamp
	// Transactional: the batch belongs to a transaction, which it opens
	// if the producer has none open in the partition (txn.go).
	Transactional bool
}

// Entry is one producer's state in a partition.
type Entry struct {
	ProducerID int64
	Epoch      int16
	// Batches are the last BatchesKept batches, oldest first. Invariant:
	// consecutive in sequence, all of Epoch. None when the producer's last
	// word here was a transaction marker of a newer epoch.
	Batches []Batch
	// TxnFirstOffset is the first offset of the producer's open
	// transaction in the partition, or -1 (Kafka's currentTxnFirstOffset).
	TxnFirstOffset int64
	// CoordinatorEpoch is the epoch of the coordinator that wrote the
	// producer's last marker here, or -1.
	CoordinatorEpoch int32
	// LastTimestamp is the newest timestamp of its batches and markers:
	// an idle producer expires by it.
	LastTimestamp int64
	// opening: TxnFirstOffset is a lower bound set by Opening, before the
	// transaction's first batch is in the log.
	opening bool
}

// LastSeq is the sequence of the producer's last record, or NoSequence.
func (e *Entry) LastSeq() int32 {
	if len(e.Batches) == 0 {
		return NoSequence
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// duplicate returns the remembered batch with exactly this sequence range.
func (e *Entry) duplicate(epoch int16, firstSeq, lastSeq int32) (Batch, bool) {
	if epoch != e.Epoch {
		return Batch{}, false
	}
	for _, b := range e.Batches {
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return b, true
		}
	}
	return Batch{}, false
}

// InSequence reports whether next follows last: last+1, wrapping from
// MaxInt32 to 0 as Kafka's sequences do.
func InSequence(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// State is one partition's producer state. It is safe for concurrent use;
// the leader calls Check and Append under the lock that orders its appends,
// so that the check and the append it allows are one step.
type State struct {
	// appendMu makes a leader's Check, its log append and its Append one
	// step (Serialize); mu guards the map.
	appendMu  sync.Mutex
	mu        sync.Mutex
	producers map[int64]*Entry // Protected by mu.
	// unreplicated are the transactions closed by markers the high
	// watermark has not passed yet: they still hold the LSO (txn.go).
	// Protected by mu.
	unreplicated []CompletedTxn
	// open maps each producer with an open transaction to its first
	// offset: Entry.TxnFirstOffset, indexed. Protected by mu.
	open map[int64]int64
}

// setTxn opens (first >= 0) or closes (-1) e's transaction. Called with
// mu held.
func (s *State) setTxn(e *Entry, first int64) {
	e.TxnFirstOffset = first
	if first >= 0 {
		s.open[e.ProducerID] = first
	} else {
		delete(s.open, e.ProducerID)
	}
}

// Serialize runs f, which checks a batch, appends it to the log and
// records it, with no other Serialize running: two retries of one batch
// arriving on two connections must not both pass Check (Kafka holds the
// log's lock across the same steps).
func (s *State) Serialize(f func()) {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	f()
}

// NewState returns an empty state.
func NewState() *State { return &State{producers: map[int64]*Entry{}, open: map[int64]int64{}} }

// Check decides whether a producer's batch may be appended, as Kafka's
// Log.analyzeAndValidateProducerState and ProducerAppendInfo do for a
// client's batch (chapter 4, "Idempotence (part 2)", has the rules). A
// retry of a batch the partition remembers is returned: the caller answers
// with its offsets and appends nothing. A refusal is
// ErrInvalidProducerEpoch or ErrOutOfOrderSequence.
func (s *State) Check(pid int64, epoch int16, firstSeq, lastSeq int32) (dup *Batch, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// exercise 04.6: check an idempotent producer's batch against what the partition remembers
	// hint: a retry is recognised before any rule is applied; then the epoch decides which sequence may come next (chapter 4's table)
	// tests: TestSequenceRules, TestARetriedBatchIsADuplicateAnsweredWithItsOffsets, TestSequencesWrapAtMaxInt32, TestAnUnknownProducerIsAcceptedAtAnySequence, TestRetentionAndTruncationForgetBatches
	e, ok := s.producers[pid]
	if !ok {
		return nil, nil
	}
	if b, ok := e.duplicate(epoch, firstSeq, lastSeq); ok {
		return &b, nil
	}
	switch {
	case epoch < e.Epoch:
		return nil, fmt.Errorf("%w: producer %d sent epoch %d, the partition has seen %d", ErrInvalidProducerEpoch, pid, epoch, e.Epoch)
	case epoch > e.Epoch:
		if firstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d's new epoch %d starts at sequence %d, not 0", ErrOutOfOrderSequence, pid, epoch, firstSeq)
		}
	case e.LastSeq() != NoSequence && !InSequence(e.LastSeq(), firstSeq):
		return nil, fmt.Errorf("%w: producer %d sent sequence %d after %d", ErrOutOfOrderSequence, pid, firstSeq, e.LastSeq())
	}
	return nil, nil
	// end exercise
}

// Append records an appended batch: by the leader after Check allowed it,
// by a follower for every batch it copies, and when the state is rebuilt
// from the log. A newer epoch starts the producer's window afresh.
func (s *State) Append(pid int64, epoch int16, b Batch) {
	if pid == NoProducerID {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	if ok && len(e.Batches) > 0 && b.LastOffset <= e.Batches[len(e.Batches)-1].LastOffset {
		return // already recorded: a snapshot taken while appends went on, then the log read after it
	}
	if !ok {
		e = &Entry{ProducerID: pid, Epoch: epoch, TxnFirstOffset: -1, CoordinatorEpoch: -1}
		s.producers[pid] = e
	}
	if epoch > e.Epoch {
		e.Epoch, e.Batches = epoch, nil
	}
	if b.Transactional && (e.TxnFirstOffset < 0 || e.opening) {
		s.setTxn(e, b.FirstOffset)
		e.opening = false
	}
	e.LastTimestamp = max(e.LastTimestamp, b.Timestamp)
	e.Batches = append(e.Batches, b)
	if len(e.Batches) > BatchesKept {
		e.Batches = append(e.Batches[:0], e.Batches[len(e.Batches)-BatchesKept:]...)
	}
}

// TruncateFrom forgets the batches at or after offset, when the log is
// truncated there (a follower diverging from its leader, KIP-101); a
// producer left with none is forgotten. A transaction whose marker is cut
// off is open again, one whose first batch is cut off is not.
func (s *State) TruncateFrom(offset int64) {
	s.mu.Lock()
	kept := s.unreplicated[:0]
	for _, t := range s.unreplicated {
		if t.LastOffset < offset {
			kept = append(kept, t)
		} else if e, ok := s.producers[t.ProducerID]; ok && t.FirstOffset < offset {
			s.setTxn(e, t.FirstOffset)
		}
	}
	clear(s.unreplicated[len(kept):])
	s.unreplicated = kept
	for pid, first := range s.open {
		if first >= offset {
			s.setTxn(s.producers[pid], -1)
		}
	}
	s.mu.Unlock()
	s.forget(func(b Batch) bool { return b.LastOffset >= offset })
}

// RemoveBefore forgets the batches that end before the log's new start,
// when retention deleted them; a producer left with none is forgotten, and
// its next batch is accepted at any sequence.
func (s *State) RemoveBefore(logStart int64) {
	s.forget(func(b Batch) bool { return b.LastOffset < logStart })
}

func (s *State) forget(drop func(Batch) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, e := range s.producers {
		kept := e.Batches[:0]
		for _, b := range e.Batches {
			if !drop(b) {
				kept = append(kept, b)
			}
		}
		e.Batches = kept
		if len(kept) == 0 && e.TxnFirstOffset < 0 {
			delete(s.producers, pid)
		}
	}
}

// ExpireBefore forgets the producers whose last batch's timestamp is
// older than cutoff (ms): Kafka expires a producer id that has been idle for
// transactional.id.expiration.ms (7 days; producer.id.expiration.ms, one
// day, from 3.4), so that the state of producers long gone does not grow
// without end. A producer that comes back is accepted at any sequence. It
// returns how many it forgot.
func (s *State) ExpireBefore(cutoff int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for pid, e := range s.producers {
		if e.LastTimestamp < cutoff && e.TxnFirstOffset < 0 { // an open transaction is aborted by its coordinator, not forgotten
			delete(s.producers, pid)
			n++
		}
	}
	return n
}

// WindowStart is the first offset of the oldest batch any producer's
// window holds: the lowest offset a retry may still be answered from. It
// reports false when no producer is known.
func (s *State) WindowStart() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start, ok := int64(math.MaxInt64), false
	for _, e := range s.producers {
		if len(e.Batches) > 0 {
			start, ok = min(start, e.Batches[0].FirstOffset), true
		}
	}
	return start, ok
}

// Entry returns a copy of a producer's state.
func (s *State) Entry(pid int64) (Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.producers[pid]
	if !ok {
		return Entry{}, false
	}
	out := *e
	out.Batches = append([]Batch(nil), e.Batches...)
	return out, true
}

// Len is the number of producers the partition knows.
func (s *State) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.producers)
}

// end build
