package commitlog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// The log cleaner compacts a log whose cleanup.policy includes compact, as
// Kafka's LogCleaner does: it keeps the latest record of each key and drops
// the older ones, so that a log of changes becomes a table of current
// values that a consumer can rebuild by reading from the start
// (__consumer_offsets, stage 05, is such a log).
//
//	offsets:   0   1   2   3   4   5   6   7 | 8   9  10 | 11 12 ...
//	keys:      a   b   a   c   b   a   d   c | a   e   b | (active segment)
//	           <------- clean ------------> <-- dirty --> <- uncleanable ->
//	                                      ^ cleaner checkpoint (first dirty offset)
//
// One round, for one log:
//
//  1. The dirty range runs from the cleaner checkpoint to the first
//     uncleanable offset: the active segment's base, or the base of the
//     segment holding the limit (the high watermark), or of the first
//     segment younger than min.compaction.lag.ms, whichever is lowest.
//  2. An offset map takes in the dirty range: each key's latest offset
//     (cleaner_map.go), until the map is full (log.cleaner.dedupe.buffer.size).
//  3. Every segment from the log's start to where the map ends is rewritten,
//     in groups of adjacent segments that fit one segment (Kafka's
//     groupSegmentsBySize), into one new segment per group. A record is
//     kept when the map holds no later offset for its key; a tombstone (a
//     null value) only until delete.retention.ms has passed (Kafka 2.8's
//     rule, deleteHorizon below); a record without a key is dropped (Kafka
//     refuses them on compacted topics; the cleaner drops any it finds).
//  4. Each new segment replaces its group crash-safely (replaceSegments).
//  5. The checkpoint moves to where the map ended.
//
// Offsets never change: a batch keeps its base offset and, as Kafka's
// MemoryRecords.filterTo writes it, its last offset (lastOffsetDelta), its
// producer id, epoch and base sequence, its leader epoch, attributes and
// codec; only the records inside are fewer. A consumer reading from the
// start sees increasing offsets with gaps.

// errCleaningAborted: the log changed under the cleaner (truncated,
// retention took its segments, closed, deleted) or the Manager is closing.
// Nothing was swapped in; the next round starts over.
var errCleaningAborted = errors.New("commitlog: cleaning aborted")

// cleanable is one log's cleanable range, read under its lock (Kafka's
// LogToClean).
type cleanable struct {
	cfg              Config // the log's config when the range was read
	firstDirty       int64  // the cleaner checkpoint, brought within the log
	firstUncleanable int64  // the end of the dirty range, a segment's base offset
	cleanBytes       int64  // bytes of the segments below firstDirty
	dirtyBytes       int64  // bytes of the segments in [firstDirty, firstUncleanable)
	maxLagDue        bool   // the oldest dirty record is older than max.compaction.lag.ms
}

// ratio is the dirty ratio, dirty bytes over clean and dirty bytes.
func (c cleanable) ratio() float64 {
	if c.cleanBytes+c.dirtyBytes == 0 {
		return 0
	}
	return float64(c.dirtyBytes) / float64(c.cleanBytes+c.dirtyBytes)
}

// cleanableRange reads the log's cleanable range as Kafka's
// LogCleanerManager.cleanableOffsets does. limit is the offset the cleaner
// may not reach, the high watermark; the range ends at the base of the
// segment holding it, so that a segment is either wholly cleanable or not
// touched (Kafka 3.1 bounds cleaning by the high watermark itself,
// KAFKA-13194; 2.8 only by the active segment).
func (l *Log) cleanableRange(limit int64, now time.Time) (cleanable, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return cleanable{}, ErrClosed
	}
	c := cleanable{cfg: l.cfg, firstDirty: l.firstDirtyOffset}
	if c.firstDirty < l.logStartOffset || c.firstDirty > l.nextOffset {
		c.firstDirty = l.logStartOffset // a reset checkpoint, or a log truncated below it
	}
	end := l.activeSegment().baseOffset
	if limit < end {
		end = l.segments[max(l.segmentIndexFor(limit), 0)].baseOffset
	}
	active := len(l.segments) - 1
	if lag := c.cfg.MinCompactionLag; lag > 0 {
		for _, s := range l.segments[max(l.segmentIndexFor(c.firstDirty), 0):active] {
			if err := s.loadTimestamps(); err != nil {
				return c, err
			}
			if s.maxTimestamp > now.Add(-lag).UnixMilli() {
				end = min(end, s.baseOffset)
				break
			}
		}
	}
	c.firstUncleanable = max(end, c.firstDirty)
	earliest := int64(math.MaxInt64) // the oldest first-batch timestamp of a dirty segment
	first := max(l.segmentIndexFor(c.firstDirty), 0)
	for i, s := range l.segments {
		if s.baseOffset < c.firstDirty {
			c.cleanBytes += s.size
		}
		// The segment the last round's map ended in counts as clean and
		// as dirty, as in Kafka.
		if i < first || i >= active || s.baseOffset >= c.firstUncleanable || c.firstDirty == c.firstUncleanable {
			continue
		}
		c.dirtyBytes += s.size
		if c.cfg.MaxCompactionLag != Never {
			ts, err := s.firstBatchTimestamp()
			if err != nil {
				return c, err
			}
			if ts > 0 {
				earliest = min(earliest, ts)
			}
		}
	}
	if c.cfg.MaxCompactionLag != Never && earliest != math.MaxInt64 {
		c.maxLagDue = earliest < now.Add(-c.cfg.MaxCompactionLag).UnixMilli()
	}
	return c, nil
}

