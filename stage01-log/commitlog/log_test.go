package commitlog

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

func TestAppendAssignsOffsetsInPlace(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})

	b1 := makeBatch(t, 1, 3, 10, 1000)
	first, last, err := l.Append(b1)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2}, []int64{first, last})

	b2 := makeBatch(t, 2, 5, 10, 1000)
	first, last, err = l.Append(b2)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 7}, []int64{first, last})
	require.Equal(t, int64(8), l.EndOffset())

	hdr, err := record.Validate(b2)
	require.NoError(t, err, "assigning the offset keeps the crc valid")
	require.Equal(t, int64(3), hdr.BaseOffset, "the batch's baseOffset was written in place")
}

func TestReadReturnsRegionFromBatchHoldingOffset(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 10, 4, 50)

	// Offset 13 is the second record of the fourth batch (offsets 12..15):
	// the region starts at that batch, which the reader then skips into.
	r, err := l.Read(13, 1<<20)
	require.NoError(t, err)
	data, err := r.Bytes()
	require.NoError(t, err)
	hdr, err := record.ReadHeader(data)
	require.NoError(t, err)
	require.Equal(t, int64(12), hdr.BaseOffset)
	require.Equal(t, batches[3], data[:hdr.Size()])

	var before int64
	for _, b := range batches[:3] {
		before += int64(len(b))
	}
	require.Equal(t, before, r.Pos, "the region is a file position, not a copy")
}

func TestReadHonoursMaxBytesButReturnsAtLeastOneBatch(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 5, 2, 100)
	size := int64(len(batches[0]))

	r, err := l.Read(0, 10)
	require.NoError(t, err)
	require.Equal(t, size, r.Size, "a batch bigger than maxBytes still comes whole (KIP-74)")

	r, err = l.Read(0, int(size)+10)
	require.NoError(t, err)
	require.Equal(t, size+10, r.Size, "the region may end inside the next batch")
}

func TestReadAtEndIsEmptyAndOutsideIsOutOfRange(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	h.appendBatches(l, 2, 2, 10)

	r, err := l.Read(4, 1000)
	require.NoError(t, err)
	require.Zero(t, r.Size)

	_, err = l.Read(5, 1000)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = l.Read(-1, 1000)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

func TestReadUpToStopsAtTheBound(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 40, 2, 100) // several segments
	require.Greater(t, len(l.Segments()), 2)

	for _, bound := range []int64{0, 2, 10, 30, 46, 80} {
		var got [][]byte
		for off := int64(0); off < bound; {
			r, err := l.ReadUpTo(off, 1<<20, bound)
			require.NoError(t, err)
			data, err := r.Bytes()
			require.NoError(t, err)
			for len(data) > 0 {
				hdr, err := record.Validate(data)
				require.NoError(t, err, "bound %d: a bounded region holds whole batches", bound)
				require.Less(t, hdr.LastOffset(), bound)
				got = append(got, data[:hdr.Size()])
				off = hdr.NextOffset()
				data = data[hdr.Size():]
			}
		}
		if bound == 0 {
			require.Empty(t, got)
		} else {
			require.Equal(t, batches[:bound/2], got, "bound %d", bound)
		}
		r, err := l.ReadUpTo(bound, 1<<20, bound)
		require.NoError(t, err)
		require.Zero(t, r.Size, "nothing is readable at the bound")
	}
}

func TestAppendRefusesBadBatchesAndWritesNothing(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	h.appendBatches(l, 1, 1, 10)
	size := l.Size()

	bad := makeBatch(t, 9, 2, 10, 0)
	bad[len(bad)-1] ^= 0xff
	_, _, err := l.Append(bad)
	require.ErrorIs(t, err, record.ErrCRCMismatch)

	two := append(makeBatch(t, 1, 1, 10, 0), makeBatch(t, 2, 1, 10, 0)...)
	_, _, err = l.Append(two)
	require.ErrorIs(t, err, record.ErrInvalidRecord, "a leader append takes exactly one batch")

	require.Equal(t, size, l.Size())
	require.Equal(t, int64(1), l.EndOffset())
}

