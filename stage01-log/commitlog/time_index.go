package commitlog

import (
	"encoding/binary"
	"fmt"
)

// timeIndexEntrySize: timestamp int64 + relative offset int32.
const timeIndexEntrySize = 12

// build 01.H: the time index: timestamps that only grow, looked up and appended
// tests: TestIndexLookupFindsTheLastEntryAtOrBelow, TestOffsetForTimestamp

// timeIndex maps timestamps to offsets, for ListOffsets by time and for
// time-based retention. Entries are added with the offset index's entries
// but only when the timestamp grows, so timestamps strictly increase and
// binary search works even though producers may send them out of order.
//
//	.timeindex file, big-endian:
//	+-----------------------------+--------------------+
//	| max timestamp so far, int64 | offset - base int32|
//	+-----------------------------+--------------------+
type timeIndex struct {
	*mmapIndex
}

func openTimeIndex(path string, baseOffset int64, maxBytes int) (*timeIndex, error) {
	idx, err := openMmapIndex(path, timeIndexEntrySize, baseOffset, maxBytes)
	if err != nil {
		return nil, err
	}
	return &timeIndex{idx}, nil
}

func (x *timeIndex) entryAt(i int) (timestamp, offset int64) {
	e := x.entry(i)
	return int64(binary.BigEndian.Uint64(e)), x.baseOffset + int64(int32(binary.BigEndian.Uint32(e[8:])))
}

func timestampKey(e []byte) int64 { return int64(binary.BigEndian.Uint64(e)) }

// lastEntry returns the newest entry, or (-1, baseOffset) when empty.
func (x *timeIndex) lastEntry() (timestamp, offset int64) {
	if x.entries == 0 {
		return -1, x.baseOffset
	}
	return x.entryAt(x.entries - 1)
}

// lookup returns the entry with the largest timestamp <= target, or
// (-1, baseOffset) when every entry is newer: a scan from that offset finds
// the first batch whose max timestamp reaches target.
func (x *timeIndex) lookup(target int64) (timestamp, offset int64) {
	i := x.search(target, timestampKey)
	if i < 0 {
		return -1, x.baseOffset
	}
	return x.entryAt(i)
}

// maybeAppend adds (timestamp, offset) if timestamp is newer than the last
// entry. force skips the full check, for the final entry written when a
// segment rolls (the index is then trimmed, not appended to again).
func (x *timeIndex) maybeAppend(timestamp, offset int64, force bool) error {
	if last, _ := x.lastEntry(); timestamp <= last {
		return nil
	}
	if x.isFull() {
		if !force {
			return fmt.Errorf("time index %s is full", x.path)
		}
		if err := x.resize((x.entries + 1) * timeIndexEntrySize); err != nil {
			return err
		}
	}
	e := x.entry(x.entries)
	binary.BigEndian.PutUint64(e, uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-x.baseOffset))
	x.entries++
	return nil
}

// truncateTo removes every entry for an offset >= offset. Offsets increase
// along with timestamps, so the entries to keep are a prefix.
func (x *timeIndex) truncateTo(offset int64) {
	n := x.entries
	for n > 0 {
		if _, off := x.entryAt(n - 1); off < offset {
			break
		}
		n--
	}
	x.truncateEntries(n)
}

// sanityCheck rejects entries whose timestamps or offsets do not increase.
func (x *timeIndex) sanityCheck() error {
	prevTs, prevOff := int64(-1)<<62, x.baseOffset-1
	for i := range x.entries {
		ts, off := x.entryAt(i)
		if ts <= prevTs || off < prevOff {
			return fmt.Errorf("%w: %s entry %d (timestamp %d, offset %d) after (%d, %d)",
				errCorruptIndex, x.path, i, ts, off, prevTs, prevOff)
		}
		prevTs, prevOff = ts, off
	}
	return nil
}

// end build
