package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IndexEntry is one entry of an .index file, for tools.
type IndexEntry struct {
	Offset   int64
	Position int32
}

// TimeIndexEntry is one entry of a .timeindex file, for tools.
type TimeIndexEntry struct {
	Timestamp int64
	Offset    int64
}

// ReadIndexFile reads every entry of an .index file, as kafka-dump-log
// prints them. The base offset comes from the file name. Trailing zero
// entries of a preallocated index (one that was not closed cleanly) are
// left out, as Kafka does.
func ReadIndexFile(path string) ([]IndexEntry, error) {
	x, err := readIndexFile(path, offsetIndexEntrySize)
	if err != nil {
		return nil, err
	}
	idx := &offsetIndex{x}
	var out []IndexEntry
	for i := range x.entries {
		off, pos := idx.entryAt(i)
		if i > 0 && off == x.baseOffset && pos == 0 {
			break // the zeroed, preallocated tail
		}
		out = append(out, IndexEntry{Offset: off, Position: pos})
	}
	return out, nil
}

// ReadTimeIndexFile reads every entry of a .timeindex file.
func ReadTimeIndexFile(path string) ([]TimeIndexEntry, error) {
	x, err := readIndexFile(path, timeIndexEntrySize)
	if err != nil {
		return nil, err
	}
	idx := &timeIndex{x}
	var out []TimeIndexEntry
	for i := range x.entries {
		ts, off := idx.entryAt(i)
		if i > 0 && ts == 0 && off == x.baseOffset {
			break
		}
		out = append(out, TimeIndexEntry{Timestamp: ts, Offset: off})
	}
	return out, nil
}

// readIndexFile reads an index file into memory (tools need no mapping).
func readIndexFile(path string, entrySize int) (*mmapIndex, error) {
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: not named by a base offset", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data)%entrySize != 0 {
		return nil, fmt.Errorf("%w: %s is %d bytes, not a multiple of %d", errCorruptIndex, path, len(data), entrySize)
	}
	return &mmapIndex{path: path, entrySize: entrySize, baseOffset: base, data: data, entries: len(data) / entrySize}, nil
}
