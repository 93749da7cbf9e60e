package commitlog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
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
//     Transactions are cleaned as Kafka's cleaner cleans them (cleanedTxns
//     below): the batches of aborted transactions go, and their records
//     never enter the map, so they cannot shadow a committed value; a
//     transaction marker goes once its transaction has no batch left in
//     the log and its segment is past the delete horizon, as a tombstone
//     does; the cleaned segment's .txnindex keeps the entries of the ABORT
//     markers it keeps.
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
	// producers is what the log tells of each producer's state, found
	// when first needed (isLastOfProducer).
	producers map[int64]*producerLast
	all       []cleanSource // every segment, the active one with its size at the start
	// aborted lists the aborted transactions of every segment's
	// .txnindex, read with the segments (snapshot).
	aborted []AbortedTxn
	// txns follows the transactions through the rewrite of one round,
	// across its groups of segments (Kafka's CleanedTransactionMetadata).
	txns *cleanedTxns
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
	// The rewrite reads from the log's start: every aborted transaction
	// whose marker is in the log may be met.
	cl.txns = newCleanedTxns(cl.aborted, math.MinInt64)

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
		txns, err := s.txnEntries()
		if err != nil {
			return 0, 0, err
		}
		cl.aborted = append(cl.aborted, txns...)
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
// the map filled. The records of aborted transactions stay out of the map,
// as in Kafka: an aborted value must not shadow the committed value of its
// key that came before it. The aborted transactions are those whose ABORT
// markers are at or after the first dirty offset, wherever in the log
// (Kafka's collectAbortedTransactions(firstDirty, firstUncleanable)).
func (cl *cleaning) buildOffsetMap(m *offsetMap) error {
	txns := newCleanedTxns(cl.aborted, cl.c.firstDirty)
	for _, src := range cl.all {
		if src.next <= cl.c.firstDirty || src.base >= cl.c.firstUncleanable {
			continue
		}
		full := false
		err := cl.scan(src, src.startPos, func(h *record.BatchHeader, batch []byte) error {
			switch {
			case h.Attributes.Control():
				txns.onMarker(h, batch) // markers have no key to keep
			case txns.onBatch(h): // aborted: no record of it counts
			default:
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
	w := &cleanedWriter{dst: dst, keptAborts: map[int64]bool{}}
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
	// The cleaned segment's index keeps the entries of the ABORT markers
	// it keeps; it is written even when empty (cleaner_swap.go). (Kafka
	// also drops the entry of a marker it keeps only for the delete
	// horizon, its transaction's batches being gone: a harmless entry
	// here, as a read_committed consumer finds nothing of it to skip.)
	var txns []AbortedTxn
	for _, src := range group {
		entries, err := src.seg.txnEntries()
		if err != nil {
			return err
		}
		for _, e := range entries {
			if w.keptAborts[e.LastOffset] {
				txns = append(txns, e)
			}
		}
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
	// keptAborts holds the offsets of the ABORT markers kept whole.
	keptAborts map[int64]bool
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
//   - a batch of an aborted transaction (transactional, of a producer whose
//     aborted transaction, from the .txnindex, has begun and whose ABORT
//     marker is still to come) loses all its records;
//   - a control batch (a transaction marker) is kept whole while its
//     transaction may still have batches in the log (the cleaner read one
//     of them this round: Kafka's onControlBatchRead) or while its segment
//     is within delete.retention.ms (retainDeletes, the tombstones' rule);
//     otherwise it loses its record. An ABORT marker kept whole keeps its
//     .txnindex entry (w.keptAborts);
//   - a data batch whose records all survive is copied byte for byte;
//   - a batch with some survivors is rebuilt with them: same base offset,
//     last offset, producer fields, leader epoch, attributes and codec
//     (recompressed), and the first survivor's timestamp as its first
//     timestamp, as Kafka's MemoryRecordsBuilder does;
//   - a batch with none is dropped, unless it holds its producer's last
//     state (isLastOfProducer): it then stays as an empty batch (a header,
//     no records), so that the producer's last sequence and epoch survive.
//     Kafka keeps it for active producers only; this log has no producer
//     state (stage 04 keeps it), so every producer id counts as active.
func (cl *cleaning) filterBatch(w *cleanedWriter, h *record.BatchHeader, batch []byte, m *offsetMap, retainDeletes bool) error {
	cl.stats.RecordsRead += int64(h.NumRecords)
	if h.Attributes.Control() {
		discardable, abort := cl.txns.onMarker(h, batch)
		if !discardable || retainDeletes {
			if abort {
				w.keptAborts[h.LastOffset()] = true
			}
			cl.stats.RecordsKept += int64(h.NumRecords)
			return w.add(batch)
		}
		return cl.emptyOrDrop(w, h)
	}
	if cl.txns.onBatch(h) {
		return cl.emptyOrDrop(w, h) // an aborted transaction's
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
	case len(kept) == n && n > 0:
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
	}
	return cl.emptyOrDrop(w, h)
}

// emptyOrDrop writes a batch all of whose records go: as an empty batch if
// it holds its producer's last state, else not at all (Kafka's
// BatchRetention RETAIN_EMPTY and DELETE).
func (cl *cleaning) emptyOrDrop(w *cleanedWriter, h *record.BatchHeader) error {
	if h.ProducerID == record.NoProducerID {
		return nil
	}
	last, err := cl.isLastOfProducer(h)
	if err != nil || !last {
		return err
	}
	return w.add(record.AppendEmptyBatch(nil, h))
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

// producerLast is what the log tells of a producer's state, as Kafka's
// ProducerStateManager would hold it: the last offset of its last data
// batch (-1: none), and whether a marker of a newer epoch came after it,
// which starts the producer's state afresh with no data batch (Kafka's
// maybeUpdateProducerEpoch clears the batch metadata).
type producerLast struct {
	dataOffset int64
	epoch      int16 // the epoch of its last batch, data or marker
	bumped     bool  // a marker of a newer epoch came after dataOffset's batch
}

// isLastOfProducer is Kafka's isBatchLastRecordOfProducer, every producer
// taken as active: a batch holds its producer's last state when it is its
// last data batch, or, when the producer's state has no data batch (its
// epoch was bumped by a marker after it, or it has none in the log), when
// it is a marker of the producer's current epoch, which fences its older
// epochs. The producers' states come from the batch headers of every
// segment, read on first use: only a log with producer batches emptied by
// cleaning pays for it.
func (cl *cleaning) isLastOfProducer(h *record.BatchHeader) (bool, error) {
	if cl.producers == nil {
		cl.producers = map[int64]*producerLast{}
		for _, src := range cl.all {
			sc := newBatchScanner(src.file, 0, src.size, record.HeaderSize)
			for {
				_, b, _, err := sc.next(false)
				if err == io.EOF {
					break
				}
				if err != nil {
					return false, fmt.Errorf("segment %s: %w", segmentName(src.base), err)
				}
				if b.ProducerID == record.NoProducerID {
					continue
				}
				p := cl.producers[b.ProducerID]
				if p == nil {
					p = &producerLast{dataOffset: -1, epoch: b.ProducerEpoch}
					cl.producers[b.ProducerID] = p
				}
				switch {
				case !b.Attributes.Control():
					p.dataOffset, p.epoch, p.bumped = b.LastOffset(), b.ProducerEpoch, false
				case b.ProducerEpoch > p.epoch:
					p.epoch, p.bumped = b.ProducerEpoch, true
				}
			}
		}
	}
	p := cl.producers[h.ProducerID]
	switch {
	case p == nil:
		return false, nil
	case p.dataOffset >= 0 && !p.bumped:
		return !h.Attributes.Control() && h.LastOffset() == p.dataOffset, nil
	default:
		return h.Attributes.Control() && h.ProducerEpoch == p.epoch, nil
	}
}

// cleanedTxns follows the transactions of the log as the cleaner reads it
// in order (Kafka's CleanedTransactionMetadata): which batches belong to an
// aborted transaction, and which markers end a transaction that has no
// batch left.
type cleanedTxns struct {
	pending []AbortedTxn // by first offset: aborted transactions not yet reached
	// aborted holds, by producer, the aborted transaction the reader is
	// in: reached its first offset, not yet its ABORT marker.
	aborted map[int64]*abortedTxnRead
	// committed holds the producers of which a transactional batch not
	// aborted was read since their last marker.
	committed map[int64]bool
}

type abortedTxnRead struct {
	readData bool // a batch of it was read
}

// newCleanedTxns follows the aborted transactions of txns whose markers
// are at or after from, the offset the reader starts at (Kafka's
// collectAbortedTransactions: a transaction that ended before it is of no
// concern, and would wrongly abort its producer's next one).
func newCleanedTxns(txns []AbortedTxn, from int64) *cleanedTxns {
	t := &cleanedTxns{aborted: map[int64]*abortedTxnRead{}, committed: map[int64]bool{}}
	for _, txn := range txns {
		if txn.LastOffset >= from {
			t.pending = append(t.pending, txn)
		}
	}
	slices.SortStableFunc(t.pending, func(a, b AbortedTxn) int { return cmpInt64(a.FirstOffset, b.FirstOffset) })
	return t
}

// reach starts the aborted transactions that begin at or before offset.
func (t *cleanedTxns) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		txn := t.pending[0]
		t.pending = t.pending[1:]
		if _, ok := t.aborted[txn.ProducerID]; !ok {
			t.aborted[txn.ProducerID] = &abortedTxnRead{}
		}
	}
}

// onBatch takes in a data batch and reports whether it belongs to an
// aborted transaction (Kafka's onBatchRead).
func (t *cleanedTxns) onBatch(h *record.BatchHeader) bool {
	t.reach(h.LastOffset())
	if !h.Attributes.Transactional() {
		return false
	}
	if a, ok := t.aborted[h.ProducerID]; ok {
		a.readData = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onMarker takes in a control batch and reports whether it may go, its
// transaction having no batch left in the log (none was read since the
// producer's previous marker; Kafka's onControlBatchRead), and whether it
// is an ABORT marker. An empty control batch (its record cleaned away
// before) may go; one that is not a transaction marker stays.
func (t *cleanedTxns) onMarker(h *record.BatchHeader, batch []byte) (discardable, abort bool) {
	t.reach(h.LastOffset())
	if h.NumRecords == 0 {
		return true, false
	}
	m, err := record.ReadMarker(h, batch)
	if err != nil {
		return false, false
	}
	if m.Commit {
		read := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !read, false
	}
	a, ok := t.aborted[h.ProducerID]
	delete(t.aborted, h.ProducerID)
	return !ok || !a.readData, true
}
