package replica

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEpochCacheAnswersOffsetForLeaderEpoch(t *testing.T) {
	c, err := OpenLeaderEpochCache(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, c.Assign(0, 0))
	require.NoError(t, c.Assign(2, 120))
	require.NoError(t, c.Assign(3, 300))
	const leo = 450
	tests := []struct {
		asked     int32
		epoch     int32
		endOffset int64
	}{
		{0, 0, 120},
		{1, 0, 120}, // epoch 1 never appended: the answer is the epoch below it
		{2, 2, 300},
		{3, 3, leo},                           // the newest epoch ends at the log end
		{9, UndefinedEpoch, UndefinedOffset},  // newer than anything this log has seen
		{-1, UndefinedEpoch, UndefinedOffset}, // no epoch asked
	}
	for _, tt := range tests {
		epoch, end := c.EndOffsetFor(tt.asked, leo)
		require.Equal(t, tt.epoch, epoch, "asked %d", tt.asked)
		require.Equal(t, tt.endOffset, end, "asked %d", tt.asked)
	}
}

func TestEpochCacheAnswersForAnEpochOlderThanItsFirst(t *testing.T) {
	// A leader whose log was rebuilt at epoch 2 from offset 0 is asked about
	// epoch 0: nothing of epoch 0 is in its log, which "ends" at 0.
	c, err := OpenLeaderEpochCache(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, c.Assign(2, 0))
	epoch, end := c.EndOffsetFor(0, 3)
	require.Equal(t, []int64{0, 0}, []int64{int64(epoch), end})
	empty, err := OpenLeaderEpochCache(t.TempDir())
	require.NoError(t, err)
	epoch, end = empty.EndOffsetFor(0, 0)
	require.Equal(t, []int64{int64(UndefinedEpoch), UndefinedOffset}, []int64{int64(epoch), end})
}

func TestEpochCacheIgnoresOlderEpochsAndDropsTruncatedOnes(t *testing.T) {
	c, err := OpenLeaderEpochCache(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, c.Assign(1, 0))
	require.NoError(t, c.Assign(1, 50)) // same epoch: already known
	require.NoError(t, c.Assign(0, 60)) // older epoch: ignored
	require.NoError(t, c.Assign(2, 100))
	require.NoError(t, c.Assign(4, 80)) // epoch 2's start is past 80: it was truncated away
	require.Equal(t, []EpochEntry{{1, 0}, {4, 80}}, c.Entries())
}

func TestEpochCacheTruncation(t *testing.T) {
	c, err := OpenLeaderEpochCache(t.TempDir())
	require.NoError(t, err)
	for _, e := range []EpochEntry{{0, 0}, {1, 100}, {2, 200}, {3, 300}} {
		require.NoError(t, c.Assign(e.Epoch, e.StartOffset))
	}
	require.NoError(t, c.TruncateFromEnd(200))
	require.Equal(t, []EpochEntry{{0, 0}, {1, 100}}, c.Entries())
	require.NoError(t, c.TruncateFromStart(150))
	require.Equal(t, []EpochEntry{{1, 150}}, c.Entries())
	require.NoError(t, c.TruncateFromStart(10))
	require.Equal(t, []EpochEntry{{1, 150}}, c.Entries(), "an earlier start changes nothing")
}

func TestEpochCacheIsKafkasCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenLeaderEpochCache(dir)
	require.NoError(t, err)
	require.NoError(t, c.Assign(0, 0))
	require.NoError(t, c.Assign(5, 1234))
	data, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, "0\n2\n0 0\n5 1234\n", string(data))

	again, err := OpenLeaderEpochCache(dir)
	require.NoError(t, err)
	require.Equal(t, c.Entries(), again.Entries())
	require.Equal(t, int32(5), again.LatestEpoch())
}