// firstBatchTimestamp is the max timestamp of the segment's first batch
// (Kafka's getFirstBatchTimestamp), -1 for an empty segment. Called with
// the Log's lock held.
func (s *segment) firstBatchTimestamp() (int64, error) {
	if err := s.load(); err != nil {
		return 0, err
	}
	if s.size == 0 {
		return -1, nil
	}
	_, h, _, err := newBatchScanner(s.file, 0, s.size, record.HeaderSize).next(false)
	if err != nil {
		return 0, fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
	}
	return h.MaxTimestamp, nil
}

// cleanSource is a segment as the cleaner reads it: what it needs, copied
// under the log's lock, so that the reading happens without the lock.
type cleanSource struct {
	seg            *segment
	file           *os.File
	base, size     int64
	next           int64 // the next segment's base offset, or the log end offset for the active one
	startPos       int64 // where the dirty range starts in the file, for the map
	lastModified   time.Time
	offsetIndexLen int // index bytes in use, for grouping
	timeIndexLen   int
}

// cleaning is one round on one log.
type cleaning struct {
	l       *Log
	c       cleanable
	stop    <-chan struct{} // closed when the Manager closes
	stats   *CleanStats
	records *record.Reader
	// producerLast maps each producer id to the last offset of its last
	// batch in the log, found when first needed (producerLastOffsets).
	producerLast map[int64]int64
	all          []cleanSource // every segment, the active one with its size at the start
}

