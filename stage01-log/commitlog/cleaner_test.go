package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

func TestCleanerKeepsTheLatestValueOfEachKey(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.fill(300, 5, 20) // 15 versions of each of 20 keys, over several segments
	h.roll()
	before := consume(t, h.l)
	require.Len(t, before, 300)
	require.Greater(t, len(h.l.Segments()), 3)

	stats := h.clean()
	require.True(t, stats.Cleaned)
	require.Equal(t, h.tp, stats.Partition)
	require.Equal(t, int64(0), stats.FirstDirtyOffset)
	require.Equal(t, int64(300), stats.EndOffset, "the checkpoint moves to the end of the cleaned range")
	require.Equal(t, 20, stats.KeysMapped)
	require.Equal(t, int64(20), stats.RecordsKept)

	after := consume(t, h.l)
	require.Len(t, after, 20, "one record per key")
	require.Equal(t, table(before), table(after), "a consumer rebuilds the same table")
	for i, r := range after {
		require.Equal(t, int64(280+i), r.offset, "each key's latest record, at its own offset")
	}
	require.Equal(t, int64(0), h.l.StartOffset(), "the log start offset does not move")
	require.Equal(t, int64(300), h.l.EndOffset())

	// A second round finds nothing dirty.
	require.False(t, h.clean().Cleaned)
}

func TestCleanerKeepsOffsetGapsAndReadsFindTheNextRecord(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.produce(put("a", "1"), put("b", "1"), put("c", "1"))
	h.produce(put("a", "2"), put("b", "2"))
	h.produce(put("d", "1"))
	h.roll()
	h.clean()
	got := consume(t, h.l)
	require.Equal(t, []consumed{{offset: 2, key: "c", value: "1"}, {offset: 3, key: "a", value: "2"},
		{offset: 4, key: "b", value: "2"}, {offset: 5, key: "d", value: "1"}}, got)
	r, err := h.l.Read(0, 1<<20) // offsets 0 and 1 are gone: the read starts at the batch that holds 2
	require.NoError(t, err)
	data, err := r.Bytes()
	require.NoError(t, err)
	first, err := record.Validate(data)
	require.NoError(t, err)
	require.Equal(t, int64(0), first.BaseOffset, "a rebuilt batch keeps its base offset")
	require.Equal(t, int32(2), first.LastOffsetDelta, "and its last offset")
	require.Equal(t, int32(1), first.NumRecords)
}

func TestCleanerDropsKeylessRecords(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.produce(put("a", "1"), kv{value: []byte("no key")}, put("b", "1"))
	h.roll()
	h.clean()
	require.Equal(t, []consumed{{offset: 0, key: "a", value: "1"}, {offset: 2, key: "b", value: "1"}}, consume(t, h.l))
}

// uniqueKeys produces n records with keys no other record has, ten a batch.
func (h *cleanerHarness) uniqueKeys(prefix string, n int) {
	for i := 0; i < n; i += 10 {
		var recs []kv
		for j := i; j < min(i+10, n); j++ {
			recs = append(recs, put(fmt.Sprintf("%s-%d", prefix, j), "a value of some thirty bytes.."))
		}
		h.produce(recs...)
	}
}

func hasTombstone(records []consumed, key string) bool {
	for _, r := range records {
		if r.key == key && r.tombstone {
			return true
		}
	}
	return false
}

