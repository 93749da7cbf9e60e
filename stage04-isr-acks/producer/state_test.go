package producer

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendBatch checks and appends a batch of n records starting at seq, at
// the log end *end, as a leader does; it returns Check's answer.
func appendBatch(s *State, end *int64, pid int64, epoch int16, seq int32, n int) (*Batch, error) {
	last := int32((int64(seq) + int64(n) - 1) % (math.MaxInt32 + 1)) // sequences wrap to 0
	dup, err := s.Check(pid, epoch, seq, last)
	if dup != nil || err != nil {
		return dup, err
	}
	s.Append(pid, epoch, Batch{FirstSeq: seq, LastSeq: last, FirstOffset: *end, LastOffset: *end + int64(n) - 1})
	*end += int64(n)
	return nil, nil
}

func TestARetriedBatchIsADuplicateAnsweredWithItsOffsets(t *testing.T) {
	s, end := NewState(), int64(100)
	for seq := int32(0); seq < 30; seq += 3 {
		dup, err := appendBatch(s, &end, 7, 0, seq, 3)
		require.NoError(t, err)
		require.Nil(t, dup)
	}
	// The last five batches (sequences 15-29) are remembered.
	dup, err := appendBatch(s, &end, 7, 0, 18, 3)
	require.NoError(t, err)
	require.Equal(t, &Batch{FirstSeq: 18, LastSeq: 20, FirstOffset: 118, LastOffset: 120}, dup)
	require.Equal(t, int64(130), end, "nothing appended twice")

	_, err = appendBatch(s, &end, 7, 0, 12, 3)
	require.ErrorIs(t, err, ErrOutOfOrderSequence, "older than the five kept: not known to be a duplicate")
}

func TestSequenceRules(t *testing.T) {
	tests := []struct {
		name    string
		epoch   int16
		seq     int32
		wantErr error
	}{
		{"the next sequence", 3, 10, nil},
		{"a gap", 3, 11, ErrOutOfOrderSequence},
		{"going back", 3, 5, ErrOutOfOrderSequence},
		{"an older epoch (a zombie)", 2, 10, ErrInvalidProducerEpoch},
		{"a newer epoch from 0", 4, 0, nil},
		{"a newer epoch not from 0", 4, 10, ErrOutOfOrderSequence},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, end := NewState(), int64(0)
			_, err := appendBatch(s, &end, 1, 3, 0, 10) // sequences 0-9 at epoch 3
			require.NoError(t, err)
			_, err = appendBatch(s, &end, 1, tt.epoch, tt.seq, 1)
			if tt.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.wantErr)
			}
		})
	}
}

func TestSequencesWrapAtMaxInt32(t *testing.T) {
	require.True(t, InSequence(math.MaxInt32, 0))
	require.True(t, InSequence(4, 5))
	require.False(t, InSequence(4, 6))
	s := NewState()
	s.Append(1, 0, Batch{FirstSeq: math.MaxInt32 - 1, LastSeq: math.MaxInt32})
	dup, err := s.Check(1, 0, 0, 4)
	require.NoError(t, err)
	require.Nil(t, dup)
}

func TestAnUnknownProducerIsAcceptedAtAnySequence(t *testing.T) {
	s, end := NewState(), int64(0)
	_, err := appendBatch(s, &end, 9, 0, 42, 1)
	require.NoError(t, err, "KIP-360: no state, no sequence to check against")
	_, err = appendBatch(s, &end, 9, 0, 44, 1)
	require.ErrorIs(t, err, ErrOutOfOrderSequence, "but once known, it is checked")
}

func TestRetentionAndTruncationForgetBatches(t *testing.T) {
	s, end := NewState(), int64(0)
	for seq := int32(0); seq < 5; seq++ {
		_, err := appendBatch(s, &end, 1, 0, seq, 1) // offsets 0-4
		require.NoError(t, err)
	}
	s.TruncateFrom(3) // a follower cut its log at 3
	e, ok := s.Entry(1)
	require.True(t, ok)
	require.Equal(t, int32(2), e.LastSeq(), "the batches at 3 and 4 are gone")
	dup, err := s.Check(1, 0, 3, 3)
	require.NoError(t, err)
	require.Nil(t, dup, "so sequence 3 is new again, not a duplicate")

	s.RemoveBefore(3) // retention deleted everything the producer wrote
	require.Zero(t, s.Len())
	_, err = s.Check(1, 0, 77, 77)
	require.NoError(t, err, "forgotten: accepted at any sequence")
}

func TestFollowersBuildTheSameState(t *testing.T) {
	leader, follower, end := NewState(), NewState(), int64(0)
	for seq := int32(0); seq < 20; seq += 2 {
		_, err := appendBatch(leader, &end, 5, 1, seq, 2)
		require.NoError(t, err)
		follower.Append(5, 1, Batch{FirstSeq: seq, LastSeq: seq + 1, FirstOffset: end - 2, LastOffset: end - 1})
	}
	l, _ := leader.Entry(5)
	f, _ := follower.Entry(5)
	require.Equal(t, l, f, "a follower that becomes leader deduplicates the same retries")
	require.Len(t, f.Batches, BatchesKept)
}

func TestIdleProducersExpire(t *testing.T) {
	s := NewState()
	s.Append(1, 0, Batch{LastOffset: 1, Timestamp: 1_000})
	s.Append(2, 0, Batch{LastOffset: 2, Timestamp: 5_000})
	require.Equal(t, 1, s.ExpireBefore(2_000))
	_, ok := s.Entry(1)
	require.False(t, ok, "idle since 1,000: forgotten")
	_, ok = s.Entry(2)
	require.True(t, ok)
}
