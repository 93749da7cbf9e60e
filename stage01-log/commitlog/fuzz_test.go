package commitlog

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// fuzzPrefix returns n valid batches with offsets assigned from 0, as a
// segment holds them, and the offset after them.
func fuzzPrefix(t testing.TB, n int) (batches [][]byte, next int64) {
	for i := range n {
		b := makeBatch(t, i, 1+i%3, 40, 1_700_000_000_000+int64(i))
		record.SetBaseOffset(b, next)
		h, err := record.Validate(b)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
		next = h.NextOffset()
	}
	return batches, next
}

// fixTailCRCs walks the batches of seg from pos and rewrites the CRC of
// every whole batch whose header decodes, so the fuzzer can reach the
// checks recovery makes after the CRC (offsets, lengths) without having to
// forge a CRC-32C.
func fixTailCRCs(seg []byte, pos int) {
	for pos+record.HeaderSize <= len(seg) {
		h, err := record.ReadHeader(seg[pos:])
		if err != nil || h.Size() > len(seg)-pos {
			return
		}
		batch := seg[pos : pos+h.Size()]
		binary.BigEndian.PutUint32(batch[17:], record.Checksum(batch)) // the crc field, at byte 17
		pos += h.Size()
	}
}

// readChecked reads the log from its start offset to its end offset
// through Read and returns every whole batch. It fails t unless every
// batch has a valid CRC, offsets strictly increase and the last batch
// ends at EndOffset-1.
func readChecked(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	next, end := l.StartOffset(), l.EndOffset()
	for off := next; off < end; {
		r, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d of [%d, %d): %v", off, l.StartOffset(), end, err)
		}
		data, err := r.Bytes()
		if err != nil {
			t.Fatalf("read region at %d: %v", off, err)
		}
		progressed := false
		for len(data) >= record.HeaderSize {
			h, err := record.ReadHeader(data)
			if err == nil && h.Size() > len(data) {
				break // a partial batch at the end of the region
			}
			if err == nil {
				h, err = record.Validate(data)
			}
			if err != nil {
				t.Fatalf("read at %d returned a bad batch: %v", off, err)
			}
			if h.BaseOffset < next {
				t.Fatalf("batch at offset %d after the batches up to %d", h.BaseOffset, next-1)
			}
			out = append(out, append([]byte(nil), data[:h.Size()]...))
			next, off, progressed = h.NextOffset(), h.NextOffset(), true
			data = data[h.Size():]
		}
		if !progressed {
			t.Fatalf("read at %d returned no whole batch", off)
		}
	}
	if next != end {
		t.Fatalf("the batches read end at %d, the log end offset is %d", next-1, end)
	}
	return out
}

