package commitlog

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// crash copies a live log's directory: what a machine would find after the
// process died at this instant (page cache included, indexes still
// preallocated, no clean-shutdown marker). It returns the copy's harness.
func (h *logHarness) crash() *logHarness {
	h.t.Helper()
	dst := filepath.Join(h.t.TempDir(), filepath.Base(h.dir))
	require.NoError(h.t, os.MkdirAll(dst, 0o755))
	for _, name := range segmentFiles(h.t, h.dir) {
		src, err := os.Open(filepath.Join(h.dir, name))
		require.NoError(h.t, err)
		out, err := os.Create(filepath.Join(dst, name))
		require.NoError(h.t, err)
		_, err = io.Copy(out, src)
		require.NoError(h.t, err)
		require.NoError(h.t, errorsJoin(src.Close(), out.Close()))
	}
	return &logHarness{t: h.t, dir: dst, cfg: h.cfg, clock: h.clock}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lastSegmentPath is the .log file of the newest segment.
func lastSegmentPath(t *testing.T, l *Log) string {
	segs := l.Segments()
	return segs[len(segs)-1].Path
}

func TestRecoveryKeepsEveryWholeBatchBeforeATornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		h := newLogHarness(t, smallConfig())
		l := h.open(Options{})
		batches := h.appendBatches(l, 25, 3, 60)
		last := batches[len(batches)-1]
		lastBase := l.EndOffset() - 3

		crashed := h.crash()
		path := filepath.Join(crashed.dir, filepath.Base(lastSegmentPath(t, l)))
		fi, err := os.Stat(path)
		require.NoError(t, err)
		// Cut anywhere inside the last batch: 1 .. len-1 bytes of it remain.
		cut := fi.Size() - int64(len(last)) + 1 + rng.Int64N(int64(len(last)-1))
		require.NoError(t, os.Truncate(path, cut))

		r := crashed.open(Options{})
		require.Equal(t, lastBase, r.EndOffset(), "the torn batch is dropped, nothing before it")
		require.Equal(t, batches[:len(batches)-1], readAll(t, r, 0))

		first, _, err := r.Append(makeBatch(t, 99, 1, 10, 0))
		require.NoError(t, err)
		require.Equal(t, lastBase, first, "the log is appendable where it was cut")
	}
}

// TestASegmentScanStopsAtTheFirstBadBatch: recovery's scan of one segment
// keeps the batches before the first bad one, whatever makes it bad (cut
// short, a byte changed, offsets that go back, offsets that reach the next
// segment's base), cuts the file there, and indexes what it kept exactly as
// the appends had: their entries, no others.
func TestASegmentScanStopsAtTheFirstBadBatch(t *testing.T) {
	const bad = 6 // of 10 batches of offsets 2i..2i+1, the one each case spoils
	cases := []struct {
		name   string
		damage func(t *testing.T, f *os.File, at int64, batch []byte) (limit int64)
	}{
		{"cut short", func(t *testing.T, f *os.File, at int64, batch []byte) int64 {
			require.NoError(t, f.Truncate(at+int64(len(batch))/2))
			return math.MaxInt64
		}},
		{"a byte changed", func(t *testing.T, f *os.File, at int64, batch []byte) int64 {
			_, err := f.WriteAt([]byte{batch[record.HeaderSize+5] ^ 0x10}, at+record.HeaderSize+5)
			require.NoError(t, err)
			return math.MaxInt64
		}},
		{"offsets going back", func(t *testing.T, f *os.File, at int64, batch []byte) int64 {
			// baseOffset lies outside the CRC: the batch still checks.
			var base [8]byte
			binary.BigEndian.PutUint64(base[:], 2*bad-2)
			_, err := f.WriteAt(base[:], at)
			require.NoError(t, err)
			return math.MaxInt64
		}},
		{"offsets reaching the next segment", func(t *testing.T, f *os.File, at int64, batch []byte) int64 {
			return 2*bad + 1 // the spoiled batch's last offset
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newLogHarness(t, smallConfig())
			l := h.open(Options{})
			batches := h.appendBatches(l, 10, 2, 100)
			require.Len(t, l.Segments(), 1)
			require.NoError(t, l.Close())
			appended := indexBytes(t, h.dir, 0, indexSuffix)
			var at int64 // where the spoiled batch starts
			for _, b := range batches[:bad] {
				at += int64(len(b))
			}
			var wantIndex []byte
			for e := 0; e < len(appended); e += offsetIndexEntrySize {
				if int64(binary.BigEndian.Uint32(appended[e+4:])) < at {
					wantIndex = append(wantIndex, appended[e:e+offsetIndexEntrySize]...)
				}
			}
			require.NotEmpty(t, wantIndex)
			require.Less(t, len(wantIndex), len(appended))

			path := filepath.Join(h.dir, segmentName(0)+logSuffix)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			limit := tc.damage(t, f, at, batches[bad])
			require.NoError(t, f.Close())
			fi, err := os.Stat(path)
			require.NoError(t, err)

			s := existingSegment(h.dir, 0, fi.Size(), fi.ModTime(), &h.cfg, quietLogger)
			truncated, err := s.recover(limit)
			require.NoError(t, err)
			t.Cleanup(func() { s.close() })
			require.Equal(t, fi.Size()-at, truncated, "everything from the spoiled batch on is cut")
			require.Equal(t, at, s.size)
			kept, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, bytes.Join(batches[:bad], nil), kept)
			require.Equal(t, wantIndex, s.offsets.data[:s.offsets.entries*offsetIndexEntrySize],
				"the index holds the entries the appends wrote for the batches kept")
		})
	}
}

