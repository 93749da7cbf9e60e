package commitlog

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Region is a byte range of a segment file: what a read returns instead of
// copied bytes. Stage 02 writes it into a fetch response by copying it to
// the socket; stage 06 hands it to sendfile(2), so the data goes from the
// page cache to the network without entering the process (§2.1.5).
//
// A region starts at a batch boundary. Like Kafka's, it may end inside a
// batch when maxBytes cuts it: readers drop a partial batch at the end.
type Region struct {
	File *os.File // the segment's file; the caller must not write or close it
	Pos  int64    // where the region starts in File
	Size int64    // its length; 0 for an empty read
}

// Reader returns a reader over the region's bytes.
func (r Region) Reader() *io.SectionReader { return io.NewSectionReader(r.File, r.Pos, r.Size) }

// Bytes copies the region into memory.
func (r Region) Bytes() ([]byte, error) {
	b := make([]byte, r.Size)
	if _, err := io.ReadFull(r.Reader(), b); err != nil {
		return nil, fmt.Errorf("read region of %s at %d: %w", r.File.Name(), r.Pos, err)
	}
	return b, nil
}

// Read returns the region of the log that starts with the batch holding
// offset, at most maxBytes long but always holding that whole batch (so a
// reader never gets stuck behind a batch bigger than its limit, as in
// Kafka's KIP-74). Reading at the log end offset returns an empty region;
// reading outside [StartOffset, EndOffset] is ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int) (Region, error) {
	return l.ReadUpTo(offset, maxBytes, math.MaxInt64)
}

// ReadUpTo is Read limited to the batches below maxOffset: consumers of a
// replicated partition read only below its high watermark (stage 03).
// maxOffset must fall on a batch boundary, as a high watermark does.
func (l *Log) ReadUpTo(offset int64, maxBytes int, maxOffset int64) (Region, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Region{}, ErrClosed
	}
	if offset < l.logStartOffset || offset > l.nextOffset {
		return Region{}, fmt.Errorf("%w: offset %d, log %s holds [%d, %d)", ErrOffsetOutOfRange, offset, l.dir, l.logStartOffset, l.nextOffset)
	}
	maxOffset = min(maxOffset, l.nextOffset)
	if offset >= maxOffset {
		return Region{}, nil
	}
	for i := l.segmentIndexFor(offset); i < len(l.segments); i++ {
		s := l.segments[i]
		pos, h, found, err := s.translateOffset(offset)
		if err != nil {
			return Region{}, err
		}
		if !found {
			continue // offset lies past this segment's data: try the next
		}
		if h.BaseOffset >= maxOffset {
			return Region{}, nil
		}
		end := s.size
		// The bound may fall inside this segment: stop at its batch. A
		// bound at the log end is the last segment's end, found without a
		// second lookup (a follower's fetch, and a consumer's once the
		// high watermark has caught up: the common case).
		if maxOffset < l.nextOffset && (i == len(l.segments)-1 || l.segments[i+1].baseOffset > maxOffset) {
			if bpos, _, ok, err := s.translateOffset(maxOffset); err != nil {
				return Region{}, err
			} else if ok {
				end = bpos
			}
		}
		size := min(int64(maxBytes), end-pos)
		size = max(size, int64(h.Size()))
		return Region{File: s.file, Pos: pos, Size: size}, nil
	}
	return Region{}, nil
}

