package commitlog

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Errors a Log returns; test for them with errors.Is.
var (
	// ErrOffsetOutOfRange: a read below the log start or past the log end
	// (Kafka's OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("commitlog: offset out of range")
	// ErrBatchTooLarge: a batch bigger than segment.bytes can never fit.
	ErrBatchTooLarge = errors.New("commitlog: batch larger than segment.bytes")
	// ErrUnexpectedOffset: a follower append that does not continue the log.
	ErrUnexpectedOffset = errors.New("commitlog: append does not continue the log")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("commitlog: log closed")
)

// Options are the parts of opening a log that are not Kafka configuration.
type Options struct {
	// RecoveryPoint is the offset below which the log is known to be on
	// disk, from the recovery-point-offset-checkpoint file. After an
	// unclean shutdown recovery starts at the segment that holds it.
	RecoveryPoint int64
	// LogStartOffset is the first offset a reader may ask for, from the
	// log-start-offset-checkpoint file; 0 if unknown.
	LogStartOffset int64
	// CleanShutdown says the log was closed cleanly (the log directory had
	// Kafka's .kafka_cleanshutdown marker): recovery is skipped.
	CleanShutdown bool
	// Now is the clock for segment.ms, retention.ms and flush.ms; time.Now
	// if nil. Tests move it instead of sleeping.
	Now func() time.Time
	// Logger receives recovery and retention events; slog.Default if nil.
	Logger *slog.Logger
	// FirstDirtyOffset is the log cleaner's checkpoint for this log, from
	// the cleaner-offset-checkpoint file: offsets below it were compacted.
	// 0 if unknown (the cleaner then starts at the log start offset).
	FirstDirtyOffset int64
}

// Log is one partition's commit log: a directory of segments, appended to at
// the end and read from anywhere (seed §2.1.2, §2.1.4).
//
//	<dir>/00000000000000000000.log        batches with offsets 0 .. 9311
//	      00000000000000000000.index      sparse offset -> position
//	      00000000000000000000.timeindex  sparse timestamp -> offset
//	      00000000000000009312.log        the active segment: appends go here
//	      00000000000000009312.index      preallocated, memory-mapped
//	      00000000000000009312.timeindex
//
// A Log is safe for concurrent use: appends and truncation take its lock for
// writing, reads take it for reading.
type Log struct {
	dir    string
	cfg    Config
	now    func() time.Time
	logger *slog.Logger

	mu             sync.RWMutex
	segments       []*segment               // by base offset; the last is the active one. Protected by mu.
	nextOffset     int64                    // the log end offset (LEO). Protected by mu.
	logStartOffset int64                    // first readable offset. Protected by mu.
	recoveryPoint  int64                    // offsets below are flushed to disk. Protected by mu.
	lastFlush      time.Time                // when Flush last finished. Protected by mu.
	closed         bool                     // Protected by mu.
	deleting       map[*segment]*time.Timer // segments waiting out file.delete.delay.ms. Protected by mu.
	// firstDirtyOffset is the cleaner's checkpoint (cleaner-offset-checkpoint):
	// offsets below it have been compacted. A truncation lowers it, as
	// Kafka's maybeTruncateCheckpoint does. Protected by mu.
	firstDirtyOffset int64
	// truncations counts truncations, so that a cleaning that started
	// before one can tell and abort instead of swapping in segments made
	// from data that is gone. Protected by mu.
	truncations uint64

	background sync.WaitGroup // flushes started by rolls
}

// Open opens the log in dir, creating dir if needed. After an unclean
// shutdown it recovers as Kafka does: every segment from the one holding the
// recovery point is validated batch by batch and its indexes rebuilt; at the
// first bad or torn batch the segment is truncated and every later segment
// deleted. Other segments are not read or mapped until first used.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log %s: %w", dir, err)
	}
	l := &Log{dir: dir, cfg: cfg, now: opts.Now, logger: opts.Logger, deleting: map[*segment]*time.Timer{},
		firstDirtyOffset: opts.FirstDirtyOffset}
	if l.now == nil {
		l.now = time.Now
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.logger = l.logger.With("log", filepath.Base(dir))
	l.lastFlush = l.now()
	if err := l.loadSegments(); err != nil {
		l.closeSegments()
		return nil, err
	}
	if err := l.recover(opts); err != nil {
		l.closeSegments()
		return nil, err
	}
	return l, nil
}