// TestAppendRefusesBatchLargerThanSegment: a batch larger than
// segment.bytes could never fit in a segment (Kafka's UnifiedLog.append:
// RecordBatchTooLargeException, which a broker answers with
// RECORD_LIST_TOO_LARGE); one of exactly segment.bytes fits. The refused
// one writes nothing.
func TestAppendRefusesBatchLargerThanSegment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 200
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	_, _, err := l.Append(makeBatch(t, 0, 1, 300, 0))
	require.ErrorIs(t, err, ErrBatchTooLarge)
	require.Zero(t, l.Size())
	require.Zero(t, l.EndOffset())

	var exact []byte
	for size := 10; len(exact) < 200; size++ { // varint lengths: grow the value until the batch is 200 bytes
		exact = makeBatch(t, 1, 1, size, 0)
	}
	require.Len(t, exact, 200)
	_, _, err = l.Append(exact)
	require.NoError(t, err, "a batch of exactly segment.bytes fits")
}

func TestAppendAsLeaderStampsEpoch(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	_, _, err := l.AppendAsLeader(makeBatch(t, 0, 2, 10, 0), 7)
	require.NoError(t, err)
	hdr, err := l.batchAt(0)
	require.NoError(t, err)
	require.Equal(t, int32(7), hdr.PartitionLeaderEpoch)
}

func TestAppendAsFollowerKeepsOffsetsAndRefusesGapsBackwards(t *testing.T) {
	leader := newLogHarness(t, DefaultConfig()).open(Options{})
	var data []byte
	for i := range 3 {
		b := makeBatch(t, i, 2, 10, 0)
		_, _, err := leader.AppendAsLeader(b, 4)
		require.NoError(t, err)
		data = append(data, b...)
	}

	follower := newLogHarness(t, DefaultConfig()).open(Options{})
	first, last, err := follower.AppendAsFollower(data)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 5}, []int64{first, last})
	require.Equal(t, readAll(t, leader, 0), readAll(t, follower, 0))

	_, _, err = follower.AppendAsFollower(data[:len(data)/3])
	require.ErrorIs(t, err, ErrUnexpectedOffset, "offsets 0..1 are already in the log")

	// A batch whose last offset overflows int64 (its base offset is not
	// covered by the CRC) would take the log end offset negative.
	wraps := makeBatch(t, 9, 2, 10, 0)
	record.SetBaseOffset(wraps, math.MaxInt64)
	_, _, err = follower.AppendAsFollower(wraps)
	require.ErrorIs(t, err, record.ErrInvalidRecord)
	require.Equal(t, int64(6), follower.EndOffset())
}

func TestRollOnSegmentBytes(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 60, 2, 100)

	segs := l.Segments()
	require.Greater(t, len(segs), 3)
	for _, s := range segs {
		require.LessOrEqual(t, s.Size, h.cfg.SegmentBytes)
	}
	for i := 1; i < len(segs); i++ {
		require.Greater(t, segs[i].BaseOffset, segs[i-1].BaseOffset)
	}
	require.Equal(t, segs[len(segs)-1].BaseOffset, l.ActiveBaseOffset())
	require.Equal(t, batches, readAll(t, l, 0))
}

func TestRollOnSegmentMs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentMs = time.Hour
	h := newLogHarness(t, cfg)
	l := h.open(Options{})

	h.appendBatches(l, 2, 1, 10)
	require.Len(t, l.Segments(), 1)
	h.clock.Advance(59 * time.Minute)
	h.appendBatches(l, 1, 1, 10)
	require.Len(t, l.Segments(), 1, "younger than segment.ms")
	h.clock.Advance(2 * time.Minute)
	h.appendBatches(l, 1, 1, 10)
	require.Len(t, l.Segments(), 2, "the first batch is older than segment.ms")
	require.Equal(t, int64(3), l.Segments()[1].BaseOffset)
}

func TestSegmentMsCountsBatchTimestampsNotTheWallClock(t *testing.T) {
	h := newLogHarness(t, DefaultConfig()) // segment.ms is 7 days
	l := h.open(Options{})
	old := h.clock.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	for i := range 5 {
		_, _, err := l.Append(makeBatch(t, i, 1, 10, old+int64(i)))
		require.NoError(t, err)
	}
	require.Len(t, l.Segments(), 1, "a month-old timestamp is not a reason to roll on every append")
	_, _, err := l.Append(makeBatch(t, 9, 1, 10, old+8*24*3600*1000))
	require.NoError(t, err)
	require.Len(t, l.Segments(), 2, "eight days between the first batch and this one")
}

func TestRollWhenIndexIsFull(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1    // an entry after (nearly) every batch
	cfg.SegmentIndexBytes = 8 * 4 // room for four offset index entries
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	batches := h.appendBatches(l, 20, 1, 10)
	require.Greater(t, len(l.Segments()), 3)
	require.Equal(t, batches, readAll(t, l, 0))
}

