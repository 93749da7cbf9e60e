package commitlog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// File name suffixes, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted" // a segment waiting out file.delete.delay.ms
	cleanedSuffix   = ".cleaned" // a segment the log cleaner is writing
	swapSuffix      = ".swap"    // a cleaned segment ready to replace the ones it was made from
)

// segmentSuffixes are a segment's files: the .txnindex exists only once a
// transaction aborted in the segment (txnindex.go).
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

// segmentName is the file name prefix of a segment: its base offset padded
// to 20 digits, so that names sort like offsets.
func segmentName(baseOffset int64) string { return fmt.Sprintf("%020d", baseOffset) }

// recoveryWindow is how much recovery reads at a time.
const recoveryWindow = 1 << 20

// build 01.I: the segment: a .log file and its indexes; append, look up, recover, truncate, roll
// tests: TestAppendAssignsOffsetsInPlace, TestReadReturnsRegionFromBatchHoldingOffset, TestRollOnSegmentBytes, TestRecoveryKeepsEveryWholeBatchBeforeATornTail, TestTruncateToRemovesTailAcrossSegments, TestMissingIndexesAreRebuiltIdentically

// lookupWindow is how much a lookup reads at a time: the index puts an entry
// every index.interval.bytes, so one interval plus a header covers the scan
// from an entry to the batch sought, unless batches are large.
func (s *segment) lookupWindow() int {
	return min(max(s.cfg.IndexIntervalBytes, 0)+2*record.HeaderSize, 64<<10)
}

// segment is one .log file with its two indexes. Its base offset is the
// offset of its first batch; its files are named after it.
//
// Locking, field group by field group below:
//   - The Log's lock guards a segment: appends and truncation hold it for
//     writing, reads for reading.
//   - The files and indexes of a segment that is not active are opened on
//     first use (Kafka's lazy indexes, KIP-263), so that opening a log with
//     many segments reads none of them. loadMu serializes that first use
//     among readers that hold only the Log's read lock; once loaded is set,
//     readers take no segment lock at all.
//   - A flush runs without the Log's lock (a background flush after a roll
//     must not stall appends). It holds closeMu for reading while it
//     fsyncs; close takes it for writing. Close happens only to a segment
//     that has left the log (deleted after file.delete.delay.ms) or when
//     the Log closes, so neither a reader nor an appender ever waits for an
//     fsync.
type segment struct {
	dir        string
	baseOffset int64
	cfg        *Config // the log's config; indexes read the interval and size from it
	logger     *slog.Logger
	fileSuffix string // after every file name: ".cleaned" while the cleaner writes the segment, else ""

	// Written under the Log's write lock only.
	size                     int64 // bytes of whole batches in the .log file
	bytesSinceLastIndexEntry int   // log bytes appended since the last index entry
	rollingBasedTimestamp    int64 // max timestamp of the first batch (segment.ms); -1 if none
	created                  time.Time
	// lastModified is Kafka's LogSegment.lastModified, the .log file's
	// mtime: set by the Log's clock when the segment rolls (and written to
	// the file then, so that it survives a restart), read from the file
	// for a segment found on disk. The cleaner's tombstone rule counts from
	// it (cleaner.go).
	lastModified time.Time

	// Written under the Log's write lock, or under its read lock with loadMu
	// held when a reader loads the segment lazily; read after load or
	// loadTimestamps returned.
	maxTimestamp         int64 // largest batch timestamp so far; -1 until known
	offsetOfMaxTimestamp int64 // last offset of the batch that carried maxTimestamp
	timestampsLoaded     bool  // maxTimestamp reflects the time index

	loadMu  sync.Mutex   // serializes loading among readers holding the Log's read lock
	closeMu sync.RWMutex // held for reading by flush, for writing by close
	// loaded is set, with loadMu and closeMu held, once the fields below
	// are: readers check it without a lock.
	loaded  atomic.Bool
	file    *os.File     // the .log file
	offsets *offsetIndex // the .index file
	times   *timeIndex   // the .timeindex file

	txns txnIndex // the .txnindex file (txnindex.go), loaded on its own first use
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.baseOffset)+suffix+s.fileSuffix)
}