// loadSegments lists the directory: segments are described, not opened,
// leftovers of interrupted deletions are removed, and a compaction that a
// crash interrupted is rolled back or completed (completeSwaps).
func (l *Log) loadSegments() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("open log %s: %w", l.dir, err)
	}
	logs := map[int64]os.FileInfo{}
	var indexes, swaps, txnSwaps []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, txnIndexSuffix+swapSuffix):
			// A swap's aborted transactions: completeSwap keeps it if its
			// .log.swap is there too, and it is removed below if not.
			txnSwaps = append(txnSwaps, name)
		case strings.HasSuffix(name, logSuffix+swapSuffix):
			// A cleaned segment that was complete (fsynced) when the crash
			// came: the swap goes ahead below.
			swaps = append(swaps, name)
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, cleanedSuffix), strings.HasSuffix(name, swapSuffix):
			// A deletion that a crash interrupted (the segment was already
			// out of the log), a cleaned segment not finished (the
			// compaction is abandoned: the old segments are all there), or
			// the index of a swap (rebuilt from its log file, as Kafka does).
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("remove leftover %s: %w", name, err)
			}
		case strings.HasSuffix(name, logSuffix):
			base, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
			if err != nil || base < 0 {
				return fmt.Errorf("open log %s: %s is not named by a base offset", l.dir, name)
			}
			if logs[base], err = e.Info(); err != nil {
				return fmt.Errorf("open log %s: %w", l.dir, err)
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
			indexes = append(indexes, name)
		}
	}
	for _, name := range swaps {
		if err := l.completeSwap(name, logs); err != nil {
			return err
		}
	}
	for _, name := range txnSwaps {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove leftover %s: %w", name, err)
		}
	}
	for _, name := range indexes {
		prefix := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, timeIndexSuffix), indexSuffix), txnIndexSuffix)
		if base, err := strconv.ParseInt(prefix, 10, 64); err != nil || logs[base] == nil {
			l.logger.Warn("removing index without a log file", "file", name)
			os.Remove(filepath.Join(l.dir, name))
		}
	}
	bases := make([]int64, 0, len(logs))
	for base := range logs {
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for _, base := range bases {
		info := logs[base]
		l.segments = append(l.segments, existingSegment(l.dir, base, info.Size(), info.ModTime(), &l.cfg, l.logger))
	}
	return nil
}

// recover runs recovery if the shutdown was unclean, then prepares the
// active segment for appends.
func (l *Log) recover(opts Options) error {
	clean := opts.CleanShutdown
	if len(l.segments) == 0 {
		s, err := createSegment(l.dir, max(opts.LogStartOffset, 0), &l.cfg, l.logger, l.now())
		if err != nil {
			return err
		}
		l.segments = []*segment{s}
	} else if !clean {
		if err := l.recoverFrom(opts.RecoveryPoint); err != nil {
			return err
		}
	}
	next, err := l.openActive()
	if err != nil && clean && isDamage(err) {
		// The marker says the log was closed cleanly, yet its end does
		// not parse: the disk or an operator changed it since. Kafka
		// would take the log directory offline; recovering this one log
		// keeps the others, and this one, serving.
		l.logger.Warn("log damaged despite a clean shutdown: recovering it", "err", err)
		clean = false
		if err := l.recoverFrom(min(opts.RecoveryPoint, l.activeSegment().baseOffset)); err != nil {
			return err
		}
		next, err = l.openActive()
	}
	if err != nil {
		return err
	}
	l.nextOffset = next
	l.logStartOffset = min(max(opts.LogStartOffset, l.segments[0].baseOffset), next)
	if clean {
		l.recoveryPoint = next
	} else {
		l.recoveryPoint = min(opts.RecoveryPoint, next)
	}
	return nil
}