func TestTruncateToRemovesTailAcrossSegments(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 60, 2, 100)
	require.Greater(t, len(l.Segments()), 3)

	end, err := l.TruncateTo(31) // inside the batch 30..31: it goes too
	require.NoError(t, err)
	require.Equal(t, int64(30), end)
	require.Equal(t, int64(30), l.EndOffset())
	require.Equal(t, batches[:15], readAll(t, l, 0))
	for _, s := range l.Segments() {
		require.Less(t, s.BaseOffset, int64(30))
	}

	more := h.appendBatches(l, 5, 2, 100)
	require.Equal(t, append(batches[:15:15], more...), readAll(t, l, 0), "the log continues at the truncation point")
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	cfg := smallConfig()
	cfg.FileDeleteDelay = 20 * time.Millisecond
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 20, 2, 100)
	require.NoError(t, l.TruncateFullyAndStartAt(1000))
	require.Equal(t, int64(1000), l.StartOffset())
	require.Equal(t, int64(1000), l.EndOffset())
	first, _, err := l.Append(makeBatch(t, 0, 1, 10, 0))
	require.NoError(t, err)
	require.Equal(t, int64(1000), first)
	require.Len(t, l.Segments(), 1)
	// The old segments wait out file.delete.delay.ms as .deleted files.
	require.Eventually(t, func() bool {
		return slices.Equal([]string{"00000000000000001000.index", "00000000000000001000.log",
			"00000000000000001000.timeindex"}, segmentFiles(t, h.dir))
	}, 10*time.Second, 5*time.Millisecond)
}

// TestTruncationLetsAResponseInFlightFinish: a fetch response may still be
// sending from a segment when a follower truncates it away. Kafka renames
// the segment and removes it file.delete.delay.ms later, so the response
// completes; the region stays readable until then.
func TestTruncationLetsAResponseInFlightFinish(t *testing.T) {
	cfg := smallConfig()
	cfg.FileDeleteDelay = time.Hour
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 30, 2, 100)
	segs := l.Segments()
	require.Greater(t, len(segs), 2)
	last := segs[len(segs)-1].BaseOffset
	region, err := l.Read(last, 1<<20) // a response about to be written
	require.NoError(t, err)
	want, err := region.Bytes()
	require.NoError(t, err)

	_, err = l.TruncateTo(segs[1].BaseOffset)
	require.NoError(t, err)
	require.NoError(t, l.TruncateFullyAndStartAt(5000))
	got, err := region.Bytes()
	require.NoError(t, err, "the truncated segment's file must stay open until file.delete.delay.ms")
	require.Equal(t, want, got)
	require.Contains(t, segmentFiles(t, h.dir), segmentName(last)+".log.deleted")

	// Close removes what is still waiting.
	require.NoError(t, l.Close())
	for _, f := range segmentFiles(t, h.dir) {
		require.NotContains(t, f, ".deleted")
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	for i := range 40 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, int64(1000+10*i))) // batch i at ts 1000+10i
		require.NoError(t, err)
	}
	tests := []struct{ ts, offset, timestamp int64 }{
		{0, 0, 1000},
		{1000, 0, 1000},
		{1001, 2, 1010},
		{1205, 42, 1210},
		{1390, 78, 1390},
	}
	for _, tt := range tests {
		off, ts, found, err := l.OffsetForTimestamp(tt.ts)
		require.NoError(t, err)
		require.True(t, found, "ts %d", tt.ts)
		require.Equal(t, tt.offset, off, "ts %d", tt.ts)
		require.Equal(t, tt.timestamp, ts, "ts %d", tt.ts)
	}
	_, _, found, err := l.OffsetForTimestamp(1391)
	require.NoError(t, err)
	require.False(t, found)
}