// clean runs one round on the log: Kafka's Cleaner.clean. It returns
// errCleaningAborted, having changed nothing, when the log changed under it.
func (l *Log) clean(c cleanable, dedupeBufferSize int64, stop <-chan struct{}, stats *CleanStats) error {
	started := time.Now()
	defer func() { stats.Elapsed = time.Since(started) }()
	cl := &cleaning{l: l, c: c, stop: stop, stats: stats, records: record.GetReader(0)}
	defer record.PutReader(cl.records)

	truncations, horizon, err := cl.snapshot()
	if err != nil {
		return err
	}
	m := newOffsetMap(dedupeBufferSize, c.firstDirty)
	if err := cl.buildOffsetMap(m); err != nil {
		return cl.failed(truncations, err)
	}
	end := m.latest + 1
	stats.FirstDirtyOffset, stats.EndOffset, stats.KeysMapped = c.firstDirty, end, len(m.offsets)

	var sources []cleanSource
	for _, src := range cl.all {
		if src.base < end && src.base < c.firstUncleanable {
			sources = append(sources, src)
		}
	}
	for _, group := range groupSegmentsBySize(sources, c.cfg.SegmentBytes, c.cfg.SegmentIndexBytes) {
		if err := cl.cleanSegments(group, m, horizon, truncations); err != nil {
			return cl.failed(truncations, err)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.truncations != truncations {
		return errCleaningAborted
	}
	l.firstDirtyOffset = max(l.firstDirtyOffset, end)
	stats.Cleaned = true
	return nil
}

// failed turns an error met while reading or writing into
// errCleaningAborted when the log changed meanwhile: a segment deleted and
// closed under the cleaner fails its reads, which is no fault of the disk.
func (cl *cleaning) failed(truncations uint64, err error) error {
	if errors.Is(err, errCleaningAborted) {
		return err
	}
	cl.l.mu.RLock()
	defer cl.l.mu.RUnlock()
	if cl.l.closed || cl.l.truncations != truncations || !cl.l.holds(cl.all[:len(cl.all)-1]) {
		return fmt.Errorf("%w: %v", errCleaningAborted, err)
	}
	return err
}

// holds reports whether the log's segments still include sources, in
// order and adjacent. Called with mu held.
func (l *Log) holds(sources []cleanSource) bool {
	if len(sources) == 0 {
		return true
	}
	i := l.segmentIndexFor(sources[0].base)
	if i < 0 || i+len(sources) > len(l.segments)-1 { // never the active segment
		return false
	}
	for j, src := range sources {
		if l.segments[i+j] != src.seg {
			return false
		}
	}
	return true
}

// snapshot loads every segment below the end of the dirty range and copies
// what the cleaner reads of them, under the log's read lock. It returns the
// truncation count to check before swapping, and the delete horizon: a
// tombstone in a segment last modified at or before it is dropped.
//
// The horizon is Kafka 2.8's: the last modification time of the newest
// segment of the clean part of the log, minus delete.retention.ms; with no
// clean part yet (the first round) there is none and every tombstone is
// kept. So a tombstone lives at least delete.retention.ms after the log
// was cleaned past it: a consumer that reads from the start and reaches the
// clean part's end within delete.retention.ms sees every delete. (Kafka 3.1,
// KIP-534, stamps the horizon into each batch instead.)
func (cl *cleaning) snapshot() (truncations uint64, horizonMs int64, err error) {
	l := cl.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, 0, errCleaningAborted
	}
	horizonMs = math.MinInt64
	for i, s := range l.segments {
		if err := s.load(); err != nil {
			return 0, 0, err
		}
		src := cleanSource{seg: s, file: s.file, base: s.baseOffset, size: s.size, next: l.nextOffset,
			lastModified: s.lastModified, offsetIndexLen: s.offsets.entries * offsetIndexEntrySize,
			timeIndexLen: s.times.entries * timeIndexEntrySize}
		if i+1 < len(l.segments) {
			src.next = l.segments[i+1].baseOffset
		}
		if s.baseOffset <= cl.c.firstDirty && cl.c.firstDirty < src.next {
			_, pos := s.offsets.lookup(cl.c.firstDirty)
			src.startPos = int64(pos)
		}
		if s.baseOffset < cl.c.firstDirty {
			horizonMs = s.lastModified.UnixMilli() - cl.c.cfg.DeleteRetention.Milliseconds()
		}
		cl.all = append(cl.all, src)
	}
	return l.truncations, horizonMs, nil
}

// stopped reports whether the Manager is closing.
func (cl *cleaning) stopped() bool {
	select {
	case <-cl.stop:
		return true
	default:
		return false
	}
}

// buildOffsetMap takes the dirty range into m, segment by segment, until m
// is full (Kafka's buildOffsetMap). m.latest ends at the last offset it
// covered: the end of the dirty range, or the last record taken in before
// the map filled.
func (cl *cleaning) buildOffsetMap(m *offsetMap) error {
	for _, src := range cl.all {
		if src.next <= cl.c.firstDirty || src.base >= cl.c.firstUncleanable {
			continue
		}
		full := false
		err := cl.scan(src, src.startPos, func(h *record.BatchHeader, batch []byte) error {
			if h.Attributes.Control() {
				return nil // transaction markers have no key to keep
			}
			it, err := cl.records.Records(batch)
			if err != nil {
				return err
			}
			for it.Next() {
				r := it.Record()
				offset := h.BaseOffset + int64(r.OffsetDelta)
				if r.Key != nil && offset >= cl.c.firstDirty {
					if full = m.put(r.Key, offset); full {
						return io.EOF
					}
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
			if h.LastOffset() >= cl.c.firstDirty {
				m.latest = max(m.latest, h.LastOffset())
			}
			return nil
		})
		if err != nil || full {
			return err
		}
		m.latest = max(m.latest, src.next-1) // an offset gap at the segment's end
	}
	return nil
}

// scan calls fn for each batch of src from position pos, validating each
// (CRC included), until fn returns an error; io.EOF from fn ends the scan
// without error.
func (cl *cleaning) scan(src cleanSource, pos int64, fn func(h *record.BatchHeader, batch []byte) error) error {
	sc := newBatchScanner(src.file, pos, src.size, recoveryWindow)
	for {
		if cl.stopped() {
			return errCleaningAborted
		}
		_, h, batch, err := sc.next(true)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("segment %s: %w", segmentName(src.base), err)
		}
		cl.stats.BytesRead += int64(len(batch))
		if err := fn(&h, batch); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("segment %s: batch at offset %d: %w", segmentName(src.base), h.BaseOffset, err)
		}
	}
}

// groupSegmentsBySize splits the segments to clean into runs of adjacent
// segments that fit into one: their sizes add up to at most segment.bytes,
// their index entries to at most segment.index.bytes, and their offsets
// stay within 2^31 of the first one's (Kafka's groupSegmentsBySize). Sizes
// before cleaning are an upper bound on sizes after.
func groupSegmentsBySize(segs []cleanSource, maxSize int64, maxIndexSize int) [][]cleanSource {
	var groups [][]cleanSource
	for len(segs) > 0 {
		group := segs[:1]
		size, index, times := segs[0].size, segs[0].offsetIndexLen, segs[0].timeIndexLen
		segs = segs[1:]
		for len(segs) > 0 && size+segs[0].size <= maxSize && index+segs[0].offsetIndexLen <= maxIndexSize &&
			times+segs[0].timeIndexLen <= maxIndexSize &&
			(segs[0].size == 0 || segs[0].next-1-group[0].base <= math.MaxInt32) {
			group = group[:len(group)+1]
			size, index, times = size+segs[0].size, index+segs[0].offsetIndexLen, times+segs[0].timeIndexLen
			segs = segs[1:]
		}
		groups = append(groups, group)
	}
	return groups
}

// cleanSegments writes the records of group that survive into one new
// segment with the .cleaned suffix, fsyncs it and swaps it in for the
// group (Kafka's cleanSegments).
func (cl *cleaning) cleanSegments(group []cleanSource, m *offsetMap, horizonMs int64, truncations uint64) (err error) {
	l := cl.l
	cfg := cl.c.cfg // the new segment's own copy: it leaves this function closed
	base := group[0].base
	for _, suffix := range segmentSuffixes {
		os.Remove(filepath.Join(l.dir, segmentName(base)+suffix+cleanedSuffix)) // an earlier round's, aborted by an error
	}
	dst, err := createSegmentFiles(l.dir, base, &cfg, l.logger, group[len(group)-1].lastModified, cleanedSuffix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			dst.close()
			for _, suffix := range segmentSuffixes {
				os.Remove(dst.path(suffix))
			}
		}
	}()
	w := &cleanedWriter{dst: dst}
	for _, src := range group {
		// Kafka: retainDeletesAndTxnMarkers = segment.lastModified > deleteHorizonMs.
		retainDeletes := src.lastModified.UnixMilli() > horizonMs
		err := cl.scan(src, 0, func(h *record.BatchHeader, batch []byte) error {
			return cl.filterBatch(w, h, batch, m, retainDeletes)
		})
		if err == nil {
			err = w.flush()
		}
		if err != nil {
			return err
		}
		cl.stats.SegmentsRead++
	}
	if err := dst.onBecomeInactive(); err != nil {
		return err
	}
	// Markers are kept whole, so every aborted transaction of the group
	// still has its marker: the cleaned segment's index is theirs, and is
	// written even when empty (cleaner_swap.go).
	var txns []AbortedTxn
	for _, src := range group {
		entries, err := src.seg.txnEntries()
		if err != nil {
			return err
		}
		txns = append(txns, entries...)
	}
	dst.txns.mu.Lock()
	err = dst.writeTxnsLocked(txns)
	dst.txns.mu.Unlock()
	if err != nil {
		return err
	}
	dst.setLastModified(group[len(group)-1].lastModified) // Kafka: cleaned.lastModified = segments.last.lastModified
	if err := dst.flush(); err != nil {
		return err
	}
	size := dst.size
	if err := dst.close(); err != nil {
		return err
	}
	cl.stats.BytesWritten += size
	cl.stats.SegmentsWritten++
	return l.replaceSegments(group, size, dst.lastModified, truncations)
}

