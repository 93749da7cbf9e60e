package commitlog

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// errCorruptIndex marks an index file that fails its sanity check; the
// segment rebuilds it from the log.
var errCorruptIndex = errors.New("commitlog: corrupt index")

// build 01.F: the memory-mapped index file: map, search, resize, flush
// tests: TestIndexLookupFindsTheLastEntryAtOrBelow, TestCorruptIndexesAreRebuilt

// mmapIndex is the memory-mapped file under both index kinds (§2.1.7): a
// file of fixed-size entries, preallocated while it belongs to the active
// segment so that appends are stores into memory, and trimmed to its entries
// when the segment rolls. Lookups binary-search the mapping; the page cache
// keeps the hot tail of every index in memory without a read syscall.
//
// Like Kafka's AbstractIndex, it keeps no file descriptor: the file is
// opened to be resized and mapped, and closed again, so a partition costs
// one descriptor (its .log file), not three. A flush opens the file to
// fsync it, which writes the pages dirtied through the mapping, and so
// never touches the mapping: a flush and a remap do not wait for each
// other.
//
// The Log's lock guards lookups, appends and resizes, with the segment's
// load protocol for a lazily loaded segment (see segment).
type mmapIndex struct {
	path       string
	entrySize  int
	baseOffset int64  // the segment's base offset; entries store offsets relative to it
	entries    int    // entries in use, from the front of data
	data       []byte // the mapping: the whole file

	// deleted is set when the segment leaves the log: its file was renamed
	// (or its directory was), and path may now name a new segment's index
	// (a truncated log appended to again, a topic deleted and created
	// again). From then on the index never opens path: flush does
	// nothing, close only unmaps. Read by flushes without the Log's lock.
	deleted atomic.Bool
}

// markDeleted cuts the index off its path; see deleted.
func (idx *mmapIndex) markDeleted() { idx.deleted.Store(true) }

// openMmapIndex maps the index file at path, creating it if it is missing.
// An existing file's entries are all of its whole entries; a new file is
// preallocated to maxBytes.
func openMmapIndex(path string, entrySize int, baseOffset int64, maxBytes int) (*mmapIndex, error) {
	fi, err := os.Stat(path)
	size := int64(0)
	switch {
	case err == nil:
		size = fi.Size()
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("open index: %w", err)
	}
	if size%int64(entrySize) != 0 {
		return nil, fmt.Errorf("%w: %s is %d bytes, not a multiple of %d", errCorruptIndex, path, size, entrySize)
	}
	idx := &mmapIndex{path: path, entrySize: entrySize, baseOffset: baseOffset, entries: int(size) / entrySize}
	if size == 0 {
		// A new index. Preallocating keeps appends from growing the
		// file one entry at a time.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("create index: %w", err)
		}
		f.Close()
		size = int64(roundDown(maxBytes, entrySize))
	}
	if err := idx.remap(size); err != nil {
		return nil, err
	}
	return idx, nil
}

func roundDown(n, multiple int) int { return n / multiple * multiple }

// remap resizes the file to size bytes and maps all of it. The descriptor
// it opens is closed before it returns: the mapping outlives it. The file
// must exist: an index renamed away for deletion is not created again.
func (idx *mmapIndex) remap(size int64) error {
	f, err := os.OpenFile(idx.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	if idx.data != nil {
		if err := unix.Munmap(idx.data); err != nil {
			return fmt.Errorf("unmap %s: %w", idx.path, err)
		}
		idx.data = nil
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("resize %s: %w", idx.path, err)
	}
	if size == 0 {
		return nil // nothing to map: mmap refuses zero lengths
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", idx.path, err)
	}
	idx.data = data
	return nil
}

// maxEntries is how many entries the mapping has room for.
func (idx *mmapIndex) maxEntries() int { return len(idx.data) / idx.entrySize }

func (idx *mmapIndex) isFull() bool { return idx.entries >= idx.maxEntries() }

// entry returns the bytes of entry i.
func (idx *mmapIndex) entry(i int) []byte {
	return idx.data[i*idx.entrySize : (i+1)*idx.entrySize]
}

// search returns the largest i whose key is <= target, or -1 if every key is
// bigger. key must be non-decreasing over the entries.
func (idx *mmapIndex) search(target int64, key func(e []byte) int64) int {
	// exercise 01.3: binary-search an index for the last entry at or below a key
	// hint: the keys never decrease, so halving the range of candidates at each step finds the last entry at or below the target
	// tests: TestIndexLookupFindsTheLastEntryAtOrBelow, TestReadReturnsRegionFromBatchHoldingOffset, TestOffsetForTimestamp
	lo, hi := 0, idx.entries-1
	for lo <= hi {
		mid := int(uint(lo+hi) >> 1)
		if key(idx.entry(mid)) <= target {
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return hi
	// end exercise
}

// truncateEntries keeps the first n entries.
func (idx *mmapIndex) truncateEntries(n int) {
	clear(idx.data[n*idx.entrySize : idx.entries*idx.entrySize])
	idx.entries = n
}

// resize remaps the file to hold maxBytes (rounded down to whole entries,
// and never fewer than the entries in use): trimming when a segment rolls,
// growing back when a segment becomes active again.
func (idx *mmapIndex) resize(maxBytes int) error {
	size := max(roundDown(maxBytes, idx.entrySize), idx.entries*idx.entrySize)
	if size == len(idx.data) {
		return nil
	}
	return idx.remap(int64(size))
}

// flush writes the index's dirty pages to disk. It may run without the
// Log's lock (a background flush after a roll): it opens the file by its
// path and fsyncs it, leaving the mapping alone. An index whose segment was
// deleted meanwhile has nothing left to flush.
func (idx *mmapIndex) flush() error {
	if idx.deleted.Load() {
		return nil
	}
	f, err := os.OpenFile(idx.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("flush %s: %w", idx.path, err)
	}
	err = syncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", idx.path, err)
	}
	return nil
}

// close trims the file to its entries, so that a clean shutdown leaves no
// preallocated tail, and releases the mapping. The index of a deleted
// segment is not trimmed: its path may be another index's now.
func (idx *mmapIndex) close() error {
	var err error
	if !idx.deleted.Load() {
		err = idx.resize(0)
	}
	if idx.data != nil {
		err = errors.Join(err, unix.Munmap(idx.data))
		idx.data = nil
	}
	return err
}

// end build