// TestOffsetForTimestampFindsTheRecordNotTheBatch: records of one batch
// carry their own timestamps, not necessarily in order. Kafka answers with
// the first record (in offset order) whose timestamp reaches the target,
// and that record's timestamp, also inside compressed batches.
func TestOffsetForTimestampFindsTheRecordNotTheBatch(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batch := func(first int64, codec record.Codec, logAppendTime bool, deltas ...int64) {
		b := record.NewBatch(first)
		for i, d := range deltas {
			b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: d, Value: []byte("v")})
		}
		b.Attributes = b.Attributes.WithCodec(codec)
		if logAppendTime {
			b.Attributes |= 0x08
		}
		data, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		_, _, err = l.Append(data)
		require.NoError(t, err)
	}
	batch(1000, record.CodecNone, false, 0, 30, 10, 50) // offsets 0-3 at 1000, 1030, 1010, 1050
	batch(2000, record.CodecGzip, false, 0, 5, 10)      // offsets 4-6 at 2000, 2005, 2010
	batch(3000, record.CodecZstd, true, 0, 20)          // offsets 7-8, both at the batch's 3020
	tests := []struct{ ts, offset, timestamp int64 }{
		{1000, 0, 1000},
		{1020, 1, 1030}, // batch level would say offset 0
		{1031, 3, 1050}, // offset 2 (1010) comes after 1 but is older
		{1051, 4, 2000},
		{2003, 5, 2005}, // inside a compressed batch
		{3001, 7, 3020}, // LogAppendTime: every record has the batch's time
	}
	check := func(tests []struct{ ts, offset, timestamp int64 }) {
		t.Helper()
		for _, tt := range tests {
			off, ts, found, err := l.OffsetForTimestamp(tt.ts)
			require.NoError(t, err)
			require.True(t, found, "ts %d", tt.ts)
			require.Equal(t, tt.offset, off, "ts %d", tt.ts)
			require.Equal(t, tt.timestamp, ts, "ts %d", tt.ts)
		}
	}
	check(tests)
	_, _, found, err := l.OffsetForTimestamp(3021)
	require.NoError(t, err)
	require.False(t, found)

	// The log start offset falls inside the first batch: offsets before it
	// are not answers.
	require.NoError(t, l.Close())
	l = h.open(Options{CleanShutdown: true, LogStartOffset: 2})
	check([]struct{ ts, offset, timestamp int64 }{{0, 2, 1010}, {1020, 3, 1050}})
}

// TestOffsetForMaxTimestampFindsTheNewestRecordNotTheLast: ListOffsets
// MAX_TIMESTAMP (-3) on records produced with timestamps out of order: the
// record with the largest timestamp, wherever it is (an older segment, the
// middle of a compressed batch), the first of equals; a LogAppendTime
// batch's first record; and only at or after the log start offset.
func TestOffsetForMaxTimestampFindsTheNewestRecordNotTheLast(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	_, _, found, err := l.OffsetForMaxTimestamp()
	require.NoError(t, err)
	require.False(t, found, "an empty log has none")
	batch := func(first int64, codec record.Codec, logAppendTime bool, deltas ...int64) {
		b := record.NewBatch(first)
		for i, d := range deltas {
			b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: d, Value: bytes.Repeat([]byte("v"), 300)})
		}
		b.Attributes = b.Attributes.WithCodec(codec)
		if logAppendTime {
			b.Attributes |= 0x08
		}
		data, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		_, _, err = l.Append(data)
		require.NoError(t, err)
	}
	check := func(offset, timestamp int64) {
		t.Helper()
		off, ts, found, err := l.OffsetForMaxTimestamp()
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, []int64{offset, timestamp}, []int64{off, ts})
	}
	batch(1000, record.CodecGzip, false, 0, 90, 10, 90) // offsets 0-3: 1000, 1090, 1010, 1090
	check(1, 1090)                                      // the first of the two
	for range 20 {                                      // older records, several segments on
		batch(500, record.CodecNone, false, 0, 1)
	}
	require.Greater(t, len(l.Segments()), 2)
	check(1, 1090)
	batch(5000, record.CodecNone, true, 0, 0) // LogAppendTime: both at 5000
	end := l.EndOffset()
	check(end-2, 5000)

	_, err = l.IncrementStartOffset(end - 1)
	require.NoError(t, err)
	check(end-1, 5000)
	_, err = l.IncrementStartOffset(end)
	require.NoError(t, err)
	_, _, found, err = l.OffsetForMaxTimestamp()
	require.NoError(t, err)
	require.False(t, found, "nothing at or after the log start")
	batch(700, record.CodecNone, false, 0)
	check(end, 700)
}

// TestReadsAndAppendsDoNotWaitForAFlush holds every fsync until the test
// lets it go: meanwhile reads (of the segment being flushed too), appends,
// a roll and a timestamp lookup must all complete.
func TestReadsAndAppendsDoNotWaitForAFlush(t *testing.T) {
	release := make(chan struct{})
	inSync := make(chan struct{}, 64)
	syncFile = func(f *os.File) error {
		select {
		case inSync <- struct{}{}:
		default:
		}
		<-release
		return f.Sync()
	}
	t.Cleanup(func() { syncFile = (*os.File).Sync })
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }

	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	t.Cleanup(unblock)             // after open's cleanup was registered, so it runs first: Close must not meet a held fsync
	h.appendBatches(l, 30, 2, 100) // several segments; their flushes are held too
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	<-inSync

	done := make(chan error, 1)
	go func() {
		for i := range 50 {
			if _, err := l.Read(int64(i), 1<<20); err != nil {
				done <- err
				return
			}
			if _, _, err := l.Append(makeBatch(t, 100+i, 2, 100, 0)); err != nil {
				done <- err
				return
			}
		}
		if err := l.Roll(); err != nil {
			done <- err
			return
		}
		_, _, _, err := l.OffsetForTimestamp(0)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("reads and appends waited for an fsync")
	}
	unblock()
	require.NoError(t, <-flushed)
}

