package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A cleaned segment replaces the segments it was made from in three renames,
// ordered so that a crash between any two leaves a state that the next
// start rolls back or completes (Kafka's Log.replaceSegments and
// completeSwapOperations):
//
//	written, fsynced    00000000000000000000.log.cleaned      old segments all in place
//	  rename            00000000000000000000.log.swap         the swap is decided
//	  rename old        00000000000000000000.log.deleted ...  old segments out of the log
//	  rename            00000000000000000000.log              the swap is done
//
// At start-up (loadSegments) a .cleaned file is deleted: the old segments
// are all there. A .log.swap file is completed: every old segment whose base
// offset lies in the swap's range is removed, and the swap takes its final
// name. .deleted files are removed as after any deletion.
//
// The renames happen under the log's lock, after a check that the log
// still holds the old segments and was neither truncated nor closed since
// the cleaner read them; otherwise the cleaned files are removed and
// nothing changes (a follower's truncation wins over the cleaner). The old
// segments leave as retention's do: renamed .deleted and closed after
// file.delete.delay.ms, so reads already handed out finish.
//
// The directory is fsynced once, after the lock is released. Kafka fsyncs
// it after each rename, holding the lock; on ext4 a directory fsync
// commits the journal, which in data=ordered mode first writes out other
// files' dirty data (the active segment's appends), and appenders would
// wait for it. Renames in one directory reach the journal in the order they
// are made (ext4, xfs), so a crash leaves a prefix of them: each prefix is
// one of the states above.

// build 01.K: the cleaner's swap: three renames, and a start that completes or rolls back what a crash interrupted
// tests: TestCleanerCrashAtEachStepRecovers, TestCompactionKeepsAbortedTxnsThroughACrashAtEachStep

// swapTestHook, when tests set it, is called at each step of a swap with the
// log's directory: "cleaned" (the cleaned files are written and fsynced,
// no lock held), "swap" (renamed .swap) and "deleted" (the old segments
// renamed .deleted), the last two with the log's lock held. A test copies
// the directory there to get what a crash at that step leaves on disk.
var swapTestHook func(step, dir string)

func swapStep(step, dir string) {
	if swapTestHook != nil {
		swapTestHook(step, dir)
	}
}

// replaceSegments swaps the cleaned segment (its files are named .cleaned,
// written and fsynced) in for the segments of group. truncations is the
// log's truncation count when the cleaner read the group.
func (l *Log) replaceSegments(group []cleanSource, size int64, lastModified time.Time, truncations uint64) error {
	base := group[0].base
	name := func(suffix string) string { return filepath.Join(l.dir, segmentName(base)+suffix) }
	suffixes := []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} // the .log last: its rename decides

	swapStep("cleaned", l.dir)
	l.mu.Lock()
	if l.closed || l.truncations != truncations || !l.holds(group) {
		l.mu.Unlock()
		for _, suffix := range suffixes {
			os.Remove(name(suffix + cleanedSuffix))
		}
		return errCleaningAborted
	}
	err := l.swapLocked(group, size, lastModified, name, suffixes)
	l.mu.Unlock()
	return errors.Join(err, syncDir(l.dir))
}

// swapLocked does the renames and replaces the group in l.segments. Called
// with mu held for writing.
func (l *Log) swapLocked(group []cleanSource, size int64, lastModified time.Time, name func(string) string, suffixes []string) error {
	for _, suffix := range suffixes {
		if err := os.Rename(name(suffix+cleanedSuffix), name(suffix+swapSuffix)); err != nil {
			for _, suffix := range suffixes {
				os.Remove(name(suffix + cleanedSuffix))
				os.Remove(name(suffix + swapSuffix))
			}
			return fmt.Errorf("swap in cleaned segment %s: %w", segmentName(group[0].base), err)
		}
	}
	// From here on the swap is decided: an error leaves it to the next
	// start to complete.
	swapStep("swap", l.dir)
	i := l.segmentIndexFor(group[0].base)
	for _, src := range group {
		if err := l.deleteSegmentLocked(src.seg, "compaction"); err != nil {
			return err
		}
	}
	swapStep("deleted", l.dir)
	for _, suffix := range suffixes {
		if err := os.Rename(name(suffix+swapSuffix), name(suffix)); err != nil {
			return fmt.Errorf("swap in cleaned segment %s: %w", segmentName(group[0].base), err)
		}
	}
	s := existingSegment(l.dir, group[0].base, size, lastModified, &l.cfg, l.logger)
	segments := append([]*segment(nil), l.segments[:i]...)
	segments = append(segments, s)
	l.segments = append(segments, l.segments[i+len(group):]...)
	l.logger.Debug("swapped in cleaned segment", "segment", segmentName(s.baseOffset), "replaced", len(group), "bytes", size)
	return nil
}