func TestCleanerKeepsTombstonesForDeleteRetention(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetention = time.Hour
	h := newCleanerHarness(t, cfg)

	// Segment A at t0: "dead" is written, other keys, then "dead" deleted.
	h.produce(put("dead", "alive"))
	h.uniqueKeys("a", 50)
	h.produce(tombstone("dead"))
	h.roll()
	h.cleanPartition()
	got := consume(t, h.l)
	require.True(t, hasTombstone(got, "dead"), "the first cleaning has no clean part yet: every tombstone stays")
	require.NotContains(t, table(got), "dead")
	require.Len(t, got, 51, "the value the tombstone deletes is gone")

	// 30 minutes later, segment B. The clean part's newest segment is A
	// (modified at t0): the horizon is t0 - 1h, and A is newer.
	h.clock.Advance(30 * time.Minute)
	h.uniqueKeys("b", 50)
	h.roll()
	h.cleanPartition()
	require.True(t, hasTombstone(consume(t, h.l), "dead"), "kept: within delete.retention.ms")

	// At t0+2h, segment C. The clean part ends with B (t0+30m): the horizon
	// t0-30m is still before A.
	h.clock.Advance(90 * time.Minute)
	h.uniqueKeys("c", 50)
	h.roll()
	h.cleanPartition()
	require.True(t, hasTombstone(consume(t, h.l), "dead"), "kept: the clean part is not yet an hour newer than A")

	// Segment D. The clean part ends with C (t0+2h): the horizon t0+1h is
	// past A's t0, so A's tombstone goes.
	h.uniqueKeys("d", 50)
	h.roll()
	h.cleanPartition()
	got = consume(t, h.l)
	require.False(t, hasTombstone(got, "dead"), "dropped once delete.retention.ms passed")
	require.Len(t, got, 200)
}

func TestCleanerLeavesTheActiveSegmentAndTheHighWatermarkAlone(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.fill(400, 5, 20) // no roll: the active segment holds records too
	segs := h.l.Segments()
	require.Greater(t, len(segs), 4)
	hwSegment := segs[3].BaseOffset
	h.hw.Store(hwSegment + 3) // inside segment 3
	before := segmentBytes(t, h.l)
	recordsBefore := consume(t, h.l)

	stats := h.cleanPartition()
	require.True(t, stats.Cleaned)
	require.Equal(t, hwSegment, stats.EndOffset, "the range ends at the segment holding the high watermark")
	after := segmentBytes(t, h.l)
	for base, data := range before {
		if base >= hwSegment {
			require.Equal(t, data, after[base], "segment %d at or above the high watermark's is untouched", base)
		}
	}
	require.Less(t, len(after[0]), len(before[0]), "the segments below were rewritten")
	recordsAfter := consume(t, h.l)
	var tailBefore, tailAfter []consumed
	for _, r := range recordsBefore {
		if r.offset >= hwSegment {
			tailBefore = append(tailBefore, r)
		}
	}
	for _, r := range recordsAfter {
		if r.offset >= hwSegment {
			tailAfter = append(tailAfter, r)
		}
	}
	require.Equal(t, tailBefore, tailAfter)
	for key, n := range keysBelow(recordsAfter, hwSegment) {
		require.Equal(t, 1, n, "below the cleaned range's end, key %s appears once", key)
	}
	require.Less(t, len(recordsAfter), len(recordsBefore))
}

func TestCleanerWaitsForTheDirtyRatioOrMaxCompactionLag(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.uniqueKeys("k", 200)
	h.roll()
	require.True(t, h.clean().Cleaned, "all dirty: ratio 1")

	h.fill(20, 5, 20) // a little dirt over a lot of clean
	h.roll()
	files := segmentBytes(t, h.l)
	stats := h.clean()
	require.False(t, stats.Cleaned, "below min.cleanable.dirty.ratio 0.5")
	require.Equal(t, files, segmentBytes(t, h.l), "nothing rewritten")

	cfg := h.l.Config()
	cfg.MaxCompactionLag = time.Hour
	h.l.SetConfig(cfg)
	require.False(t, h.clean().Cleaned, "the dirty records are not an hour old yet")
	h.clock.Advance(2 * time.Hour)
	require.True(t, h.clean().Cleaned, "max.compaction.lag.ms passed: cleaned whatever the ratio")
}

func TestCleanerRespectsMinCompactionLag(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCompactionLag = time.Hour
	h := newCleanerHarness(t, cfg)
	h.fill(100, 5, 10)
	h.roll()
	require.False(t, h.clean().Cleaned, "every segment is younger than min.compaction.lag.ms")
	h.clock.Advance(2 * time.Hour)
	require.True(t, h.clean().Cleaned)
	require.Len(t, consume(t, h.l), 10)
}

