package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// batchScanner walks the batches of a segment file from a position, reading
// the file through a window so that many small batches cost one read.
// Lookups scan at most an index interval and use a small window; recovery
// reads everything and uses a large one.
type batchScanner struct {
	f        *os.File
	pos      int64  // position of the next batch
	end      int64  // scanning stops here: the segment's size or a read bound
	window   []byte // file bytes [winStart, winStart+len(window))
	winStart int64
	winSize  int     // how much to read at a time
	pooled   *[]byte // the pool's handle on window, for lookup scanners
}

func newBatchScanner(f *os.File, pos, end int64, winSize int) *batchScanner {
	return &batchScanner{f: f, pos: pos, end: end, winSize: winSize}
}

// lookupWindows recycles the small windows of lookups, which run on every
// fetch: without it each one would allocate its window.
var lookupWindows = sync.Pool{New: func() any { return new([]byte) }}

// newLookupScanner is a scanner for a short forward scan of headers, with a
// pooled window; call release when done.
func newLookupScanner(f *os.File, pos, end int64, winSize int) *batchScanner {
	s := newBatchScanner(f, pos, end, winSize)
	s.pooled = lookupWindows.Get().(*[]byte)
	s.window = (*s.pooled)[:0]
	return s
}

// release returns a lookup scanner's window to the pool.
func (s *batchScanner) release() {
	*s.pooled = s.window[:0]
	lookupWindows.Put(s.pooled)
	s.window, s.pooled = nil, nil
}

// errTornBatch means the bytes before end hold only part of a batch: a
// crash in the middle of an append, or a read bound inside a batch.
var errTornBatch = errors.New("commitlog: torn batch at the end of the segment")

// next returns the position and header of the next batch, and the whole
// batch when full is set (its CRC then checked). It returns io.EOF at end.
// The returned bytes are valid until the next call.
func (s *batchScanner) next(full bool) (pos int64, h record.BatchHeader, batch []byte, err error) {
	pos = s.pos
	if pos >= s.end {
		return pos, h, nil, io.EOF
	}
	head, err := s.bytes(pos, record.HeaderSize)
	if err != nil {
		return pos, h, nil, err
	}
	if h, err = record.ReadHeader(head); err != nil {
		return pos, h, nil, fmt.Errorf("batch at position %d: %w", pos, err)
	}
	size := int64(h.Size())
	if pos+size > s.end {
		return pos, h, nil, fmt.Errorf("%w: batch at position %d needs %d bytes, %d remain", errTornBatch, pos, size, s.end-pos)
	}
	if full {
		if batch, err = s.bytes(pos, int(size)); err != nil {
			return pos, h, nil, err
		}
		if h, err = record.Validate(batch); err != nil {
			return pos, h, nil, fmt.Errorf("batch at position %d: %w", pos, err)
		}
	}
	s.pos = pos + size
	return pos, h, batch, nil
}

// bytes returns the n bytes at pos, refilling the window if needed.
func (s *batchScanner) bytes(pos int64, n int) ([]byte, error) {
	if pos+int64(n) > s.end {
		return nil, fmt.Errorf("%w: %d bytes at position %d, the segment ends at %d", errTornBatch, n, pos, s.end)
	}
	if pos >= s.winStart && pos+int64(n) <= s.winStart+int64(len(s.window)) {
		off := pos - s.winStart
		return s.window[off : off+int64(n)], nil
	}
	want := int(min(int64(max(n, s.winSize)), s.end-pos))
	if cap(s.window) < want {
		s.window = make([]byte, want)
	}
	s.window = s.window[:want]
	m, err := s.f.ReadAt(s.window, pos)
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = errTornBatch // the file is shorter than we were told
		}
		s.window = s.window[:0]
		return nil, fmt.Errorf("read %s at %d: %w", s.f.Name(), pos, err)
	}
	s.window, s.winStart = s.window[:m], pos
	return s.window[:n], nil
}