// OffsetForTimestamp answers ListOffsets by time as Kafka does: the offset
// and timestamp of the first record, at or after the log start offset,
// whose timestamp is >= ts. Batches are skipped by their max timestamp,
// and the one that reaches ts is decoded (decompressed if need be) to find
// the record: records inside a batch need not be in timestamp order, and
// the first in offset order wins; a LogAppendTime batch's records all carry
// the batch's max timestamp. found is false when every record is older.
//
// The batch is found under the log's read lock and decoded after it is
// released, so appends never wait for a decompression.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	records := record.GetReader(0) // batches already validated: the default limit
	defer record.PutReader(records)
	from := int64(-1) // the log start offset, read under the lock
	for {
		batch, h, ok, err := l.batchByTimestamp(ts, &from)
		if err != nil || !ok {
			return 0, 0, false, err
		}
		it, err := records.Records(batch)
		if err != nil {
			return 0, 0, false, fmt.Errorf("log %s: batch at offset %d: %w", l.dir, h.BaseOffset, err)
		}
		for it.Next() {
			r := it.Record()
			offset, timestamp = h.BaseOffset+int64(r.OffsetDelta), h.FirstTimestamp+r.TimestampDelta
			if h.Attributes.LogAppendTime() {
				timestamp = h.MaxTimestamp
			}
			if timestamp >= ts && offset >= from {
				return offset, timestamp, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return 0, 0, false, fmt.Errorf("log %s: batch at offset %d: %w", l.dir, h.BaseOffset, err)
		}
		from = h.NextOffset() // only records before the log start offset reached ts
	}
}

// OffsetForMaxTimestamp answers ListOffsets' MAX_TIMESTAMP (-3, KIP-734):
// the offset and timestamp of the record with the largest timestamp, the
// first in offset order among equals, at or after the log start offset.
// Every segment knows its largest batch timestamp (its time index's last
// entry, the active one from its appends), so the largest of the log costs
// no read; the record is then found as OffsetForTimestamp finds one, with
// that timestamp as the target, since the first record reaching it is the
// one. The segment that the log start cuts into (after DeleteRecords) has
// the headers of its remaining batches read instead, a batch holding the
// log start counting whole. found is false for a log without records (or
// whose records all lack a timestamp, -1).
func (l *Log) OffsetForMaxTimestamp() (offset, timestamp int64, found bool, err error) {
	ts, err := l.maxTimestamp()
	if err != nil || ts < 0 {
		return 0, 0, false, err
	}
	return l.OffsetForTimestamp(ts)
}

// maxTimestamp is the largest batch timestamp at or after the log start.
func (l *Log) maxTimestamp() (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	best := int64(-1)
	for i := max(l.segmentIndexFor(l.logStartOffset), 0); i < len(l.segments); i++ {
		s := l.segments[i]
		var ts int64
		var err error
		if s.baseOffset < l.logStartOffset {
			ts, err = s.maxTimestampFrom(l.logStartOffset)
		} else if err = s.loadTimestamps(); err == nil {
			ts = s.maxTimestamp
		}
		if err != nil {
			return 0, err
		}
		best = max(best, ts)
	}
	return best, nil
}

// batchByTimestamp finds, under the read lock, the first batch at or after
// *from (the log start offset when *from is -1, which it then sets) whose
// max timestamp is >= ts, and reads it. The read happens after the lock is
// released: a segment removed meanwhile keeps its file open for
// file.delete.delay.ms.
func (l *Log) batchByTimestamp(ts int64, from *int64) ([]byte, record.BatchHeader, bool, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, record.BatchHeader{}, false, ErrClosed
	}
	if *from < 0 {
		*from = l.logStartOffset
	}
	var file *os.File
	var pos int64
	var h record.BatchHeader
	found := false
	for i := max(l.segmentIndexFor(*from), 0); i < len(l.segments) && !found; i++ {
		s := l.segments[i]
		if err := s.loadTimestamps(); err != nil {
			l.mu.RUnlock()
			return nil, h, false, err
		}
		if s.maxTimestamp < ts {
			continue
		}
		var err error
		if pos, h, found, err = s.findBatchByTimestamp(ts, *from); err != nil {
			l.mu.RUnlock()
			return nil, h, false, err
		}
		file = s.file
	}
	l.mu.RUnlock()
	if !found {
		return nil, h, false, nil
	}
	batch := make([]byte, h.Size())
	if _, err := file.ReadAt(batch, pos); err != nil {
		return nil, h, false, fmt.Errorf("log %s: read batch at offset %d: %w", l.dir, h.BaseOffset, err)
	}
	return batch, h, true, nil
}