// openActive loads the active segment, finds the log end offset in it and
// readies it for appends.
func (l *Log) openActive() (next int64, err error) {
	active := l.activeSegment()
	if err := active.load(); err != nil {
		return 0, err
	}
	if next, err = active.readNextOffset(); err != nil {
		return 0, err
	}
	return next, l.resumeAppends(active)
}

// isDamage reports whether err means bad bytes in a segment, which recovery
// can cut off, rather than an I/O failure, which it cannot.
func isDamage(err error) bool { return record.IsCorrupt(err) || errors.Is(err, errTornBatch) }

// recoverFrom validates every segment from the one holding recoveryPoint.
func (l *Log) recoverFrom(recoveryPoint int64) error {
	// exercise 01.5: recover a log from its recovery point
	// hint: segments before the one holding the recovery point are trusted; from it on each is scanned, and a segment cut short ends the log
	// tests: TestRecoveryKeepsEveryWholeBatchBeforeATornTail, TestRecoveryTruncatesAtACorruptBatchAndDropsLaterSegments, TestRecoveryStartsAtTheRecoveryPoint, TestManagerRecoversAfterACrash, FuzzRecovery
	start := max(l.segmentIndexFor(recoveryPoint), 0)
	scanned, skipped := 0, start
	defer func() {
		l.logger.Info("recovery scanned the segments from the recovery point", "recovery_point", recoveryPoint,
			"segments_scanned", scanned, "segments_trusted", skipped)
	}()
	for i := start; i < len(l.segments); i++ {
		scanned++
		s := l.segments[i]
		// A batch's baseOffset lies outside its CRC: one changed on disk
		// can reach into the next segment's offsets, which would make the
		// log's offsets go backwards from one segment to the next.
		limit := int64(math.MaxInt64)
		if i < len(l.segments)-1 {
			limit = l.segments[i+1].baseOffset
		}
		truncated, err := s.recover(limit)
		if err != nil {
			return err
		}
		if i < len(l.segments)-1 {
			if err := s.trimIndexes(); err != nil {
				return err
			}
		}
		if truncated > 0 && i < len(l.segments)-1 {
			// Data after a bad batch cannot be trusted to continue the log.
			for _, later := range l.segments[i+1:] {
				l.logger.Warn("deleting segment after a truncated one", "segment", segmentName(later.baseOffset))
				if err := later.remove(); err != nil {
					return err
				}
			}
			l.segments = l.segments[:i+1]
			break
		}
	}
	return nil
	// end exercise
}

// resumeAppends makes s the active segment: its indexes get room again and
// its counters continue from what is on disk.
func (l *Log) resumeAppends(s *segment) error {
	if err := s.load(); err != nil {
		return err
	}
	if err := s.loadTimestamps(); err != nil {
		return err
	}
	if err := s.loadRollingTimestamp(); err != nil {
		return err
	}
	if _, pos := s.offsets.lookup(math.MaxInt64); s.offsets.entries > 0 {
		s.bytesSinceLastIndexEntry = int(s.size - int64(pos))
	} else {
		s.bytesSinceLastIndexEntry = int(s.size)
	}
	return s.growIndexes()
}

func (l *Log) activeSegment() *segment { return l.segments[len(l.segments)-1] }

// build 01.J: the log's append path: check each batch, give it offsets, roll to a new segment when one is full
// tests: TestAppendAssignsOffsetsInPlace, TestAppendRefusesBadBatchesAndWritesNothing, TestAppendAsLeaderStampsEpoch, TestAppendAsFollowerKeepsOffsetsAndRefusesGapsBackwards, TestRollOnSegmentBytes, TestRollOnSegmentMs

// segmentIndexFor returns the index of the segment whose range holds offset:
// the last one with a base offset <= offset, or -1.
func (l *Log) segmentIndexFor(offset int64) int {
	return sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset }) - 1
}

