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