func TestCleanerKeepsEachBatchsCodec(t *testing.T) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			h := newCleanerHarness(t, compactConfig())
			for i := range 10 {
				b := record.NewBatch(h.clock.Now().UnixMilli())
				b.Attributes = b.Attributes.WithCodec(codec)
				h.produceBatch(b, put(fmt.Sprintf("own-%d", i), "kept"), put("shared", fmt.Sprint(i)), put(fmt.Sprintf("own2-%d", i), "kept"))
			}
			h.roll()
			h.clean()
			batches := headers(t, readBatches(t, h.l))
			require.Len(t, batches, 10)
			for i, bh := range batches {
				require.Equal(t, codec, bh.Attributes.Codec(), "batch %d keeps its codec", i)
				require.Equal(t, int64(3*i), bh.BaseOffset)
				require.Equal(t, int32(2), bh.LastOffsetDelta, "the last offset stays")
				if i < 9 {
					require.Equal(t, int32(2), bh.NumRecords, "the shared key's old value is gone")
				}
			}
			require.Len(t, consume(t, h.l), 21)
		})
	}
}

func TestCleanerKeepsIdempotentProducerFields(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	idem := func(pid int64, epoch int16, seq int32) *record.Batch {
		b := record.NewBatch(h.clock.Now().UnixMilli())
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, seq
		b.PartitionLeaderEpoch = 4
		return b
	}
	h.produceBatch(idem(7, 3, 0), put("own", "kept"), put("x", "old"), put("y", "old")) // partly kept
	h.produceBatch(idem(8, 1, 0), put("z", "old"))                                      // emptied, not producer 8's last: dropped
	h.produceBatch(idem(8, 1, 1), put("z", "old2"))                                     // emptied, producer 8's last: kept empty
	h.produceBatch(record.NewBatch(h.clock.Now().UnixMilli()), put("x", "new"), put("y", "new"), put("z", "new"))
	h.roll()
	h.clean()

	batches := headers(t, readBatches(t, h.l))
	require.Len(t, batches, 3)
	first := batches[0]
	require.Equal(t, int64(0), first.BaseOffset)
	require.Equal(t, int32(2), first.LastOffsetDelta, "the producer's last sequence stays at base + 2")
	require.Equal(t, int32(1), first.NumRecords)
	require.Equal(t, []any{int64(7), int16(3), int32(0), int32(4)},
		[]any{first.ProducerID, first.ProducerEpoch, first.BaseSequence, first.PartitionLeaderEpoch})

	empty := batches[1]
	require.Equal(t, int64(4), empty.BaseOffset)
	require.Equal(t, int32(0), empty.NumRecords, "an empty batch keeps producer 8's last sequence")
	require.Equal(t, []any{int64(8), int16(1), int32(1), int32(4)},
		[]any{empty.ProducerID, empty.ProducerEpoch, empty.BaseSequence, empty.PartitionLeaderEpoch})
	require.Equal(t, int64(-1), empty.FirstTimestamp)
	require.Equal(t, int64(5), batches[2].BaseOffset)
	require.Equal(t, map[string]string{"own": "kept", "x": "new", "y": "new", "z": "new"}, table(consume(t, h.l)))
}

func TestCleanerTakesSeveralRoundsWithASmallDedupeBuffer(t *testing.T) {
	big := newCleanerHarness(t, compactConfig())
	big.fill(300, 5, 50)
	big.roll()
	big.clean()
	want := consume(t, big.l)

	h := newCleanerHarness(t, compactConfig())
	h.cfg.CleanerDedupeBufferSize = 12 * offsetMapEntryBytes // 10 keys at the load factor
	h.restart()
	h.fill(300, 5, 50)
	h.roll()
	rounds := 0
	for {
		stats := h.cleanPartition()
		if !stats.Cleaned {
			break
		}
		rounds++
		require.LessOrEqual(t, stats.KeysMapped, 10)
		require.Less(t, rounds, 100)
	}
	require.Greater(t, rounds, 1)
	require.Equal(t, want, consume(t, h.l), "the same result as one round with a big map")
}