// createSegment creates an empty segment's files: the new active segment.
func createSegment(dir string, baseOffset int64, cfg *Config, logger *slog.Logger, now time.Time) (*segment, error) {
	return createSegmentFiles(dir, baseOffset, cfg, logger, now, "")
}

// createSegmentFiles creates an empty segment whose file names end with
// fileSuffix: "" for a log's segment, cleanedSuffix for the cleaner's.
func createSegmentFiles(dir string, baseOffset int64, cfg *Config, logger *slog.Logger, now time.Time, fileSuffix string) (*segment, error) {
	s := &segment{dir: dir, baseOffset: baseOffset, cfg: cfg, logger: logger, fileSuffix: fileSuffix,
		maxTimestamp: -1, offsetOfMaxTimestamp: baseOffset, timestampsLoaded: true,
		rollingBasedTimestamp: -1, created: now, lastModified: now}
	f, err := os.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", segmentName(baseOffset), err)
	}
	s.file = f
	if err := s.openIndexes(); err != nil {
		f.Close()
		return nil, err
	}
	s.loaded.Store(true)
	return s, nil
}

// existingSegment describes a segment found on disk without opening it.
func existingSegment(dir string, baseOffset, size int64, modTime time.Time, cfg *Config, logger *slog.Logger) *segment {
	return &segment{dir: dir, baseOffset: baseOffset, cfg: cfg, logger: logger, size: size,
		maxTimestamp: -1, offsetOfMaxTimestamp: baseOffset, rollingBasedTimestamp: -1, created: modTime, lastModified: modTime}
}

func (s *segment) openIndexes() error {
	var err error
	if s.offsets, err = openOffsetIndex(s.path(indexSuffix), s.baseOffset, s.cfg.SegmentIndexBytes); err != nil {
		return fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
	}
	if s.times, err = openTimeIndex(s.path(timeIndexSuffix), s.baseOffset, s.cfg.SegmentIndexBytes); err != nil {
		s.offsets.close()
		return fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
	}
	return nil
}

// load opens the segment's files on first use. A missing or corrupt index
// is rebuilt from the log. The log itself is trusted here: recovery, which
// truncates bad data, has already run over every segment it had to.
func (s *segment) load() error {
	if s.loaded.Load() {
		return nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loaded.Load() {
		return nil
	}
	rebuild, err := s.openFiles()
	if err != nil {
		return err
	}
	if !rebuild {
		if err := s.offsets.sanityCheck(max(s.size, 1)); err != nil {
			s.logger.Warn("rebuilding corrupt index", "segment", segmentName(s.baseOffset), "err", err)
			rebuild = true
		} else if err := s.times.sanityCheck(); err != nil {
			s.logger.Warn("rebuilding corrupt time index", "segment", segmentName(s.baseOffset), "err", err)
			rebuild = true
		}
	}
	if rebuild {
		valid, err := s.rebuildIndexes(math.MaxInt64)
		if err != nil && !isDamage(err) {
			s.closeFiles()
			return err
		}
		if valid < s.size {
			// Below the recovery point the data was flushed and trusted,
			// so a bad batch here is damage after the fact. Index what is
			// readable and leave the bytes alone: deleting data is
			// recovery's call, not a reader's.
			s.logger.Error("segment holds invalid data below the recovery point",
				"segment", segmentName(s.baseOffset), "valid_bytes", valid, "size", s.size, "err", err)
		}
	}
	if err := s.trimIndexes(); err != nil {
		s.closeFiles()
		return err
	}
	s.setLoaded(true)
	return nil
}

// setLoaded publishes (or withdraws) the open files. Called with loadMu
// held; closeMu orders it against a flush that is using the files.
func (s *segment) setLoaded(loaded bool) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.loaded.Store(loaded)
}