// FuzzRecovery runs the recovery scan over segments that hold valid batches
// followed by whatever the fuzzer writes: a tail after the valid prefix, in
// the same segment or in a second one, and a patch over any bytes. Open
// must not panic, and a log it accepts must be sound: every batch read from
// the start offset to the end offset has a valid CRC, offsets strictly
// increase up to EndOffset-1, a prefix the fuzzer did not touch is kept
// whole, and an append continues at the end offset. flags bit 0 fixes the
// CRCs of the tail's batches, bit 1 puts the tail in a second segment. Run
// it with
//
//	go test ./commitlog -run '^$' -fuzz '^FuzzRecovery$' -fuzztime 5m
//
// A spread of the corpus it built is kept in testdata/fuzz/FuzzRecovery.
func FuzzRecovery(f *testing.F) {
	one := makeBatch(f, 7, 2, 30, 1_700_000_000_000)
	torn := one[:len(one)-5]
	gap := bytes.Clone(one)
	record.SetBaseOffset(gap, 1<<40)
	overflow := bytes.Clone(one)
	record.SetBaseOffset(overflow, math.MaxInt64-1)
	f.Add(uint8(3), uint8(0), []byte{}, uint16(0), []byte{})
	f.Add(uint8(3), uint8(0), torn, uint16(0), []byte{})
	f.Add(uint8(2), uint8(1), one, uint16(0), []byte{})
	f.Add(uint8(2), uint8(3), gap, uint16(0), []byte{})
	f.Add(uint8(2), uint8(1), overflow, uint16(0), []byte{})
	f.Add(uint8(4), uint8(0), []byte{}, uint16(100), []byte{0xff, 0xff})
	f.Add(uint8(4), uint8(2), one, uint16(30), []byte{0, 0, 0, 0})
	f.Add(uint8(0), uint8(1), one, uint16(0), []byte{})

	cfg := smallConfig()
	f.Fuzz(func(t *testing.T, n, flags uint8, tail []byte, patchAt uint16, patch []byte) {
		prefix, prefixNext := fuzzPrefix(t, int(n%6))
		first := bytes.Join(prefix, nil)
		prefixLen := len(first)
		tailPos := prefixLen
		second := n%6 > 0 && flags&2 != 0
		if second {
			tailPos = 0
		}
		var tailSeg []byte
		if second {
			tailSeg = bytes.Clone(tail)
		} else {
			first = append(first, tail...)
			tailSeg = first
		}
		if flags&1 != 0 {
			fixTailCRCs(tailSeg, tailPos)
		}
		// The patch lands on the first segment; it leaves the prefix
		// alone only when it starts after it.
		prefixIntact := true
		if len(patch) > 0 && len(first) > 0 {
			at := int(patchAt) % len(first)
			copy(first[at:], patch)
			prefixIntact = at >= prefixLen
		}

		dir := filepath.Join(t.TempDir(), "topic-0")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write := func(base int64, data []byte) {
			if err := os.WriteFile(filepath.Join(dir, segmentName(base)+logSuffix), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(0, first)
		if second {
			write(prefixNext, tailSeg)
		}

		l, err := Open(dir, cfg, Options{CleanShutdown: false, RecoveryPoint: 0, Logger: quietLogger})
		if err != nil {
			return
		}
		defer l.Close()
		if l.StartOffset() != 0 {
			t.Fatalf("start offset %d, want 0", l.StartOffset())
		}
		got := readChecked(t, l)
		if prefixIntact {
			if len(got) < len(prefix) {
				t.Fatalf("recovery kept %d batches of a valid prefix of %d", len(got), len(prefix))
			}
			for i := range prefix {
				if !bytes.Equal(got[i], prefix[i]) {
					t.Fatalf("batch %d of the valid prefix changed", i)
				}
			}
		}

		end := l.EndOffset()
		b := makeBatch(t, 99, 2, 10, 1_700_000_000_000)
		firstOff, last, err := l.Append(b)
		if err != nil {
			t.Fatalf("append after recovery at %d: %v", end, err)
		}
		if firstOff != end || last != end+1 || l.EndOffset() != end+2 {
			t.Fatalf("append after recovery at %d got offsets %d..%d, log end %d", end, firstOff, last, l.EndOffset())
		}
		r, err := l.Read(end, 1<<20)
		if err != nil {
			t.Fatalf("read the appended batch: %v", err)
		}
		data, err := r.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if h, err := record.Validate(data); err != nil || h.BaseOffset != end {
			t.Fatalf("read at %d after appending there: base offset %d, %v", end, h.BaseOffset, err)
		}
	})
}

// indexFixture is a cleanly closed log that FuzzIndexFiles copies for each
// input: several segments, each with index entries.
type indexFixture struct {
	dir        string            // the log directory to copy
	segments   []int64           // base offsets, oldest first
	end        int64             // the log end offset
	timestamps map[int64]int64   // each offset's record timestamp
	files      map[string][]byte // every file of dir, by name
}

func newIndexFixture(f *testing.F, cfg Config) *indexFixture {
	dir := filepath.Join(f.TempDir(), "topic-0")
	l, err := Open(dir, cfg, Options{Logger: quietLogger})
	if err != nil {
		f.Fatal(err)
	}
	fx := &indexFixture{dir: dir, timestamps: map[int64]int64{}, files: map[string][]byte{}}
	for i := range 40 {
		// Timestamps go up and, every fourth batch, back: the time index
		// only records new maxima.
		ts := 1_700_000_000_000 + int64(i)*1000 - int64(i%4)*1500
		first, last, err := l.Append(makeBatch(f, i, 1+i%3, 100, ts))
		if err != nil {
			f.Fatal(err)
		}
		for o := first; o <= last; o++ {
			fx.timestamps[o] = ts
		}
	}
	for _, s := range l.Segments() {
		fx.segments = append(fx.segments, s.BaseOffset)
	}
	fx.end = l.EndOffset()
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	if len(fx.segments) < 3 {
		f.Fatalf("the fixture has %d segments, want at least 3", len(fx.segments))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if fx.files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			f.Fatal(err)
		}
	}
	return fx
}

// FuzzIndexFiles overwrites the .index and .timeindex files of one segment
// of a cleanly closed log with fuzzer bytes and opens it again as after a
// clean shutdown, when indexes are trusted once they pass a sanity check.
// Whatever the indexes say, the log must open, keep its offsets, and answer
// a Read of every offset with a region whose first batch holds that offset;
// OffsetForTimestamp must not fail on good data and, when it finds a
// record, must name a real one at or after the timestamp asked for; the
// tools' ReadIndexFile and ReadTimeIndexFile must not panic. sel picks the
// segment (low bits) and which files to replace (bit 4: .index, bit 5:
// .timeindex, neither: both). Run it with
//
//	go test ./commitlog -run '^$' -fuzz '^FuzzIndexFiles$' -fuzztime 5m
//
// A spread of the corpus it built is kept in testdata/fuzz/FuzzIndexFiles.
func FuzzIndexFiles(f *testing.F) {
	cfg := smallConfig()
	fx := newIndexFixture(f, cfg)
	for i, base := range fx.segments {
		index := fx.files[segmentName(base)+indexSuffix]
		times := fx.files[segmentName(base)+timeIndexSuffix]
		sel := uint8(i)
		f.Add(sel, index, times)
		f.Add(sel|0x10, index[:len(index)-offsetIndexEntrySize/2], times)
		f.Add(sel|0x20, index, []byte{})
		if len(index) >= 2*offsetIndexEntrySize {
			// The second entry pointing at the first one's batch, and
			// the first entry pointing past its batch.
			shifted := bytes.Clone(index)
			copy(shifted[offsetIndexEntrySize+4:], index[4:8])
			f.Add(sel|0x10, shifted, times)
			shifted = bytes.Clone(index)
			copy(shifted[4:8], index[offsetIndexEntrySize+4:])
			f.Add(sel|0x10, shifted, times)
		}
		if len(times) >= timeIndexEntrySize {
			later := bytes.Clone(times)
			binary.BigEndian.PutUint32(later[8:], uint32(fx.end-base-1))
			f.Add(sel|0x20, index, later)
		}
	}

	f.Fuzz(func(t *testing.T, sel uint8, index, times []byte) {
		base := fx.segments[int(sel&0x0f)%len(fx.segments)]
		replaceIndex, replaceTimes := sel&0x10 != 0, sel&0x20 != 0
		if !replaceIndex && !replaceTimes {
			replaceIndex, replaceTimes = true, true
		}
		dir := filepath.Join(t.TempDir(), "topic-0")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range fx.files {
			switch {
			case replaceIndex && name == segmentName(base)+indexSuffix:
				data = index
			case replaceTimes && name == segmentName(base)+timeIndexSuffix:
				data = times
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = ReadIndexFile(filepath.Join(dir, segmentName(base)+indexSuffix))
		_, _ = ReadTimeIndexFile(filepath.Join(dir, segmentName(base)+timeIndexSuffix))

		l, err := Open(dir, cfg, Options{CleanShutdown: true, Logger: quietLogger})
		if err != nil {
			t.Fatalf("open with damaged indexes for segment %d: %v", base, err)
		}
		defer l.Close()
		if l.StartOffset() != 0 || l.EndOffset() != fx.end {
			t.Fatalf("log holds [%d, %d), want [0, %d)", l.StartOffset(), l.EndOffset(), fx.end)
		}
		for o := l.StartOffset(); o < l.EndOffset(); o++ {
			r, err := l.Read(o, 1)
			if err != nil {
				t.Fatalf("read %d: %v", o, err)
			}
			data, err := r.Bytes()
			if err != nil {
				t.Fatalf("read %d: %v", o, err)
			}
			h, err := record.Validate(data)
			if err != nil {
				t.Fatalf("read %d: %v", o, err)
			}
			if o < h.BaseOffset || o > h.LastOffset() {
				t.Fatalf("read %d returned the batch of offsets %d..%d", o, h.BaseOffset, h.LastOffset())
			}
		}
		for _, ts := range []int64{0, 1_700_000_000_000, 1_700_000_007_000, 1_700_000_019_500, 1_700_000_100_000} {
			off, got, found, err := l.OffsetForTimestamp(ts)
			if err != nil {
				t.Fatalf("offset for timestamp %d: %v", ts, err)
			}
			if found && (got < ts || fx.timestamps[off] != got) {
				t.Fatalf("offset for timestamp %d: offset %d with timestamp %d, which holds %d",
					ts, off, got, fx.timestamps[off])
			}
		}
	})
}
