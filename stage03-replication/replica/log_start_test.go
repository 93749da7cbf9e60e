package replica

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// TestDeleteRecordsOnLeaderStopsAtTheHighWatermarkAndWaitsForEveryReplica:
// the leader's log start moves at once, never past the high watermark
// (-1 names it); the low watermark is the smallest log start of the
// replicas on live brokers, learned from their fetches.
func TestDeleteRecordsOnLeaderStopsAtTheHighWatermarkAndWaitsForEveryReplica(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	_, _, err := p.DeleteRecordsOnLeader(0, nil)
	require.ErrorIs(t, err, ErrNotLeader)
	require.NoError(t, p.MakeLeader(leaderState(0, 0, 1, 2)))
	for range 5 {
		_, _, err := p.AppendAsLeader(batch(t, "a", "b"))
		require.NoError(t, err)
	}
	require.NoError(t, p.UpdateFollowerFetchState(1, 10, 0, -1))
	require.NoError(t, p.UpdateFollowerFetchState(2, 6, 0, -1))
	require.Equal(t, int64(6), p.HighWatermark())

	_, _, err = p.DeleteRecordsOnLeader(7, nil)
	require.ErrorIs(t, err, commitlog.ErrOffsetOutOfRange, "past the high watermark")
	_, _, err = p.DeleteRecordsOnLeader(-2, nil)
	require.ErrorIs(t, err, commitlog.ErrOffsetOutOfRange)

	requested, lw, err := p.DeleteRecordsOnLeader(3, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 0}, []int64{requested, lw}, "the followers still start at 0")
	require.Equal(t, int64(3), p.Log.StartOffset())

	require.NoError(t, p.UpdateFollowerFetchState(1, 10, 3, -1))
	lw, err = p.LowWatermark(nil)
	require.NoError(t, err)
	require.Equal(t, int64(0), lw, "broker 2 has not moved yet")
	lw, err = p.LowWatermark(func(id int32) bool { return id != 2 })
	require.NoError(t, err)
	require.Equal(t, int64(3), lw, "a dead broker does not hold it back")
	require.NoError(t, p.UpdateFollowerFetchState(2, 10, 3, -1))
	lw, err = p.LowWatermark(nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), lw)

	requested, _, err = p.DeleteRecordsOnLeader(DeleteRecordsHighWatermark, nil)
	require.NoError(t, err)
	require.Equal(t, int64(10), requested, "-1: the high watermark")
	require.Equal(t, int64(10), p.Log.StartOffset())
}

// TestFollowerCopiesItsLeadersLogStartUpToItsHighWatermark: a follower
// moves its log start to its leader's, from fetch responses, but not past
// what it has of the committed log.
func TestFollowerCopiesItsLeadersLogStartUpToItsHighWatermark(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 1, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}))
	data := batch(t, "a", "b", "c", "d")
	_, err := p.AppendAsFollower(data, 2)
	require.NoError(t, err)
	require.NoError(t, p.MaybeIncrementLogStartOffset(3))
	require.Equal(t, int64(0), p.Log.StartOffset(), "past its high watermark: later")
	require.NoError(t, p.MaybeIncrementLogStartOffset(2))
	require.Equal(t, int64(2), p.Log.StartOffset())
	require.NoError(t, p.MaybeIncrementLogStartOffset(1))
	require.Equal(t, int64(2), p.Log.StartOffset(), "never back")
}
