package producer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshotKeepsEachProducersLastBatch(t *testing.T) {
	s := NewState()
	for i := range int64(7) {
		s.Append(3, 1, Batch{FirstSeq: int32(2 * i), LastSeq: int32(2*i + 1), FirstOffset: 10 + 2*i, LastOffset: 11 + 2*i, Timestamp: 1000 + i})
	}
	s.Append(9, 0, Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 30, LastOffset: 30, Timestamp: 2000})
	b := s.SnapshotAt(math.MaxInt64)
	require.Len(t, b, 10+2*46, "a header and 46 bytes a producer")

	r := NewState()
	require.NoError(t, r.LoadSnapshot(b))
	e, ok := r.Entry(3)
	require.True(t, ok)
	require.Equal(t, Entry{ProducerID: 3, Epoch: 1, Batches: []Batch{{FirstSeq: 12, LastSeq: 13, FirstOffset: 22, LastOffset: 23, Timestamp: 1006}},
		TxnFirstOffset: -1, CoordinatorEpoch: -1, LastTimestamp: 1006}, e)
	dup, err := r.Check(3, 1, 12, 13)
	require.NoError(t, err)
	require.Equal(t, int64(22), dup.FirstOffset, "the last batch is still recognized as a duplicate")
	_, err = r.Check(3, 1, 15, 15)
	require.ErrorIs(t, err, ErrOutOfOrderSequence, "and the next sequence is still checked")
	require.Equal(t, 2, r.Len())
}

// TestASnapshotBelowTheLogEndLeavesTheWindowToTheLog: a snapshot at an
// offset keeps each producer's last batch below it and leaves out a
// producer with none; WindowStart is the offset at which the log holds
// every producer's remembered batches.
func TestASnapshotBelowTheLogEndLeavesTheWindowToTheLog(t *testing.T) {
	s := NewState()
	_, ok := s.WindowStart()
	require.False(t, ok, "no producer, no window")
	for i := range int64(7) { // producer 3: offsets 10-23, its window 14-23
		s.Append(3, 1, Batch{FirstSeq: int32(2 * i), LastSeq: int32(2*i + 1), FirstOffset: 10 + 2*i, LastOffset: 11 + 2*i, Timestamp: 1000 + i})
	}
	s.Append(9, 0, Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 30, LastOffset: 30, Timestamp: 2000})
	start, ok := s.WindowStart()
	require.True(t, ok)
	require.Equal(t, int64(14), start, "producer 3's oldest remembered batch")

	r := NewState()
	require.NoError(t, r.LoadSnapshot(s.SnapshotAt(20)))
	require.Equal(t, 1, r.Len(), "producer 9 has no batch below 20")
	e, ok := r.Entry(3)
	require.True(t, ok)
	require.Equal(t, []Batch{{FirstSeq: 8, LastSeq: 9, FirstOffset: 18, LastOffset: 19, Timestamp: 1004}}, e.Batches,
		"the last batch below the snapshot's offset; the log from 20 on gives the rest")
	require.NoError(t, r.LoadSnapshot(s.SnapshotAt(start)))
	require.Zero(t, r.Len(), "at the window's start every remembered batch is the log's to give")
}

func TestACorruptSnapshotIsRefused(t *testing.T) {
	s := NewState()
	s.Append(1, 0, Batch{LastOffset: 5})
	b := s.SnapshotAt(math.MaxInt64)
	for name, bad := range map[string][]byte{
		"flipped bit": append(append([]byte(nil), b[:20]...), append([]byte{b[20] ^ 1}, b[21:]...)...),
		"torn":        b[:len(b)-3],
		"empty":       nil,
		"version 2":   append([]byte{0, 2}, b[2:]...),
	} {
		require.ErrorIs(t, NewState().LoadSnapshot(bad), ErrCorruptSnapshot, name)
	}
	require.Equal(t, "00000000000000012345.snapshot", SnapshotFileName(12345))
}