func TestCleanerCheckpointSurvivesARestart(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.fill(100, 5, 10)
	h.roll()
	require.True(t, h.clean().Cleaned)
	h.restart()
	points, err := ReadOffsetCheckpoint(filepath.Join(h.dir, CleanerOffsetCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{h.tp: 100}, points)
	require.False(t, h.clean().Cleaned, "nothing dirty after the restart")
	h.fill(100, 5, 10)
	h.roll()
	stats := h.clean()
	require.True(t, stats.Cleaned)
	require.Equal(t, int64(100), stats.FirstDirtyOffset)
	require.Len(t, consume(t, h.l), 10)
}

func TestRetentionSkipsCompactOnlyLogs(t *testing.T) {
	cfg := compactConfig()
	cfg.RetentionMs = time.Hour
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 30, 2, 100)
	h.clock.Advance(2 * time.Hour)
	n, err := l.DeleteOldSegments(l.EndOffset())
	require.NoError(t, err)
	require.Zero(t, n, "cleanup.policy=compact: retention.ms does not apply")
	require.Equal(t, int64(0), l.StartOffset())

	cfg.CleanupPolicy = CleanupCompact | CleanupDelete
	l.SetConfig(cfg)
	n, err = l.DeleteOldSegments(l.EndOffset())
	require.NoError(t, err)
	require.Positive(t, n, "compact,delete: it does")
}

func TestCleanerAbortsWhenTheLogIsTruncated(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.fill(300, 5, 20)
	h.roll()
	h.fill(20, 5, 20)
	swapTestHook = func(step, dir string) {
		if step == "cleaned" {
			_, err := h.l.TruncateTo(150) // a follower's truncation, while the cleaner writes
			require.NoError(t, err)
		}
	}
	t.Cleanup(func() { swapTestHook = nil })
	stats := h.clean()
	swapTestHook = nil
	require.False(t, stats.Cleaned, "the round gives up")
	for _, name := range segmentFiles(t, h.l.Dir()) {
		require.NotContains(t, name, cleanedSuffix)
		require.NotContains(t, name, swapSuffix)
	}
	got := consume(t, h.l)
	require.Len(t, got, 150, "every record below the truncation point is still there")
	require.Equal(t, int64(149), got[len(got)-1].offset)
}

func TestCleanerCrashAtEachStepRecovers(t *testing.T) {
	for _, step := range []string{"cleaned", "swap", "deleted"} {
		t.Run(step, func(t *testing.T) {
			h := newCleanerHarness(t, compactConfig())
			for i := range 15 { // small segments: the cleaner merges several into one
				h.fill(20, 5, 20)
				h.produce(put(fmt.Sprintf("unique-%d", i), "kept")) // each segment keeps a record
				h.roll()
			}
			before := consume(t, h.l)
			end, segmentsBefore := h.l.EndOffset(), len(h.l.Segments())
			var crashed string
			swapTestHook = func(s, dir string) {
				if s == step && crashed == "" {
					crashed = copyDir(t, dir)
				}
			}
			t.Cleanup(func() { swapTestHook = nil })
			require.True(t, h.clean().Cleaned)
			swapTestHook = nil
			after := consume(t, h.l)
			require.NotEmpty(t, crashed)
			names := strings.Join(segmentFiles(t, crashed), " ")
			switch step {
			case "cleaned":
				require.Contains(t, names, logSuffix+cleanedSuffix)
			case "swap":
				require.Contains(t, names, logSuffix+swapSuffix)
				require.Contains(t, names, "00000000000000000000.log ", "the old segments are all there")
			case "deleted":
				require.Contains(t, names, logSuffix+swapSuffix)
				require.Contains(t, names, "00000000000000000000.log.deleted")
			}

			// Open the copy as after a crash, trusting everything below the
			// end (the worst case for the swapped-in segment: no recovery
			// scan, its indexes rebuilt when first read).
			l, err := Open(crashed, compactConfig(), Options{Logger: quietLogger, RecoveryPoint: end})
			require.NoError(t, err)
			defer l.Close()
			for _, name := range segmentFiles(t, crashed) {
				for _, leftover := range []string{cleanedSuffix, swapSuffix, deletedSuffix} {
					require.NotContains(t, name, leftover)
				}
			}
			got := consume(t, l)
			require.Equal(t, table(before), table(got), "no record lost")
			require.Subset(t, before, got, "nothing invented")
			require.Subset(t, got, after, "nothing the cleaning kept is lost")
			if step == "cleaned" {
				require.Equal(t, before, got, "a crash before the swap leaves the log as it was")
			} else {
				require.Less(t, len(got), len(before), "a crash after the swap was decided completes it")
				require.Less(t, len(l.Segments()), segmentsBefore, "the first group's segments were merged into one")
			}
			require.Equal(t, end, l.EndOffset())
		})
	}
}

