package producer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// txnBatch appends a transactional batch of n records at *end.
func txnBatch(s *State, end *int64, pid int64, epoch int16, seq int32, n int) {
	s.Append(pid, epoch, Batch{FirstSeq: seq, LastSeq: seq + int32(n) - 1, FirstOffset: *end, LastOffset: *end + int64(n) - 1, Transactional: true})
	*end += int64(n)
}

// The LSO stops at the first offset of the oldest open transaction, moves
// when its marker is appended and the high watermark passes the marker,
// and is never above the high watermark.
func TestTheLastStableOffsetWaitsForOpenTransactions(t *testing.T) {
	s, end := NewState(), int64(100)
	require.Equal(t, int64(100), s.LastStableOffset(100), "no transaction: the high watermark")
	txnBatch(s, &end, 1, 0, 0, 2)              // 100-101
	_, err := appendBatch(s, &end, 9, 0, 0, 3) // 102-104, not transactional
	require.NoError(t, err)
	txnBatch(s, &end, 2, 0, 0, 1) // 105
	txnBatch(s, &end, 1, 0, 2, 1) // 106
	require.Equal(t, int64(100), s.LastStableOffset(end))
	require.Equal(t, map[int64]int64{1: 100, 2: 105}, s.OpenTxns())

	txn, ok := s.Complete(1, 0, true, 0, end, 0) // COMMIT at 107
	require.True(t, ok)
	require.Equal(t, CompletedTxn{ProducerID: 1, FirstOffset: 100, LastOffset: 107}, txn)
	end++
	require.Equal(t, int64(100), s.LastStableOffset(107), "the marker is not replicated yet")
	require.Equal(t, int64(105), s.LastStableOffset(108), "it is: producer 2's transaction holds the LSO now")
	require.Equal(t, int64(105), s.StableAfter(txn))

	txn, ok = s.Complete(2, 0, false, 0, end, 0) // ABORT at 108
	end++
	require.True(t, ok)
	require.True(t, txn.Aborted)
	_, ok = s.Complete(2, 0, false, 0, end, 0) // a marker with nothing open
	end++
	require.False(t, ok)
	require.Equal(t, int64(109), s.StableAfter(txn), "nothing else open: the offset after the marker")
	require.Equal(t, int64(105), s.LastStableOffset(108))
	require.Equal(t, int64(110), s.LastStableOffset(110))
	require.Empty(t, s.OpenTxns())
}

// A producer with an open transaction may not write outside it; a marker
// from an older producer epoch or an older coordinator is refused.
func TestTransactionalChecks(t *testing.T) {
	s, end := NewState(), int64(0)
	require.NoError(t, s.CheckTransactional(1, 0, false), "unknown producer")
	txnBatch(s, &end, 1, 3, 0, 1)
	require.ErrorIs(t, s.CheckTransactional(1, 3, false), ErrInvalidTxnState)
	require.NoError(t, s.CheckTransactional(1, 3, true))
	require.NoError(t, s.CheckMarker(1, 3, 0))
	require.NoError(t, s.CheckMarker(1, 4, 0), "a newer epoch: the coordinator aborts a fenced producer's transaction at the bumped epoch")
	s.Complete(1, 4, false, 5, end, 0)
	end++
	require.ErrorIs(t, s.CheckMarker(1, 3, 5), ErrInvalidProducerEpoch)
	require.ErrorIs(t, s.CheckMarker(1, 4, 4), ErrCoordinatorFenced)
	require.NoError(t, s.CheckTransactional(1, 4, false), "no transaction open")
	_, err := s.Check(1, 4, 0, 0)
	require.NoError(t, err, "the marker's new epoch starts at sequence 0")
	_, err = s.Check(1, 3, 1, 1)
	require.ErrorIs(t, err, ErrInvalidProducerEpoch, "the old epoch is fenced")
}