// completeSwap finishes a compaction a crash interrupted after its cleaned
// segment was renamed to .swap, as Kafka's completeSwapOperations: the
// swap file holds every record the cleaner kept from the old segments it
// replaces, which are the segments whose base offsets lie in the swap's
// range [base, next offset). Those still on disk are removed, and the swap
// takes its final name; its indexes are rebuilt when it is first read.
// logs, the .log files found, is updated.
func (l *Log) completeSwap(name string, logs map[int64]os.FileInfo) error {
	final := strings.TrimSuffix(name, swapSuffix)
	base, err := strconv.ParseInt(strings.TrimSuffix(final, logSuffix), 10, 64)
	if err != nil || base < 0 {
		return fmt.Errorf("open log %s: %s is not named by a base offset", l.dir, name)
	}
	next, err := scanNextOffset(filepath.Join(l.dir, name), base)
	if err != nil {
		return fmt.Errorf("open log %s: interrupted swap %s: %w", l.dir, name, err)
	}
	// The swap's .txnindex (always written by the cleaner, renamed before
	// the .log) is either still a .swap file, and any index under its final
	// name is the old segment's, or already under its final name.
	txnSwap := false
	if _, err := os.Stat(filepath.Join(l.dir, segmentName(base)+txnIndexSuffix+swapSuffix)); err == nil {
		txnSwap = true
	}
	l.logger.Warn("completing a compaction interrupted by a crash", "swap", name, "offsets", fmt.Sprintf("[%d, %d)", base, next))
	// exercise 01.7: complete a swap a crash interrupted: remove the segments it replaces
	// hint: the swap replaces exactly the old segments whose base offsets lie in its range; a .txnindex under the swap's own base may already be the swap's
	// tests: TestCleanerCrashAtEachStepRecovers, TestCompactionKeepsAbortedTxnsThroughACrashAtEachStep
	for old := range logs {
		if old < base || old >= max(next, base+1) {
			continue
		}
		for _, suffix := range segmentSuffixes {
			if suffix == txnIndexSuffix && old == base && !txnSwap {
				continue // the swap's own, renamed before the crash
			}
			if err := os.Remove(filepath.Join(l.dir, segmentName(old)+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("open log %s: remove segment replaced by %s: %w", l.dir, name, err)
			}
		}
		delete(logs, old)
	}
	// end exercise
	// The swap's indexes were removed with the other .swap files; indexes
	// under the final name belong to the old segment (or are a half-done
	// rename of the swap's): both are rebuilt from the log.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := os.Remove(filepath.Join(l.dir, segmentName(base)+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("open log %s: %w", l.dir, err)
		}
	}
	if txnSwap {
		txn := filepath.Join(l.dir, segmentName(base)+txnIndexSuffix)
		if err := os.Rename(txn+swapSuffix, txn); err != nil {
			return fmt.Errorf("open log %s: complete swap: %w", l.dir, err)
		}
	}
	if err := os.Rename(filepath.Join(l.dir, name), filepath.Join(l.dir, final)); err != nil {
		return fmt.Errorf("open log %s: complete swap: %w", l.dir, err)
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("open log %s: %w", l.dir, err)
	}
	if logs[base], err = os.Stat(filepath.Join(l.dir, final)); err != nil {
		return fmt.Errorf("open log %s: %w", l.dir, err)
	}
	return nil
}

// scanNextOffset reads the batch headers of a segment file and returns the
// offset after its last whole, valid batch.
func scanNextOffset(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	sc := newBatchScanner(f, 0, fi.Size(), recoveryWindow)
	for {
		_, h, _, err := sc.next(true)
		if err == io.EOF || isDamage(err) {
			return next, nil // recovery of the segment deals with damage
		}
		if err != nil {
			return 0, err
		}
		next = max(next, h.NextOffset())
	}
}

// end build
