package commitlog

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetentionMsDeletesExpiredSegments(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionMs = time.Hour
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 30, 2, 100) // old data, several segments
	h.clock.Advance(2 * time.Hour)
	fresh := h.appendBatches(l, 30, 2, 100)
	freshStart := l.EndOffset() - 60

	n, err := l.DeleteOldSegments(math.MaxInt64)
	require.NoError(t, err)
	require.Positive(t, n)
	require.LessOrEqual(t, l.StartOffset(), freshStart, "segments holding fresh data stay")
	got := readAll(t, l, l.StartOffset())
	require.Equal(t, fresh, got[len(got)-len(fresh):])
	_, err = l.Read(0, 100)
	require.ErrorIs(t, err, ErrOffsetOutOfRange, "expired offsets are gone")
}

func TestRetentionRollsAnExpiredActiveSegmentFirst(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RetentionMs = time.Hour
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 5, 2, 100)
	h.clock.Advance(2 * time.Hour)

	n, err := l.DeleteOldSegments(math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(10), l.StartOffset())
	require.Equal(t, int64(10), l.EndOffset(), "the log end offset survives deleting everything")
	first, _, err := l.Append(makeBatch(t, 0, 1, 10, h.clock.Now().UnixMilli()))
	require.NoError(t, err)
	require.Equal(t, int64(10), first)
}

func TestRetentionBytesKeepsTheNewestData(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionBytes = 3 * cfg.SegmentBytes
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 100, 2, 100)
	before := l.Size()

	_, err := l.DeleteOldSegments(math.MaxInt64)
	require.NoError(t, err)
	require.LessOrEqual(t, l.Size(), cfg.RetentionBytes+cfg.SegmentBytes)
	require.Greater(t, l.Size(), cfg.RetentionBytes-cfg.SegmentBytes)
	require.Less(t, l.Size(), before)
	require.Equal(t, int64(200), l.EndOffset())
}

func TestRetentionNeverPassesTheHighWatermark(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionMs = time.Millisecond
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 60, 2, 100)
	h.clock.Advance(time.Hour)
	segs := l.Segments()

	_, err := l.DeleteOldSegments(segs[2].BaseOffset)
	require.NoError(t, err)
	require.Equal(t, segs[2].BaseOffset, l.StartOffset(),
		"segments wholly below the high watermark go; the one holding it stays")
}

func TestDeletedSegmentsWaitOutFileDeleteDelay(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionBytes = 0
	cfg.FileDeleteDelay = 50 * time.Millisecond
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 30, 2, 100)
	region, err := l.Read(0, 100)
	require.NoError(t, err)

	_, err = l.DeleteOldSegments(math.MaxInt64)
	require.NoError(t, err)
	deleted := func() int {
		n := 0
		for _, name := range segmentFiles(t, h.dir) {
			if strings.HasSuffix(name, deletedSuffix) {
				n++
			}
		}
		return n
	}
	require.Positive(t, deleted(), "renamed to .deleted first")
	_, err = region.Bytes()
	require.NoError(t, err, "a read handed out before the deletion still works")

	require.Eventually(t, func() bool { return deleted() == 0 }, 5*time.Second, 5*time.Millisecond)
	_, err = os.Stat(filepath.Join(h.dir, segmentName(0)+logSuffix+deletedSuffix))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestIncrementStartOffsetHidesTheHeadUntilRetentionDeletesIt: DeleteRecords
// on a log. The new start takes effect at once for readers and lookups by
// time; the segments wholly below it go at the next retention pass, whatever
// the retention settings, and the new start survives a restart through the
// log-start-offset checkpoint.
func TestIncrementStartOffsetHidesTheHeadUntilRetentionDeletesIt(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	tp := TopicPartition{"deletes", 0}
	l, err := m.Create(tp, managerConfig().Log)
	require.NoError(t, err)
	for i := range 60 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 1000+int64(i)))
		require.NoError(t, err)
	}
	segs := l.Segments()
	require.Greater(t, len(segs), 3)
	start := segs[2].BaseOffset + 3 // inside a batch of the third segment

	_, err = l.IncrementStartOffset(l.EndOffset() + 1)
	require.ErrorIs(t, err, ErrOffsetOutOfRange, "never past the log end")
	moved, err := l.IncrementStartOffset(start)
	require.NoError(t, err)
	require.True(t, moved)
	require.Equal(t, start, l.StartOffset())
	moved, err = l.IncrementStartOffset(start - 1)
	require.NoError(t, err)
	require.False(t, moved, "the log start never moves back")
	_, err = l.Read(start-1, 1<<20)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	off, _, found, err := l.OffsetForTimestamp(0)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, start, off, "a lookup by time answers nothing before the start")
	require.Len(t, l.Segments(), len(segs), "the files stay until retention runs")

	n, err := l.DeleteOldSegments(0) // a high watermark of 0: only the breach deletes
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, segs[2].BaseOffset, l.Segments()[0].BaseOffset, "the segment holding the start stays")
	require.Equal(t, start, l.StartOffset())

	require.NoError(t, m.Close())
	m = openTestManager(t, dir, managerConfig())
	l, _ = m.Get(tp)
	require.Equal(t, start, l.StartOffset(), "from log-start-offset-checkpoint")
}