// A follower's truncation that cuts off a marker opens its transaction
// again; one that cuts off the transaction's first batch forgets it. (A
// truncation never reaches below the high watermark, and a marker is
// remembered until the high watermark passes it.)
func TestTruncationReopensATransactionWhoseMarkerItCuts(t *testing.T) {
	s, end := NewState(), int64(0)
	txnBatch(s, &end, 1, 0, 0, 2)     // 0-1
	txnBatch(s, &end, 2, 0, 0, 2)     // 2-3
	s.Complete(1, 0, true, 0, end, 0) // 4
	end++
	require.Equal(t, int64(0), s.LastStableOffset(4), "the marker is above the high watermark")
	s.TruncateFrom(3)
	require.Equal(t, map[int64]int64{1: 0, 2: 2}, s.OpenTxns())
	s.TruncateFrom(2)
	require.Equal(t, map[int64]int64{1: 0}, s.OpenTxns())
	require.Equal(t, int64(0), s.LastStableOffset(2))
}

// A snapshot keeps an open transaction's first offset and a producer whose
// last word was a marker (no batch of its epoch), with its epochs.
func TestASnapshotKeepsOpenTransactionsAndMarkers(t *testing.T) {
	s, end := NewState(), int64(0)
	txnBatch(s, &end, 1, 0, 0, 2)
	txnBatch(s, &end, 2, 0, 0, 1)
	s.Complete(2, 1, false, 7, end, 1234) // a bumped epoch: no batch of epoch 1
	end++
	r := NewState()
	require.NoError(t, r.LoadSnapshot(s.SnapshotAt(math.MaxInt64)))
	require.Equal(t, map[int64]int64{1: 0}, r.OpenTxns())
	e, ok := r.Entry(2)
	require.True(t, ok)
	require.Equal(t, Entry{ProducerID: 2, Epoch: 1, TxnFirstOffset: -1, CoordinatorEpoch: 7, LastTimestamp: 1234}, e)
	require.ErrorIs(t, r.CheckMarker(2, 0, 7), ErrInvalidProducerEpoch)
	require.Equal(t, int64(0), r.LastStableOffset(end))

	// Below the transaction's first offset, it is the log's to give.
	require.NoError(t, r.LoadSnapshot(s.SnapshotAt(0)))
	require.Empty(t, r.OpenTxns())
}

// An idle producer with an open transaction is not expired: its
// coordinator aborts the transaction first.
func TestAnOpenTransactionIsNotExpired(t *testing.T) {
	s, end := NewState(), int64(0)
	txnBatch(s, &end, 1, 0, 0, 1)
	_, err := appendBatch(s, &end, 2, 0, 0, 1)
	require.NoError(t, err)
	require.Equal(t, 1, s.ExpireBefore(math.MaxInt64))
	_, ok := s.Entry(1)
	require.True(t, ok)
}

// Opening holds the LSO at the log end before a transaction's first batch
// is appended (a fetch woken by the append must not read it as stable);
// the append sets the real first offset, a failed one takes the bound back.
func TestOpeningHoldsTheLSOBeforeTheFirstBatchIsRecorded(t *testing.T) {
	s := NewState()
	undo := s.Opening(1, 0, 50)
	require.Equal(t, int64(50), s.LastStableOffset(60), "held at the log end before the append")
	undo()
	require.Equal(t, int64(60), s.LastStableOffset(60), "the append failed")
	_, ok := s.Entry(1)
	require.False(t, ok, "nothing left of a producer Opening made")

	s.Opening(1, 0, 50)
	end := int64(52) // two plain records landed first
	txnBatch(s, &end, 1, 0, 0, 1)
	require.Equal(t, map[int64]int64{1: 52}, s.OpenTxns(), "the real first offset")
	require.NotPanics(t, func() { s.Opening(1, 0, 99)() }, "open already: nothing to do or undo")
	require.Equal(t, map[int64]int64{1: 52}, s.OpenTxns())
}
