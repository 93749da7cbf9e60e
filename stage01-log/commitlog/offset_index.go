package commitlog

import (
	"encoding/binary"
	"fmt"
	"math"
)

// offsetIndexEntrySize: relative offset int32 + file position int32.
const offsetIndexEntrySize = 8

// build 01.G: the offset index: relative offsets and positions, looked up and appended
// tests: TestIndexLookupFindsTheLastEntryAtOrBelow, TestMissingIndexesAreRebuiltIdentically

// offsetIndex is a segment's sparse offset index: one entry for roughly every
// index.interval.bytes of log, mapping an offset to the file position of the
// batch that holds it. A lookup finds the nearest entry at or below an
// offset; the log is then scanned forward from that position, never more
// than an interval's worth.
//
//	.index file, big-endian:
//	+------------------------+------------------------+
//	| offset - baseOffset    | position in .log       |  entry 0
//	| int32                  | int32                  |
//	+------------------------+------------------------+
//	| ...                    | ...                    |  entry n-1
type offsetIndex struct {
	*mmapIndex
}

func openOffsetIndex(path string, baseOffset int64, maxBytes int) (*offsetIndex, error) {
	idx, err := openMmapIndex(path, offsetIndexEntrySize, baseOffset, maxBytes)
	if err != nil {
		return nil, err
	}
	return &offsetIndex{idx}, nil
}

func (x *offsetIndex) entryAt(i int) (offset int64, position int32) {
	e := x.entry(i)
	return x.baseOffset + int64(int32(binary.BigEndian.Uint32(e))), int32(binary.BigEndian.Uint32(e[4:]))
}

func (x *offsetIndex) offsetKey(e []byte) int64 {
	return x.baseOffset + int64(int32(binary.BigEndian.Uint32(e)))
}

// lookup returns the largest indexed offset <= target and its position, or
// (baseOffset, 0) when target is before the first entry.
func (x *offsetIndex) lookup(target int64) (offset int64, position int32) {
	i := x.search(target, x.offsetKey)
	if i < 0 {
		return x.baseOffset, 0
	}
	return x.entryAt(i)
}

// lastOffset is the offset of the last entry, or baseOffset when empty.
func (x *offsetIndex) lastOffset() int64 {
	if x.entries == 0 {
		return x.baseOffset
	}
	off, _ := x.entryAt(x.entries - 1)
	return off
}

// append adds an entry. Offsets must increase; the caller checks isFull.
func (x *offsetIndex) append(offset int64, position int32) error {
	if x.entries > 0 && offset <= x.lastOffset() {
		return fmt.Errorf("offset index %s: entry for offset %d after %d", x.path, offset, x.lastOffset())
	}
	rel := offset - x.baseOffset
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("offset index %s: offset %d does not fit relative to base %d", x.path, offset, x.baseOffset)
	}
	e := x.entry(x.entries)
	binary.BigEndian.PutUint32(e, uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(position))
	x.entries++
	return nil
}

// truncateTo removes every entry for an offset >= offset.
func (x *offsetIndex) truncateTo(offset int64) {
	x.truncateEntries(x.search(offset-1, x.offsetKey) + 1)
}

// sanityCheck rejects an index that cannot describe a log of logSize bytes:
// offsets must increase from baseOffset, positions must not decrease and
// must lie inside the log. Kafka checks only the last entry; checking all of
// them costs one pass over a mapping that is about to be used anyway, and
// catches an index scribbled over in the middle.
func (x *offsetIndex) sanityCheck(logSize int64) error {
	prevOff, prevPos := x.baseOffset-1, int32(0)
	for i := range x.entries {
		off, pos := x.entryAt(i)
		if off <= prevOff || pos < prevPos || int64(pos) >= logSize {
			return fmt.Errorf("%w: %s entry %d (offset %d, position %d) after (%d, %d) with a log of %d bytes",
				errCorruptIndex, x.path, i, off, pos, prevOff, prevPos, logSize)
		}
		prevOff, prevPos = off, pos
	}
	return nil
}

// end build