// openFiles opens the .log file and both indexes. An index file that is
// missing, or whose size is not a whole number of entries, is replaced by an
// empty one and rebuild is set. Called with loadMu held.
func (s *segment) openFiles() (rebuild bool, err error) {
	f, err := os.OpenFile(s.path(logSuffix), os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("open segment %s: %w", segmentName(s.baseOffset), err)
	}
	s.file = f
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(s.path(suffix)); errors.Is(err, os.ErrNotExist) {
			s.logger.Info("rebuilding missing index", "file", segmentName(s.baseOffset)+suffix)
			rebuild = true
		}
	}
	err = s.openIndexes()
	if errors.Is(err, errCorruptIndex) {
		s.logger.Warn("rebuilding corrupt index", "segment", segmentName(s.baseOffset), "err", err)
		os.Remove(s.path(indexSuffix))
		os.Remove(s.path(timeIndexSuffix))
		rebuild = true
		err = s.openIndexes()
	}
	if err != nil {
		f.Close()
		return false, err
	}
	return rebuild, nil
}

// closeFiles closes what openFiles opened. Called with loadMu held.
func (s *segment) closeFiles() error {
	return errors.Join(s.offsets.close(), s.times.close(), s.file.Close())
}

// trimIndexes shrinks both index files to their entries.
func (s *segment) trimIndexes() error {
	return errors.Join(s.offsets.resize(0), s.times.resize(0))
}

// growIndexes makes room for new entries: the segment is becoming active.
func (s *segment) growIndexes() error {
	return errors.Join(s.offsets.resize(s.cfg.SegmentIndexBytes), s.times.resize(s.cfg.SegmentIndexBytes))
}

// rebuildIndexes empties both indexes and refills them from the log,
// validating every batch. Offsets must increase and stay below limit, the
// next segment's base offset (math.MaxInt64 when unknown). It returns the
// bytes of valid batches from the start; err says why the scan stopped
// before the end.
func (s *segment) rebuildIndexes(limit int64) (validBytes int64, err error) {
	s.offsets.truncateEntries(0)
	s.times.truncateEntries(0)
	if err := s.growIndexes(); err != nil {
		return 0, err
	}
	s.bytesSinceLastIndexEntry = 0
	s.maxTimestamp, s.offsetOfMaxTimestamp, s.timestampsLoaded = -1, s.baseOffset, true
	s.rollingBasedTimestamp = -1

	// exercise 01.4: scan a segment batch by batch, stopping at the first bad one
	// hint: trust nothing: read whole batches with the segment scanner, check that their offsets go on within limit, index each good one, and stop at the first that fails
	// tests: TestASegmentScanStopsAtTheFirstBadBatch, TestMissingIndexesAreRebuiltIdentically, TestCorruptIndexesAreRebuilt
	fi, err := s.file.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat segment %s: %w", segmentName(s.baseOffset), err)
	}
	sc := newBatchScanner(s.file, 0, fi.Size(), recoveryWindow)
	next := s.baseOffset
	for {
		pos, h, _, err := sc.next(true)
		if err == io.EOF {
			return pos, nil
		}
		// LastOffset below BaseOffset: baseOffset+lastOffsetDelta overflows.
		if err == nil && (h.BaseOffset < next || h.LastOffset() < h.BaseOffset ||
			h.LastOffset()-s.baseOffset > math.MaxInt32 || h.LastOffset() >= limit) {
			err = fmt.Errorf("%w: batch at position %d has offsets %d..%d, expected from %d and below %d",
				record.ErrInvalidRecord, pos, h.BaseOffset, h.LastOffset(), next, limit)
		}
		if err != nil {
			return pos, err
		}
		if err := s.indexBatch(pos, &h); err != nil {
			return pos, err
		}
		next = h.NextOffset()
	}
	// end exercise
}

// indexBatch updates the segment's timestamps and indexes for the batch
// just written at pos: Kafka's rule is to add an entry to both indexes when
// more than index.interval.bytes were written since the last one. Appends
// and recovery share this, so a rebuilt index equals the original.
func (s *segment) indexBatch(pos int64, h *record.BatchHeader) error {
	if s.rollingBasedTimestamp < 0 && pos == 0 {
		s.rollingBasedTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceLastIndexEntry > s.cfg.IndexIntervalBytes {
		if err := s.offsets.append(h.LastOffset(), int32(pos)); err != nil {
			return err
		}
		if err := s.times.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
			return err
		}
		s.bytesSinceLastIndexEntry = 0
	}
	s.bytesSinceLastIndexEntry += h.Size()
	return nil
}