// cleanedWriter collects kept batches and appends them to the new segment
// a megabyte at a time.
type cleanedWriter struct {
	dst     *segment
	buf     []byte
	headers []record.BatchHeader
}

func (w *cleanedWriter) add(batch []byte) error {
	h, err := record.Validate(batch)
	if err != nil {
		return err // our own encoding: a bug, not bad data
	}
	w.buf = append(w.buf, batch...)
	w.headers = append(w.headers, h)
	if len(w.buf) >= recoveryWindow {
		return w.flush()
	}
	return nil
}

func (w *cleanedWriter) flush() error {
	if len(w.headers) == 0 {
		return nil
	}
	if err := w.dst.ensureIndexRoom(len(w.headers)); err != nil {
		return err
	}
	if err := w.dst.append(w.buf, w.headers); err != nil {
		return err
	}
	w.buf, w.headers = w.buf[:0], w.headers[:0]
	return nil
}

// filterBatch writes what survives of one batch (Kafka's
// MemoryRecords.filterTo with the cleaner's RecordFilter):
//   - a control batch (a transaction marker) is kept whole: this log does
//     not track transactions, so it cannot tell when a marker may go;
//   - a batch whose records all survive is copied byte for byte;
//   - a batch with some survivors is rebuilt with them: same base offset,
//     last offset, producer fields, leader epoch, attributes and codec
//     (recompressed), and the first survivor's timestamp as its first
//     timestamp, as Kafka's MemoryRecordsBuilder does;
//   - a batch with none is dropped, unless it is the last batch of its
//     producer in the log: it then stays as an empty batch (a header, no
//     records), so that the producer's last sequence and epoch survive.
//     Kafka keeps it for active producers only; this log has no producer
//     state (stage 04 keeps it), so every producer id counts as active.
func (cl *cleaning) filterBatch(w *cleanedWriter, h *record.BatchHeader, batch []byte, m *offsetMap, retainDeletes bool) error {
	cl.stats.RecordsRead += int64(h.NumRecords)
	if h.Attributes.Control() {
		cl.stats.RecordsKept += int64(h.NumRecords)
		return w.add(batch)
	}
	it, err := cl.records.Records(batch)
	if err != nil {
		return err
	}
	var kept []record.Record
	n := 0
	for it.Next() {
		n++
		r := it.Record()
		if !shouldRetainRecord(m, h.BaseOffset+int64(r.OffsetDelta), r, retainDeletes) {
			continue
		}
		k := *r // Key and Value alias the batch or the Reader's buffer, both alive until the next batch
		k.Headers = append([]record.Header(nil), r.Headers...)
		kept = append(kept, k)
	}
	if err := it.Err(); err != nil {
		return err
	}
	cl.stats.RecordsKept += int64(len(kept))
	switch {
	case len(kept) == n:
		return w.add(batch)
	case len(kept) > 0:
		b := &record.Batch{BaseOffset: h.BaseOffset, PartitionLeaderEpoch: h.PartitionLeaderEpoch,
			Attributes: h.Attributes, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
			BaseSequence: h.BaseSequence, LastOffsetDelta: h.LastOffsetDelta, Records: kept}
		if h.Attributes.LogAppendTime() {
			// Every record of a LogAppendTime batch carries the batch's
			// time; Kafka's rebuilt batch writes it as the first timestamp
			// with deltas of zero.
			b.FirstTimestamp = h.MaxTimestamp
			for i := range kept {
				kept[i].TimestampDelta = 0
			}
		} else {
			b.FirstTimestamp = h.FirstTimestamp + kept[0].TimestampDelta
			for i := range kept {
				kept[i].TimestampDelta += h.FirstTimestamp - b.FirstTimestamp
			}
		}
		out, err := record.AppendBatch(nil, b)
		if err != nil {
			return err
		}
		return w.add(out)
	case h.ProducerID != record.NoProducerID:
		last, err := cl.producerLastOffset(h.ProducerID)
		if err != nil {
			return err
		}
		if last == h.LastOffset() {
			return w.add(record.AppendEmptyBatch(nil, h))
		}
	}
	return nil
}