// EndOffset is the log end offset (LEO): the offset the next append gets.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.nextOffset
}

// StartOffset is the first offset a reader may ask for.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStartOffset
}

// RecoveryPoint is the offset below which the log is known to be on disk.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.recoveryPoint
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config is the log's configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig replaces the log's configuration, as Kafka's Log.updateConfig
// does when a topic's configs change (stage 05's AlterConfigs and config
// change notifications). It waits for appends and reads in progress (it
// takes the log's lock) and applies from the next one: a new segment.bytes
// or segment.ms at the next append's roll check, a new retention.ms at the
// next retention check, a new cleanup.policy at the cleaner's next round.
// The active segment's indexes keep the size they were preallocated with.
func (l *Log) SetConfig(cfg Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg // segments hold &l.cfg: they see the change under the same lock
}

// Size is the number of bytes in all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// SegmentInfo describes one segment, for tools and tests.
type SegmentInfo struct {
	BaseOffset int64
	Size       int64
	Path       string // the .log file
}

// ActiveBaseOffset is the base offset of the active segment, the one
// appends go to. It changes only when the log rolls, so a caller that
// keeps state beside the log (stage 04's producer snapshots) can tell a
// roll from it without a callback.
func (l *Log) ActiveBaseOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.activeSegment().baseOffset
}

// Segments lists the segments, oldest first; the last is the active one.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segments))
	for i, s := range l.segments {
		out[i] = SegmentInfo{BaseOffset: s.baseOffset, Size: s.size, Path: s.path(logSuffix)}
	}
	return out
}

// TruncateTo removes every batch at or after offset, as a follower does when
// its log diverged from its leader's (stage 03). offset should fall on a
// batch boundary; otherwise the batch holding it goes too. It returns the
// new log end offset. Whole segments past offset are deleted as retention
// deletes them (renamed, removed after file.delete.delay.ms); the segment
// holding offset is cut in place, as Kafka cuts it.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if offset >= l.nextOffset {
		return l.nextOffset, nil
	}
	if offset < l.segments[0].baseOffset {
		return offset, l.truncateFullyLocked(offset)
	}
	keep := l.segmentIndexFor(offset)
	for _, s := range l.segments[keep+1:] {
		if err := l.deleteSegmentLocked(s, "truncation"); err != nil {
			return 0, err
		}
	}
	l.segments = l.segments[:keep+1]
	active := l.activeSegment()
	next, err := active.truncateTo(offset)
	if err != nil {
		return 0, err
	}
	if err := l.resumeAppends(active); err != nil {
		return 0, err
	}
	l.nextOffset = next
	l.recoveryPoint = min(l.recoveryPoint, next)
	l.logStartOffset = min(l.logStartOffset, next)
	l.truncated(next)
	return next, nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, as a
// follower does when its leader no longer has the offsets it needs.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	for _, s := range l.segments {
		if err := l.deleteSegmentLocked(s, "truncation"); err != nil {
			return err
		}
	}
	s, err := createSegment(l.dir, offset, &l.cfg, l.logger, l.now())
	if err != nil {
		l.segments = nil
		return err
	}
	l.segments = []*segment{s}
	l.nextOffset, l.logStartOffset, l.recoveryPoint = offset, offset, offset
	l.truncated(offset)
	return nil
}

// truncated tells the cleaner that the log was cut at end: a cleaning in
// progress aborts, and the cleaner's checkpoint comes down to end if it was
// above (Kafka's LogCleaner.maybeTruncateCheckpoint). Called with mu held.
func (l *Log) truncated(end int64) {
	l.truncations++
	l.firstDirtyOffset = min(l.firstDirtyOffset, end)
}