// append writes whole batches (already validated, offsets assigned) at the
// end of the log with one write, then indexes them.
func (s *segment) append(data []byte, headers []record.BatchHeader) error {
	if _, err := s.file.WriteAt(data, s.size); err != nil {
		return fmt.Errorf("append to segment %s: %w", segmentName(s.baseOffset), err)
	}
	pos := s.size
	for i := range headers {
		if err := s.indexBatch(pos, &headers[i]); err != nil {
			return err
		}
		pos += int64(headers[i].Size())
	}
	s.size = pos
	return nil
}

// recover validates the segment from its start, rebuilding its indexes and
// truncating it at the first bad or torn batch, or the first that reaches
// limit, the next segment's base offset (math.MaxInt64 for the last
// segment). It returns the number of bytes truncated.
func (s *segment) recover(limit int64) (truncated int64, err error) {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if !s.loaded.Load() {
		// Recovery rebuilds the indexes anyway: open the files without
		// checking the old ones (an index preallocated by the process that
		// crashed always looks corrupt).
		if _, err := s.openFiles(); err != nil {
			return 0, err
		}
		s.setLoaded(true)
	}
	valid, scanErr := s.rebuildIndexes(limit)
	if scanErr != nil && !isDamage(scanErr) {
		return 0, scanErr // an I/O error, not bad data: do not truncate
	}
	fi, err := s.file.Stat()
	if err != nil {
		return 0, err
	}
	if valid < fi.Size() {
		s.logger.Warn("truncating invalid bytes at the end of a segment", "segment", segmentName(s.baseOffset),
			"position", valid, "bytes", fi.Size()-valid, "reason", scanErr)
		if err := s.file.Truncate(valid); err != nil {
			return 0, fmt.Errorf("truncate segment %s: %w", segmentName(s.baseOffset), err)
		}
	}
	s.size = valid
	// Aborted transactions whose markers were cut off go too; stage 04
	// adds back those whose markers it finds when it replays the log.
	next, err := s.readNextOffset()
	if err != nil {
		return 0, err
	}
	if err := s.truncateTxns(next); err != nil {
		return 0, err
	}
	return fi.Size() - valid, nil
}

// loadTimestamps fills maxTimestamp from the time index's last entry, which
// is the newest timestamp of a segment that is not active. Readers holding
// the Log's read lock may call it together, hence loadMu.
func (s *segment) loadTimestamps() error {
	if err := s.load(); err != nil {
		return err
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.timestampsLoaded {
		return nil
	}
	if ts, off := s.times.lastEntry(); ts > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = ts, off
	}
	s.timestampsLoaded = true
	return nil
}

// readNextOffset finds the offset after the last batch: from the last
// offset index entry, scan to the end (at most an interval of batches).
func (s *segment) readNextOffset() (int64, error) {
	if err := s.load(); err != nil {
		return 0, err
	}
	next := s.baseOffset
	_, pos := s.offsets.lookup(math.MaxInt64)
	sc := newLookupScanner(s.file, int64(pos), s.size, s.lookupWindow())
	defer sc.release()
	for {
		_, h, _, err := sc.next(false)
		if err == io.EOF {
			return next, nil
		}
		if err != nil {
			return 0, fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
		}
		next = h.NextOffset()
	}
}

// translateOffset finds the first batch at or after startPos whose last
// offset is >= target, scanning forward from the index entry at or below
// target. found is false when the segment has no such batch.
func (s *segment) translateOffset(target int64) (pos int64, h record.BatchHeader, found bool, err error) {
	if err := s.load(); err != nil {
		return 0, h, false, err
	}
	indexed, start := s.offsets.lookup(target)
	sc := newLookupScanner(s.file, int64(start), s.size, s.lookupWindow())
	defer sc.release()
	for first := true; ; first = false {
		pos, h, _, err := sc.next(false)
		if first && pos > 0 && (err != nil || h.BaseOffset > indexed) {
			// An entry names the position of a batch that starts at or
			// before its offset. This one does not: the index was damaged
			// in a way its sanity check cannot see (positions that still
			// increase but point at a later batch, or inside one), and
			// scanning from it would skip the batch sought. Scan from the
			// segment's start instead: slow, but right.
			s.logger.Warn("index entry does not point at its batch: scanning the segment",
				"segment", segmentName(s.baseOffset), "offset", indexed, "position", pos, "err", err)
			sc.pos = 0
			continue
		}
		if err == io.EOF {
			return 0, h, false, nil
		}
		if err != nil {
			return 0, h, false, fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
		}
		if h.LastOffset() >= target {
			return pos, h, true, nil
		}
	}
}