func TestRecoveryTruncatesAtACorruptBatchAndDropsLaterSegments(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 60, 2, 100)
	segs := l.Segments()
	require.GreaterOrEqual(t, len(segs), 4)

	crashed := h.crash()
	// Flip a byte inside the third batch of the second segment.
	victim := segs[1]
	firstInVictim := 0
	for i, b := range batches {
		if hdr, _ := record.ReadHeader(b); hdr.BaseOffset == victim.BaseOffset {
			firstInVictim = i
		}
	}
	victimBatch := firstInVictim + 2
	pos := int64(len(batches[firstInVictim]) + len(batches[firstInVictim+1]))
	path := filepath.Join(crashed.dir, filepath.Base(victim.Path))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xEE}, pos+record.HeaderSize+5)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := crashed.open(Options{RecoveryPoint: 0})
	hdr, _ := record.ReadHeader(batches[victimBatch])
	require.Equal(t, hdr.BaseOffset, r.EndOffset(), "the log ends where the corrupt batch began")
	require.Equal(t, batches[:victimBatch], readAll(t, r, 0))
	require.Len(t, r.Segments(), 2, "every segment after the corrupt one is deleted")
	require.Equal(t, indexBytes(t, h.dir, segs[0].BaseOffset, indexSuffix), indexBytes(t, crashed.dir, segs[0].BaseOffset, indexSuffix),
		"a segment recovery scanned and kept whole has the index its appends built, trimmed")
	for _, name := range segmentFiles(t, crashed.dir) {
		require.Contains(t, []string{segmentName(segs[0].BaseOffset), segmentName(segs[1].BaseOffset)}, name[:20])
	}

	more := crashed.appendBatches(r, 3, 2, 100)
	require.Equal(t, append(batches[:victimBatch:victimBatch], more...), readAll(t, r, 0), "appendable again")
}

func TestRecoveryStartsAtTheRecoveryPoint(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	h.appendBatches(l, 60, 2, 100)
	segs := l.Segments()
	end := l.EndOffset()

	crashed := h.crash()
	// Damage the first segment, below the recovery point: recovery does
	// not look there (Kafka trusts flushed data), so nothing is cut.
	path := filepath.Join(crashed.dir, filepath.Base(segs[0].Path))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xEE}, record.HeaderSize+5)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := crashed.open(Options{RecoveryPoint: segs[2].BaseOffset})
	require.Equal(t, end, r.EndOffset())
	require.Len(t, r.Segments(), len(segs))
	require.LessOrEqual(t, r.loadedSegments(), len(segs)-2, "segments below the recovery point stay closed")
}

func TestCleanShutdownSkipsTheRecoveryScan(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	h.appendBatches(l, 60, 2, 100)
	end, segs := l.EndOffset(), len(l.Segments())
	require.NoError(t, l.Close())

	// Corrupt a record in the active segment: only a scan would notice.
	path := lastSegmentPath(t, l)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xEE}, record.HeaderSize+5)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	clean := h.open(Options{CleanShutdown: true})
	require.Equal(t, end, clean.EndOffset(), "no scan, so the damage is not seen")
	require.Len(t, clean.Segments(), segs)
	require.NoError(t, clean.Close())

	unclean := h.open(Options{RecoveryPoint: 0})
	require.Less(t, unclean.EndOffset(), end, "a recovery scan finds it and truncates")
}

func TestOpeningAThousandSegmentsLoadsOnlyTheActiveOne(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 150 // one ~130-byte batch per segment
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	batches := h.appendBatches(l, 1000, 1, 50)
	require.Len(t, l.Segments(), 1000)
	require.NoError(t, l.Close())

	r := h.open(Options{CleanShutdown: true})
	require.Len(t, r.Segments(), 1000)
	require.Equal(t, 1, r.loadedSegments(), "opening must not open or map the other 999")

	rb, err := r.Read(500, 1000)
	require.NoError(t, err)
	data, err := rb.Bytes()
	require.NoError(t, err)
	require.Equal(t, batches[500], data)
	require.Equal(t, 2, r.loadedSegments(), "a read opens the one segment it needs")
}