func TestRecoveryDeletesALeftoverCleanedFile(t *testing.T) {
	h := newLogHarness(t, compactConfig())
	l := h.open(Options{})
	want := h.appendBatches(l, 20, 2, 100)
	require.NoError(t, l.Close())
	garbage := filepath.Join(h.dir, segmentName(0)+logSuffix+cleanedSuffix)
	require.NoError(t, os.WriteFile(garbage, []byte("half a cleaned segment"), 0o644))
	l = h.open(Options{})
	require.NoFileExists(t, garbage)
	require.Equal(t, want, readAll(t, l, 0))
}

func TestBackgroundCleanerCompactsOnItsOwn(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.fill(300, 5, 20)
	h.roll()
	h.cfg.CleanerEnable = true
	h.cfg.CleanerBackoff = 10 * time.Millisecond
	h.restart()
	deadline := time.Now().Add(10 * time.Second)
	for len(consume(t, h.l)) != 20 {
		require.True(t, time.Now().Before(deadline), "the background cleaner did not compact the log")
		time.Sleep(10 * time.Millisecond)
	}
}

// scanLog reads the log from its start as a consumer does and checks that
// offsets strictly increase; it returns the records it read.
func scanLog(l *Log) ([]consumed, error) {
	var out []consumed
	last := int64(-1)
	for off := l.StartOffset(); off < l.EndOffset(); {
		r, err := l.Read(off, 1<<16)
		if err != nil {
			return nil, err
		}
		data, err := r.Bytes()
		if err != nil {
			return nil, err
		}
		progressed := false
		for len(data) > 0 {
			h, err := record.Validate(data)
			if err != nil {
				break // a partial batch at the end of the region
			}
			it, err := record.NewIterator(data)
			if err != nil {
				return nil, err
			}
			for it.Next() {
				rec := it.Record()
				o := h.BaseOffset + int64(rec.OffsetDelta)
				if o <= last || o < off {
					return nil, fmt.Errorf("offset %d after %d, reading from %d", o, last, off)
				}
				last = o
				out = append(out, consumed{offset: o, key: string(rec.Key), value: string(rec.Value), tombstone: rec.Value == nil})
			}
			if err := it.Err(); err != nil {
				return nil, err
			}
			off, data, progressed = h.NextOffset(), data[h.Size():], true
		}
		if !progressed {
			return nil, fmt.Errorf("no whole batch at offset %d", off)
		}
	}
	return out, nil
}

func TestCleanerRunsBesideAppendsAndReads(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	done := make(chan struct{})
	errs := make(chan error, 3)
	model := map[string]string{}
	go func() { // the producer
		defer close(done)
		for i := 0; i < 2000; i += 5 {
			b := record.NewBatch(h.clock.Now().UnixMilli())
			for j := i; j < i+5; j++ {
				key, value := fmt.Sprintf("key-%d", j%30), fmt.Sprintf("value-%d", j)
				b.Records = append(b.Records, record.Record{OffsetDelta: int32(j - i), Key: []byte(key), Value: []byte(value)})
				model[key] = value
			}
			data, err := record.AppendBatch(nil, b)
			if err == nil {
				_, _, err = h.l.Append(data)
			}
			if err == nil && i%50 == 0 {
				err = h.l.Roll()
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	reads := make(chan struct{})
	go func() { // a consumer reading from the start, over and over
		defer close(reads)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := scanLog(h.l); err != nil {
				errs <- err
				return
			}
		}
	}()
	rounds := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		stats, err := h.m.CleanPartition(h.tp)
		require.NoError(t, err)
		if stats.Cleaned {
			rounds++
		}
	}
	<-reads
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, rounds)
	h.roll()
	h.cleanPartition()
	got, err := scanLog(h.l)
	require.NoError(t, err)
	require.Equal(t, model, table(got))
	require.Len(t, got, 30)
}
