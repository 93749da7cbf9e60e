package diskbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// indexEntrySize is an .index entry: the offset relative to the segment's
// base offset and the position in the .log file, two big-endian int32s
// (stage01-log/commitlog/offset_index.go).
const indexEntrySize = 8

// MmapIndex is a segment's closed .index file mapped read-only, searched as
// commitlog's offsetIndex is (§2.1.7): each probe of the binary search is a
// load from memory; the page cache backs the mapping, and a probe costs a
// system call only on a page fault.
type MmapIndex struct {
	base int64  // the segment's base offset
	data []byte // the mapping, whole entries
}

// OpenMmapIndex maps the .index file at path of the segment at baseOffset.
func OpenMmapIndex(path string, baseOffset int64) (*MmapIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	size := fi.Size() / indexEntrySize * indexEntrySize
	if size == 0 {
		return &MmapIndex{base: baseOffset}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return &MmapIndex{base: baseOffset, data: data}, nil
}

// Entries is the number of entries.
func (x *MmapIndex) Entries() int { return len(x.data) / indexEntrySize }

// Lookup returns the largest indexed offset <= target and its position in
// the .log file, or (baseOffset, 0) when target comes before every entry:
// where a scan for target starts.
func (x *MmapIndex) Lookup(target int64) (offset int64, position int32) {
	i := search(x.Entries(), x.base, target, func(i int) []byte { return x.data[i*indexEntrySize:] })
	if i < 0 {
		return x.base, 0
	}
	return decodeEntry(x.base, x.data[i*indexEntrySize:])
}

// Close unmaps the file.
func (x *MmapIndex) Close() error {
	if x.data == nil {
		return nil
	}
	err := unix.Munmap(x.data)
	x.data = nil
	return err
}

// PreadIndex is the same .index file searched without a mapping: each probe
// of the same binary search is a pread(2) of one entry, a system call and a
// copy out of the page cache, as an index kept in a file and read through
// a FileChannel would be.
type PreadIndex struct {
	base    int64
	f       *os.File
	entries int
	buf     [indexEntrySize]byte // the entry last read: no allocation per probe
	err     error                // the first read error of a lookup
}

// OpenPreadIndex opens the .index file at path of the segment at baseOffset.
func OpenPreadIndex(path string, baseOffset int64) (*PreadIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open index: %w", err)
	}
	return &PreadIndex{base: baseOffset, f: f, entries: int(fi.Size() / indexEntrySize)}, nil
}

// Entries is the number of entries.
func (x *PreadIndex) Entries() int { return x.entries }

// Lookup is MmapIndex.Lookup through pread.
func (x *PreadIndex) Lookup(target int64) (offset int64, position int32, err error) {
	x.err = nil
	i := search(x.entries, x.base, target, x.read)
	if x.err != nil {
		return 0, 0, x.err
	}
	if i < 0 {
		return x.base, 0, nil
	}
	offset, position = decodeEntry(x.base, x.read(i))
	return offset, position, x.err
}

// read reads entry i into buf; an error is kept in err and reads as a zero
// entry, which the caller then throws away.
func (x *PreadIndex) read(i int) []byte {
	if _, err := x.f.ReadAt(x.buf[:], int64(i)*indexEntrySize); err != nil && x.err == nil {
		x.err = fmt.Errorf("read index entry %d: %w", i, err)
	}
	return x.buf[:]
}

// Close closes the file.
func (x *PreadIndex) Close() error { return x.f.Close() }

// search is the binary search both index kinds share: the largest i < n
// whose entry's offset is <= target, or -1. entry returns entry i's bytes.
func search(n int, base, target int64, entry func(i int) []byte) int {
	return sort.Search(n, func(i int) bool {
		off, _ := decodeEntry(base, entry(i))
		return off > target
	}) - 1
}

func decodeEntry(base int64, e []byte) (offset int64, position int32) {
	return base + int64(int32(binary.BigEndian.Uint32(e))), int32(binary.BigEndian.Uint32(e[4:]))
}

// errBatchNotFound: the scan reached the end of the segment first.
var errBatchNotFound = errors.New("diskbench: no batch holds the offset")

// FindBatch scans the batch headers of a .log file from position pos (a
// batch boundary: 0, or what an index lookup returned) up to end, reading
// the file window bytes at a time with pread, and returns the position and
// header of the first batch whose last offset is >= target: the batch a
// fetch at target starts with. From an index entry the scan crosses at most
// index.interval.bytes; from 0 it is the whole segment up to the batch.
func FindBatch(f *os.File, pos, end, target int64, window []byte) (int64, record.BatchHeader, error) {
	winStart, winLen := int64(0), 0
	for pos < end {
		if pos < winStart || pos+record.HeaderSize > winStart+int64(winLen) {
			n, err := f.ReadAt(window[:min(int64(len(window)), end-pos)], pos)
			if n < record.HeaderSize {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, record.BatchHeader{}, fmt.Errorf("read %s at %d: %w", f.Name(), pos, err)
			}
			winStart, winLen = pos, n
		}
		h, err := record.ReadHeader(window[pos-winStart : winLen])
		if err != nil {
			return 0, h, fmt.Errorf("batch at position %d: %w", pos, err)
		}
		if h.LastOffset() >= target {
			return pos, h, nil
		}
		pos += int64(h.Size())
	}
	return 0, record.BatchHeader{}, fmt.Errorf("%w: offset %d", errBatchNotFound, target)
}
