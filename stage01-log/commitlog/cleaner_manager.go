package commitlog

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// CleanerOffsetCheckpointFile holds the log cleaner's checkpoint of each
// compacted log, its first dirty offset, in Kafka's checkpoint format.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

// CleanStats reports one cleaning round (Kafka's CleanerStats).
type CleanStats struct {
	// Cleaned is false when no log needed cleaning, or the round was
	// aborted because its log changed (truncated, deleted) meanwhile.
	Cleaned bool
	// Partition is the log cleaned: the dirtiest one that was due.
	Partition TopicPartition
	// DirtyRatio is its dirty ratio when it was chosen.
	DirtyRatio float64
	// FirstDirtyOffset and EndOffset bound the dirty range the round took
	// in; EndOffset is the log's new cleaner checkpoint. It falls short of
	// the first uncleanable offset when the offset map filled.
	FirstDirtyOffset, EndOffset int64
	// KeysMapped is the number of distinct keys in the offset map.
	KeysMapped int
	// SegmentsRead and SegmentsWritten count old and cleaned segments.
	SegmentsRead, SegmentsWritten int
	// BytesRead counts the bytes read twice: once for the map, once to
	// rewrite. BytesWritten is the size of the cleaned segments.
	BytesRead, BytesWritten int64
	// RecordsRead and RecordsKept count records in the rewritten segments.
	RecordsRead, RecordsKept int64
	// Elapsed is the wall-clock time of the round.
	Elapsed time.Duration
}

// Clean runs one round of the log cleaner now, as the background cleaner
// does every log.cleaner.backoff.ms (Kafka's CleanerThread.cleanFilthiestLog):
// of the logs whose cleanup.policy includes compact, it cleans the one with
// the highest dirty ratio among those above their min.cleanable.dirty.ratio
// or past their max.compaction.lag.ms. It reports what it did;
// stats.Cleaned is false when no log was due. Rounds never overlap: a call
// waits for the background cleaner's round in progress.
func (m *Manager) Clean() (CleanStats, error) {
	return m.clean(nil)
}

// CleanPartition runs one round of the log cleaner on one log now, whatever
// its dirty ratio, if its cleanup.policy includes compact and it has a
// dirty range (tests, and stage 05's, use it to compact a log on demand).
func (m *Manager) CleanPartition(tp TopicPartition) (CleanStats, error) {
	return m.clean(&tp)
}

// clean runs one round, on only if it is set, else on the dirtiest log due.
func (m *Manager) clean(only *TopicPartition) (CleanStats, error) {
	m.cleanerMu.Lock()
	defer m.cleanerMu.Unlock()
	now := m.now()
	var (
		best   *Log
		bestTP TopicPartition
		bestC  cleanable
		errs   []error
	)
	for tp, l := range m.snapshot() {
		if (only != nil && tp != *only) || !l.Config().CleanupPolicy.Compact() || m.uncleanable(tp) {
			continue
		}
		c, err := l.cleanableRange(m.cleaningLimit(tp, l), now)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				errs = append(errs, fmt.Errorf("cleaner: %s: %w", tp, err))
			}
			continue
		}
		// Kafka: (needCompactionNow && cleanableBytes > 0) || cleanableRatio > minCleanableRatio.
		due := only != nil || c.maxLagDue || c.ratio() > c.cfg.MinCleanableDirtyRatio
		if c.dirtyBytes == 0 || !due {
			continue
		}
		if best == nil || cmp.Or(cmp.Compare(c.ratio(), bestC.ratio()), -tp.Compare(bestTP)) > 0 {
			best, bestTP, bestC = l, tp, c
		}
	}
	if best == nil {
		return CleanStats{}, errors.Join(errs...)
	}
	stats := CleanStats{Partition: bestTP, DirtyRatio: bestC.ratio()}
	err := best.clean(bestC, m.cfg.CleanerDedupeBufferSize, m.stop, &stats)
	switch {
	case errors.Is(err, errCleaningAborted):
		m.opts.Logger.Info("log cleaning aborted: the log changed meanwhile", "partition", bestTP, "err", err)
		stats.Cleaned = false
		err = nil
	case err != nil:
		// Kafka's KIP-346: a log the cleaner fails on is left alone (until
		// the broker restarts) rather than failing every round, and the
		// others are still cleaned.
		m.opts.Logger.Error("log cleaning failed: the log is marked uncleanable", "partition", bestTP, "err", err)
		m.mu.Lock()
		m.uncleanables[bestTP] = err
		m.mu.Unlock()
		err = fmt.Errorf("cleaner: %s: %w", bestTP, err)
	default:
		m.opts.Logger.Info("cleaned log", "partition", bestTP, "dirty_ratio", stats.DirtyRatio,
			"offsets", fmt.Sprintf("[%d, %d)", stats.FirstDirtyOffset, stats.EndOffset),
			"bytes_read", stats.BytesRead, "bytes_written", stats.BytesWritten,
			"records_read", stats.RecordsRead, "records_kept", stats.RecordsKept, "elapsed", stats.Elapsed)
		err = m.writeCleanerCheckpoint()
	}
	return stats, errors.Join(append(errs, err)...)
}

// cleaningLimit is the offset the cleaner may not reach: CleanLimit's (the
// last stable offset), the high watermark that RetentionLimit gives, or
// the log end offset.
func (m *Manager) cleaningLimit(tp TopicPartition, l *Log) int64 {
	if m.opts.CleanLimit != nil {
		return m.opts.CleanLimit(tp, l)
	}
	if m.opts.RetentionLimit != nil {
		return m.opts.RetentionLimit(tp, l)
	}
	return l.EndOffset()
}

// uncleanable reports whether a cleaning of tp failed before.
func (m *Manager) uncleanable(tp TopicPartition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.uncleanables[tp]
	return ok
}

// writeCleanerCheckpoint writes the first dirty offset of every compacted log.
func (m *Manager) writeCleanerCheckpoint() error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	return m.writeCleanerCheckpointLocked()
}

// writeCleanerCheckpointLocked is writeCleanerCheckpoint with checkpointMu
// held.
func (m *Manager) writeCleanerCheckpointLocked() error {
	points := map[TopicPartition]int64{}
	for tp, l := range m.snapshot() {
		l.mu.RLock()
		if l.cfg.CleanupPolicy.Compact() {
			points[tp] = l.firstDirtyOffset
		}
		l.mu.RUnlock()
	}
	return WriteOffsetCheckpoint(filepath.Join(m.dir, CleanerOffsetCheckpointFile), points)
}

// cleanerLoop is Kafka's CleanerThread (log.cleaner.threads=1): a round,
// then, when no log was due, a pause of log.cleaner.backoff.ms.
func (m *Manager) cleanerLoop() {
	defer m.done.Done()
	for {
		stats, err := m.Clean()
		if err != nil {
			m.opts.Logger.Error("log cleaner", "err", err)
		}
		wait := m.cfg.CleanerBackoff
		if stats.Cleaned {
			wait = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (m *Manager) now() time.Time {
	if m.opts.Now != nil {
		return m.opts.Now()
	}
	return time.Now()
}