// Append appends one batch as a leader does: it gives the batch the next
// offsets, writing baseOffset into the batch in place, and returns the first
// and last offset. The batch's partitionLeaderEpoch is kept as it is.
// A batch whose CRC, magic or length is wrong is refused and nothing is
// written.
func (l *Log) Append(batch []byte) (first, last int64, err error) {
	return l.append(batch, true, nil)
}

// AppendAsLeader is Append that also stamps the batch with the leader's
// epoch, as stage 03's leaders do (the epoch lies outside the CRC).
func (l *Log) AppendAsLeader(batch []byte, leaderEpoch int32) (first, last int64, err error) {
	return l.append(batch, true, &leaderEpoch)
}

// AppendAsFollower appends batches that already have their offsets and
// epochs, as a follower copies them from its leader. data holds whole
// batches back to back; they must start at or after the log end offset and
// their offsets must increase.
func (l *Log) AppendAsFollower(data []byte) (first, last int64, err error) {
	return l.append(data, false, nil)
}

func (l *Log) append(data []byte, assignOffsets bool, epoch *int32) (first, last int64, err error) {
	var one [1]record.BatchHeader // the common case of a single batch: no allocation
	headers := one[:0]
	var records int64
	for pos := 0; pos < len(data); {
		h, err := record.Validate(data[pos:])
		if err != nil {
			return 0, 0, fmt.Errorf("append to %s: batch at byte %d: %w", l.dir, pos, err)
		}
		headers = append(headers, h)
		records += int64(h.NumRecords)
		pos += h.Size()
	}
	if len(headers) == 0 || (assignOffsets && len(headers) != 1) {
		return 0, 0, fmt.Errorf("append to %s: %w: want exactly one batch, got %d", l.dir, record.ErrInvalidRecord, len(headers))
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, ErrClosed
	}
	for i := range headers { // under the lock: SetConfig may change segment.bytes
		if int64(headers[i].Size()) > l.cfg.SegmentBytes {
			return 0, 0, fmt.Errorf("append to %s: %w: %d bytes, segment.bytes is %d", l.dir, ErrBatchTooLarge, headers[i].Size(), l.cfg.SegmentBytes)
		}
	}
	if assignOffsets {
		h := &headers[0]
		h.BaseOffset = l.nextOffset
		record.SetBaseOffset(data, h.BaseOffset)
		if epoch != nil {
			h.PartitionLeaderEpoch = *epoch
			record.SetPartitionLeaderEpoch(data, *epoch)
		}
	} else {
		expect := l.nextOffset
		for i := range headers {
			if headers[i].LastOffset() < headers[i].BaseOffset { // baseOffset+lastOffsetDelta overflows
				return 0, 0, fmt.Errorf("append to %s: %w: batch %d has offsets %d..%d",
					l.dir, record.ErrInvalidRecord, i, headers[i].BaseOffset, headers[i].LastOffset())
			}
			if headers[i].BaseOffset < expect {
				return 0, 0, fmt.Errorf("append to %s: %w: batch %d starts at offset %d, expected at least %d",
					l.dir, ErrUnexpectedOffset, i, headers[i].BaseOffset, expect)
			}
			expect = headers[i].NextOffset()
		}
	}
	first, last = headers[0].BaseOffset, headers[len(headers)-1].LastOffset()
	maxTimestamp := int64(-1)
	for i := range headers {
		maxTimestamp = max(maxTimestamp, headers[i].MaxTimestamp)
	}

	// Like Kafka, roll once for the whole append: a follower's append of
	// several batches goes into one segment with one write.
	if reason := l.activeSegment().shouldRoll(len(data), maxTimestamp, last, l.now); reason != "" {
		if err := l.roll(reason); err != nil {
			return 0, 0, err
		}
	}
	if err := l.activeSegment().append(data, headers); err != nil {
		return 0, 0, err
	}
	l.nextOffset = last + 1
	if l.nextOffset-l.recoveryPoint >= l.cfg.FlushMessages {
		if err := l.flushLocked(); err != nil {
			return 0, 0, err
		}
	}
	return first, last, nil
}