func TestFlushMessagesMovesRecoveryPoint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FlushMessages = 10
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 4, 2, 10)
	require.Equal(t, int64(0), l.RecoveryPoint(), "8 unflushed records: below flush.messages")
	h.appendBatches(l, 1, 2, 10)
	require.Equal(t, int64(10), l.RecoveryPoint())
}

func TestDefaultFlushPolicyLeavesDataToPageCacheUntilRoll(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	h.appendBatches(l, 2, 2, 100)
	require.Equal(t, int64(0), l.RecoveryPoint(), "no fsync per append by default")

	h.appendBatches(l, 30, 2, 100) // rolls several times
	active := l.Segments()[len(l.Segments())-1].BaseOffset
	require.Eventually(t, func() bool { return l.RecoveryPoint() == active }, 5*time.Second, time.Millisecond,
		"a roll flushes the old segments in the background and moves the recovery point")
}

func TestReopenAfterCleanCloseKeepsEverything(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 30, 2, 100)
	require.NoError(t, l.Close())

	l = h.open(Options{CleanShutdown: true})
	require.Equal(t, int64(60), l.EndOffset())
	require.Equal(t, batches, readAll(t, l, 0))
	more := h.appendBatches(l, 3, 2, 100)
	require.Equal(t, append(batches, more...), readAll(t, l, 0))
}

func TestClosedLogRefusesWork(t *testing.T) {
	h := newLogHarness(t, DefaultConfig())
	l := h.open(Options{})
	require.NoError(t, l.Close())
	_, _, err := l.Append(makeBatch(t, 0, 1, 1, 0))
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Read(0, 10)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, l.Close(), "closing twice is harmless")
}

// Appends, reads, rolls, retention and flushes at once; run with -race.
func TestConcurrentAppendsAndReads(t *testing.T) {
	cfg := smallConfig()
	cfg.RetentionBytes = 64 << 10
	cfg.FileDeleteDelay = time.Millisecond
	h := newLogHarness(t, cfg)
	l := h.open(Options{})

	const batches = 400
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.appendBatches(l, batches, 2, 100)
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.EndOffset() < 2*batches {
				off := l.StartOffset()
				r, err := l.Read(off, 8192)
				if err != nil {
					require.ErrorIs(t, err, ErrOffsetOutOfRange) // retention moved the start
					continue
				}
				if r.Size == 0 {
					continue
				}
				if data, err := r.Bytes(); err == nil {
					_, err = record.Validate(data)
					require.NoError(t, err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for l.EndOffset() < 2*batches {
			_, err := l.DeleteOldSegments(math.MaxInt64)
			require.NoError(t, err)
			require.NoError(t, l.Flush())
		}
	}()
	wg.Wait()
	require.Equal(t, int64(2*batches), l.EndOffset())
}

// TestADeletedSegmentLeavesItsSuccessorsIndexAlone: a follower truncates
// its log fully and starts again at the base offset of its old active
// segment, so the new segment takes the file names of one still waiting
// out file.delete.delay.ms. When the old one finally closes, it must not
// trim the new one's index by name: that cut the new active index (mapped
// at 10 MiB) to the old one's zero entries, and the next index entry died
// of SIGBUS.
func TestADeletedSegmentLeavesItsSuccessorsIndexAlone(t *testing.T) {
	cfg := smallConfig()
	cfg.FileDeleteDelay = 20 * time.Millisecond
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 30, 2, 100)
	require.NoError(t, l.Roll())
	active := l.EndOffset()
	_, _, err := l.Append(makeBatch(t, 99, 1, 10, 0)) // one small batch: no index entry yet
	require.NoError(t, err)
	require.NoError(t, l.TruncateFullyAndStartAt(active))
	require.Eventually(t, func() bool {
		for _, f := range segmentFiles(t, h.dir) {
			if strings.HasSuffix(f, ".deleted") {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the old segments' files are removed")
	h.appendBatches(l, 30, 2, 100) // index entries into the new active segment
	require.Len(t, readAll(t, l, active), 30)
}