// shouldRetainRecord is Kafka's Cleaner.shouldRetainRecord: a record past
// the map's end was not looked at and stays; a record without a key goes;
// otherwise a record stays if it is its key's latest and it has a value or
// its tombstone is still within delete.retention.ms.
func shouldRetainRecord(m *offsetMap, offset int64, r *record.Record, retainDeletes bool) bool {
	if offset > m.latest {
		return true
	}
	if r.Key == nil {
		return false
	}
	return offset >= m.get(r.Key) && (r.Value != nil || retainDeletes)
}

// producerLastOffset returns the last offset of the last batch of producer
// pid in the log, reading the batch headers of every segment on first use:
// only a log with idempotent batches emptied by cleaning pays for it.
func (cl *cleaning) producerLastOffset(pid int64) (int64, error) {
	if cl.producerLast == nil {
		cl.producerLast = map[int64]int64{}
		for _, src := range cl.all {
			sc := newBatchScanner(src.file, 0, src.size, record.HeaderSize)
			for {
				_, h, _, err := sc.next(false)
				if err == io.EOF {
					break
				}
				if err != nil {
					return 0, fmt.Errorf("segment %s: %w", segmentName(src.base), err)
				}
				if h.ProducerID != record.NoProducerID && !h.Attributes.Control() {
					cl.producerLast[h.ProducerID] = h.LastOffset()
				}
			}
		}
	}
	last, ok := cl.producerLast[pid]
	if !ok {
		return -1, nil
	}
	return last, nil
}