// roll closes the active segment to appends and starts a new one at the log
// end offset. The old segment is flushed in the background, after which the
// recovery point moves past it: Kafka's only fsync by default.
func (l *Log) roll(reason string) error {
	old := l.activeSegment()
	if old.size == 0 {
		return nil
	}
	if err := old.onBecomeInactive(); err != nil {
		return err
	}
	now := l.now()
	old.setLastModified(now)
	s, err := createSegment(l.dir, l.nextOffset, &l.cfg, l.logger, now)
	if err != nil {
		return err
	}
	l.segments = append(l.segments, s)
	l.logger.Debug("rolled segment", "reason", reason, "new", segmentName(s.baseOffset))
	l.background.Add(1)
	go func() {
		defer l.background.Done()
		if err := l.flushTo(s.baseOffset); err != nil && !errors.Is(err, ErrClosed) {
			l.logger.Error("flush after roll", "err", err)
		}
	}()
	return nil
}

// Roll closes the active segment to appends, as segment.bytes or segment.ms
// would. A log that is empty since the last roll is left as it is.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.roll("requested")
}

// end build

// Flush forces everything appended so far to disk and moves the recovery
// point to the log end offset.
func (l *Log) Flush() error {
	l.mu.RLock()
	end := l.nextOffset
	l.mu.RUnlock()
	return l.flushTo(end)
}

func (l *Log) flushLocked() error {
	start := time.Now()
	for _, s := range l.segments[max(l.segmentIndexFor(l.recoveryPoint), 0):] {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if l.recoveryPoint < l.nextOffset {
		flushed(start)
	}
	l.recoveryPoint, l.lastFlush = l.nextOffset, l.now()
	return nil
}

// flushTo fsyncs the segments holding offsets [recoveryPoint, offset)
// without holding the log's lock, so appends go on meanwhile.
func (l *Log) flushTo(offset int64) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	if offset <= l.recoveryPoint {
		l.mu.RUnlock()
		return nil
	}
	var todo []*segment
	for _, s := range l.segments[max(l.segmentIndexFor(l.recoveryPoint), 0):] {
		if s.baseOffset < offset {
			todo = append(todo, s)
		}
	}
	l.mu.RUnlock()

	start := time.Now()
	for _, s := range todo {
		if err := s.flush(); err != nil {
			return err
		}
	}
	flushed(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset > l.recoveryPoint && offset <= l.nextOffset {
		l.recoveryPoint = offset
	}
	l.lastFlush = l.now()
	return nil
}

// Close flushes the log and releases its files. The active segment's indexes
// are trimmed and its time index gets its final entry, so that reopening
// after a clean shutdown needs no recovery.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	err := l.flushLocked()
	l.closed = true
	l.mu.Unlock()
	l.background.Wait() // background flushes see closed and stop

	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		err = l.activeSegment().onBecomeInactive()
	}
	for s, t := range l.deleting {
		t.Stop()
		err = errors.Join(err, s.removeDeleted())
		delete(l.deleting, s)
	}
	return errors.Join(err, l.closeSegments())
}

// retire takes the log out of service for deletion: appends, reads and
// flushes fail with ErrClosed from now on, but the files stay open, so
// regions handed out before (a fetch response being written) stay readable
// until release.
func (l *Log) retire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, s := range l.segments {
		s.detachIndexes() // the directory is about to be renamed
	}
}

// release closes the files of a retired log, without flushing: the log is
// being deleted.
func (l *Log) release() error {
	l.background.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for s, t := range l.deleting {
		t.Stop()
		errs = append(errs, s.close())
		delete(l.deleting, s)
	}
	return errors.Join(append(errs, l.closeSegments())...)
}

func (l *Log) closeSegments() error {
	var errs []error
	for _, s := range l.segments {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}