// findBatchByTimestamp returns the first batch whose max timestamp is >= ts
// and whose last offset is >= from, as Kafka's LogSegment.findOffsetByTimestamp
// starts: the time index gives a batch to start from, and batches are then
// skipped by their headers. Called with the Log's read lock held.
func (s *segment) findBatchByTimestamp(ts, from int64) (pos int64, h record.BatchHeader, found bool, err error) {
	if err := s.load(); err != nil {
		return 0, h, false, err
	}
	_, fromOffset := s.times.lookup(ts)
	start, _, ok, err := s.translateOffset(max(fromOffset, from))
	if err != nil || !ok {
		return 0, h, false, err
	}
	sc := newLookupScanner(s.file, start, s.size, s.lookupWindow())
	defer sc.release()
	for {
		pos, h, _, err := sc.next(false)
		if err == io.EOF {
			return 0, h, false, nil
		}
		if err != nil {
			return 0, h, false, fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= from {
			return pos, h, true, nil
		}
	}
}

// maxTimestampFrom is the largest max timestamp of the segment's batches
// from the one holding offset from on, read header by header; -1 if none.
func (s *segment) maxTimestampFrom(from int64) (int64, error) {
	start, _, ok, err := s.translateOffset(from)
	if err != nil || !ok {
		return -1, err
	}
	sc := newLookupScanner(s.file, start, s.size, s.lookupWindow())
	defer sc.release()
	best := int64(-1)
	for {
		_, h, _, err := sc.next(false)
		if err == io.EOF {
			return best, nil
		}
		if err != nil {
			return -1, fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
		}
		best = max(best, h.MaxTimestamp)
	}
}

// truncateTo removes every batch whose last offset is >= offset and returns
// the offset after the last batch kept.
func (s *segment) truncateTo(offset int64) (next int64, err error) {
	pos, h, found, err := s.translateOffset(offset)
	if err != nil {
		return 0, err
	}
	if !found {
		return s.readNextOffset()
	}
	s.offsets.truncateTo(h.BaseOffset)
	s.times.truncateTo(h.BaseOffset)
	if err := s.truncateTxns(h.BaseOffset); err != nil {
		return 0, err
	}
	if err := s.file.Truncate(pos); err != nil {
		return 0, fmt.Errorf("truncate segment %s: %w", segmentName(s.baseOffset), err)
	}
	s.size = pos
	// The max timestamp may have been in the removed batches; the time index
	// holds the best value still true (Kafka does the same).
	s.maxTimestamp, s.offsetOfMaxTimestamp = s.times.lastEntry()
	if pos == 0 {
		s.rollingBasedTimestamp = -1
	}
	return h.BaseOffset, nil
}

// shouldRoll reports why the active segment must be closed before a batch
// of size bytes with the given max timestamp and last offset is appended,
// or "" if it need not be.
func (s *segment) shouldRoll(size int, maxTimestamp, lastOffset int64, now func() time.Time) string {
	switch {
	case s.size == 0:
		return "" // an empty segment takes any batch that fits in a segment at all
	case s.size+int64(size) > s.cfg.SegmentBytes:
		return "segment.bytes"
	case s.cfg.SegmentMs != Never && s.timeWaitedForRoll(now, maxTimestamp) > s.cfg.SegmentMs:
		return "segment.ms"
	case s.offsets.isFull() || s.times.isFull():
		return "index full"
	case lastOffset-s.baseOffset > math.MaxInt32:
		return "relative offset overflow"
	}
	return ""
}

// loadRollingTimestamp reads the first batch's max timestamp, which
// segment.ms counts from, for a segment that was opened rather than created.
func (s *segment) loadRollingTimestamp() error {
	if s.rollingBasedTimestamp >= 0 || s.size == 0 {
		return nil
	}
	_, h, _, err := newBatchScanner(s.file, 0, s.size, record.HeaderSize).next(false)
	if err != nil {
		return fmt.Errorf("segment %s: %w", segmentName(s.baseOffset), err)
	}
	s.rollingBasedTimestamp = h.MaxTimestamp
	return nil
}

// timeWaitedForRoll is how old the segment is for segment.ms, as Kafka
// measures it: the new batch's timestamp minus the first batch's, so that
// producers sending old timestamps do not roll a segment per append; the
// wall clock only when the segment holds no timestamp yet.
// The clock is read only in that last case: appends do not pay for it.
func (s *segment) timeWaitedForRoll(now func() time.Time, batchTimestamp int64) time.Duration {
	if s.rollingBasedTimestamp >= 0 {
		return time.Duration(batchTimestamp-s.rollingBasedTimestamp) * time.Millisecond
	}
	return now().Sub(s.created)
}

// setLastModified records when the segment was last written, in memory and
// as the .log file's mtime, as Kafka's LogSegment.lastModified_= does. A
// failure is logged, not returned: the time only guides the cleaner.
func (s *segment) setLastModified(t time.Time) {
	s.lastModified = t
	if err := os.Chtimes(s.path(logSuffix), t, t); err != nil {
		s.logger.Warn("set segment modification time", "segment", segmentName(s.baseOffset), "err", err)
	}
}

// ensureIndexRoom makes room in both indexes for n more entries, growing
// them by at least half, for the cleaner's segment: unlike the active
// segment, it cannot roll when an index fills.
func (s *segment) ensureIndexRoom(n int) error {
	var errs []error
	for _, idx := range []*mmapIndex{s.offsets.mmapIndex, s.times.mmapIndex} {
		if need := (idx.entries + n) * idx.entrySize; need > len(idx.data) {
			errs = append(errs, idx.resize(max(need, len(idx.data)+len(idx.data)/2)))
		}
	}
	return errors.Join(errs...)
}

// onBecomeInactive is called when the segment stops being the active one:
// the time index gets a final entry for the newest timestamp, and both
// indexes are trimmed to their entries.
func (s *segment) onBecomeInactive() error {
	if err := s.times.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, true); err != nil {
		return err
	}
	return s.trimIndexes()
}

