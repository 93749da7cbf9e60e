package commitlog

import (
	"fmt"
	"time"
)

// DeleteOldSegments applies retention.ms and retention.bytes to a log whose
// cleanup.policy includes delete (a compacted log loses records only to
// the cleaner, as in Kafka): it deletes the
// oldest segments whose newest record is older than retention.ms, then the
// oldest while the log is bigger than retention.bytes. Like Kafka, it only
// deletes segments that lie wholly below highWatermark (consumers and
// followers may still need the rest: stage 03), and it rolls the active
// segment first when the active segment itself has expired. Deleted segments
// are renamed to .deleted and removed after file.delete.delay.ms. It returns
// how many segments it deleted.
//
// Before either, and whatever the cleanup policy, it deletes the segments
// that lie wholly below the log start offset, which IncrementStartOffset
// (DeleteRecords) moved past them: Kafka's
// deleteLogStartOffsetBreachedSegments. The active segment stays.
func (l *Log) DeleteOldSegments(highWatermark int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	breached, err := l.deleteSegmentsLocked(l.logStartOffset, func(s *segment) (bool, error) {
		return s != l.activeSegment(), nil
	}, "log start offset breach")
	if err != nil || !l.cfg.CleanupPolicy.Delete() {
		return breached, err
	}
	now := l.now()
	n, err := l.deleteSegmentsLocked(highWatermark, func(s *segment) (bool, error) {
		if l.cfg.RetentionMs < 0 {
			return false, nil
		}
		if err := s.loadTimestamps(); err != nil {
			return false, err
		}
		newest := s.maxTimestamp
		if newest < 0 {
			newest = s.created.UnixMilli() // no timestamps: the file's age
		}
		return now.Sub(time.UnixMilli(newest)) > l.cfg.RetentionMs, nil
	}, "retention.ms")
	if err != nil || l.cfg.RetentionBytes < 0 {
		return breached + n, err
	}
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	excess := total - l.cfg.RetentionBytes
	m, err := l.deleteSegmentsLocked(highWatermark, func(s *segment) (bool, error) {
		if excess-s.size < 0 {
			return false, nil
		}
		excess -= s.size
		return true, nil
	}, "retention.bytes")
	return breached + n + m, err
}

// IncrementStartOffset moves the log start offset forward to offset, the
// first offset readers may then ask for (Kafka's
// maybeIncrementLogStartOffset): what a DeleteRecords request does on a
// partition's leader, and what its followers then copy. Nothing below the
// new start can be read or found by time from then on; the segments wholly
// below it are deleted by the next retention pass (DeleteOldSegments), and
// the new start reaches the log-start-offset-checkpoint file with the
// Manager's next checkpoint. The recovery point moves up with it. An offset
// at or below the current start changes nothing and reports false; one past
// the log end is ErrOffsetOutOfRange. Stopping at the high watermark, which
// a log does not know, is the caller's part (stage 03's partition).
func (l *Log) IncrementStartOffset(offset int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, ErrClosed
	}
	if offset > l.nextOffset {
		return false, fmt.Errorf("%w: log start offset %d past the log end %d of %s", ErrOffsetOutOfRange, offset, l.nextOffset, l.dir)
	}
	if offset <= l.logStartOffset {
		return false, nil
	}
	l.logger.Info("incremented log start offset", "from", l.logStartOffset, "to", offset)
	l.logStartOffset = offset
	l.recoveryPoint = max(l.recoveryPoint, offset)
	return true, nil
}

// deleteSegmentsLocked deletes the longest prefix of segments for which
// deletable holds and that lie below highWatermark.
func (l *Log) deleteSegmentsLocked(highWatermark int64, deletable func(*segment) (bool, error), reason string) (int, error) {
	n := 0
	for n < len(l.segments) {
		s := l.segments[n]
		upper := l.nextOffset // the active segment ends at the log end
		if n+1 < len(l.segments) {
			upper = l.segments[n+1].baseOffset
		}
		if highWatermark < upper || (n == len(l.segments)-1 && s.size == 0) {
			break
		}
		ok, err := deletable(s)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segments) {
		// Never delete the active segment itself: roll first, so the log
		// keeps an (empty) segment at its end offset.
		if err := l.roll(reason); err != nil {
			return 0, err
		}
	}
	for _, s := range l.segments[:n] {
		if err := l.deleteSegmentLocked(s, reason); err != nil {
			return 0, err
		}
	}
	l.segments = append([]*segment(nil), l.segments[n:]...)
	l.logStartOffset = max(l.logStartOffset, l.segments[0].baseOffset)
	return n, nil
}

// deleteSegmentLocked takes a segment out of the log as Kafka does, for
// retention and truncation alike: its files are renamed to .deleted at once
// (a crash from here on finishes the deletion at the next start) and
// removed after file.delete.delay.ms, so that a fetch response still being
// written from the segment's file, handed out before, completes. The caller
// drops s from l.segments.
func (l *Log) deleteSegmentLocked(s *segment, reason string) error {
	if err := s.markDeleted(); err != nil {
		return fmt.Errorf("delete segment %s: %w", segmentName(s.baseOffset), err)
	}
	l.logger.Info("deleting segment", "reason", reason, "segment", segmentName(s.baseOffset), "bytes", s.size)
	l.deleting[s] = time.AfterFunc(l.cfg.FileDeleteDelay, func() { l.removeDeleted(s) })
	return nil
}

// removeDeleted removes a deleted segment's files once its delay is over.
func (l *Log) removeDeleted(s *segment) {
	l.mu.Lock()
	_, pending := l.deleting[s]
	delete(l.deleting, s)
	l.mu.Unlock()
	if !pending {
		return // Close got there first
	}
	if err := s.removeDeleted(); err != nil {
		l.logger.Error("remove deleted segment", "segment", segmentName(s.baseOffset), "err", err)
	}
}