func indexBytes(t *testing.T, dir string, base int64, suffix string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, segmentName(base)+suffix))
	require.NoError(t, err)
	return b
}

func TestMissingIndexesAreRebuiltIdentically(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	batches := h.appendBatches(l, 60, 2, 100)
	require.NoError(t, l.Close())
	base := l.Segments()[1].BaseOffset
	wantIdx := indexBytes(t, h.dir, base, indexSuffix)
	wantTime := indexBytes(t, h.dir, base, timeIndexSuffix)
	require.NotEmpty(t, wantIdx)
	require.NoError(t, os.Remove(filepath.Join(h.dir, segmentName(base)+indexSuffix)))
	require.NoError(t, os.Remove(filepath.Join(h.dir, segmentName(base)+timeIndexSuffix)))

	r := h.open(Options{CleanShutdown: true})
	require.Equal(t, batches, readAll(t, r, 0))
	require.Equal(t, wantIdx, indexBytes(t, h.dir, base, indexSuffix), "the rebuilt index equals the original")
	require.Equal(t, wantTime, indexBytes(t, h.dir, base, timeIndexSuffix))
}

func TestCorruptIndexesAreRebuilt(t *testing.T) {
	corruptions := map[string]func(b []byte) []byte{
		"not a whole number of entries": func(b []byte) []byte { return b[:len(b)-3] },
		"offsets out of order":          func(b []byte) []byte { copy(b[8:], []byte{0x7f, 0, 0, 0}); return b },
		"position past the log":         func(b []byte) []byte { copy(b[4:], []byte{0x7f, 0, 0, 0}); return b },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			h := newLogHarness(t, smallConfig())
			l := h.open(Options{})
			batches := h.appendBatches(l, 60, 2, 100)
			require.NoError(t, l.Close())
			base := l.Segments()[1].BaseOffset
			want := indexBytes(t, h.dir, base, indexSuffix)
			require.GreaterOrEqual(t, len(want), 16)
			path := filepath.Join(h.dir, segmentName(base)+indexSuffix)
			require.NoError(t, os.WriteFile(path, corrupt(append([]byte(nil), want...)), 0o644))

			r := h.open(Options{CleanShutdown: true})
			require.Equal(t, batches, readAll(t, r, 0), "lookups through the rebuilt index are correct")
			require.Equal(t, want, indexBytes(t, h.dir, base, indexSuffix))
		})
	}
}

func TestRecoveryRebuildsTheActiveIndexAsAppendsBuiltIt(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 512
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 100, 3, 40)
	crashed := h.crash()
	require.NoError(t, l.Close())
	want := indexBytes(t, h.dir, 0, indexSuffix) // trimmed by Close

	r := crashed.open(Options{})
	require.NoError(t, r.Close())
	require.Equal(t, want, indexBytes(t, crashed.dir, 0, indexSuffix))
	require.Equal(t, indexBytes(t, h.dir, 0, timeIndexSuffix), indexBytes(t, crashed.dir, 0, timeIndexSuffix))
}

func TestLeftoversOfInterruptedDeletionsAreRemoved(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	h.appendBatches(l, 5, 2, 100)
	require.NoError(t, l.Close())
	for _, name := range []string{"00000000000000000077.log.deleted", "00000000000000000077.index.deleted",
		"00000000000000000100.log.cleaned", "00000000000000000999.index"} {
		require.NoError(t, os.WriteFile(filepath.Join(h.dir, name), []byte("junk"), 0o644))
	}
	h.open(Options{CleanShutdown: true})
	require.ElementsMatch(t, []string{"00000000000000000000.log", "00000000000000000000.index",
		"00000000000000000000.timeindex"}, segmentFiles(t, h.dir))
}

// Readers that find segments unopened open them concurrently; run with -race.
func TestConcurrentReadersLoadSegmentsLazily(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	for i := range 200 {
		_, _, err := l.Append(makeBatch(t, i, 1, 100, int64(1000+i)))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	l = h.open(Options{CleanShutdown: true})

	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 300 {
				off := rng.Int64N(200)
				r, err := l.Read(off, 200)
				require.NoError(t, err)
				require.Positive(t, r.Size)
				got, _, found, err := l.OffsetForTimestamp(1000 + off)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, off, got)
			}
		}()
	}
	for range 4 {
		<-done
	}
}