// syncFile is fsync; tests replace it to make a flush take its time.
var syncFile = (*os.File).Sync

// flush forces the segment's data and indexes to disk. It runs without
// the Log's lock and takes no lock a reader or an appender takes: closeMu,
// held for reading, only keeps close from releasing the file meanwhile.
func (s *segment) flush() error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if !s.loaded.Load() {
		return nil // never opened (nothing written since) or closed
	}
	if err := syncFile(s.file); err != nil {
		return fmt.Errorf("fsync segment %s: %w", segmentName(s.baseOffset), err)
	}
	return errors.Join(s.offsets.flush(), s.times.flush(), s.syncTxns())
}

// close releases the segment's files. The indexes are trimmed, so a clean
// shutdown leaves no preallocated space behind. It waits for a flush in
// progress.
func (s *segment) close() error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if !s.loaded.Load() {
		return nil
	}
	s.setLoaded(false)
	return s.closeFiles()
}

// markDeleted renames the segment's files with the .deleted suffix: they are
// no longer part of the log, but a read handed out earlier can still use the
// open file until it is removed after file.delete.delay.ms.
func (s *segment) markDeleted() error {
	s.detachIndexes()
	var errs []error
	for _, suffix := range segmentSuffixes {
		if err := os.Rename(s.path(suffix), s.path(suffix)+deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// detachIndexes cuts the indexes off their paths before the files or the
// directory are renamed for deletion (mmapIndex.deleted). Called with the
// Log's write lock held, so no reader is loading the segment meanwhile.
func (s *segment) detachIndexes() {
	if s.loaded.Load() {
		s.offsets.markDeleted()
		s.times.markDeleted()
	}
}

// removeDeleted closes the segment and removes its .deleted files.
func (s *segment) removeDeleted() error {
	errs := []error{s.close()}
	for _, suffix := range segmentSuffixes {
		if err := os.Remove(s.path(suffix) + deletedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove closes the segment and deletes its files at once (truncation).
func (s *segment) remove() error {
	errs := []error{s.close()}
	for _, suffix := range segmentSuffixes {
		if err := os.Remove(s.path(suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// end build
