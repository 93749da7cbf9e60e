package replica

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// LeaderEpochCheckpointFile is the file, in each partition's directory, that
// holds the partition's leader epoch cache.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// UndefinedEpoch and UndefinedOffset answer an OffsetForLeaderEpoch query
// the cache cannot answer: no epoch asked (-1), an empty cache, or an epoch
// newer than every epoch it knows.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// build 03.A: the leader epoch cache: assign, answer OffsetsForLeaderEpoch, truncate, checkpoint
// tests: TestEpochCacheAnswersOffsetForLeaderEpoch, TestEpochCacheAnswersForAnEpochOlderThanItsFirst, TestEpochCacheIgnoresOlderEpochsAndDropsTruncatedOnes, TestEpochCacheTruncation, TestEpochCacheIsKafkasCheckpointFile

// EpochEntry says that leader epoch Epoch began at offset StartOffset: the
// first batch that leader appended.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochCache is Kafka's LeaderEpochFileCache: for each leader epoch a
// partition's log has seen, the offset where that epoch's batches begin
// (KIP-101). It is what lets a follower find where its log and its leader's
// part: epoch E ends where epoch E+1 begins.
//
//	epoch 0 starts at 0, epoch 2 starts at 120, epoch 3 starts at 300
//	=> epoch 0 holds [0, 120), epoch 2 holds [120, 300), epoch 3 holds [300, LEO)
//
// The cache is written to leader-epoch-checkpoint in Kafka's checkpoint
// format ("0", the count, then "epoch startOffset" lines). Every change is
// written and fsynced before the method that made it returns, except a new
// leader's epoch (assignUnflushed, from MakeLeader), which is written by
// the Manager in the background or by the leader's first append, whichever
// comes first: a batch never reaches the log before the entry of its epoch
// is on disk (chapter 3, "Locks": why that is enough). The file is written
// with no lock held that a reader needs. It is safe for concurrent use.
type LeaderEpochCache struct {
	path string

	// flushMu serializes the writers of the checkpoint file, so that an
	// older snapshot of the entries never replaces a newer one. It is held
	// across the write and its fsyncs, and only Flush and deleted take
	// it: readers never wait for the disk.
	flushMu sync.Mutex
	gone    bool // the partition's directory is being deleted: write nothing more. Protected by flushMu.

	mu      sync.RWMutex
	entries []EpochEntry // Invariant: epochs and start offsets strictly increase. Protected by mu.
	// version counts the changes to entries; flushed is the version the
	// checkpoint file holds. Invariant: flushed <= version. Protected by mu.
	version, flushed uint64
}

// OpenLeaderEpochCache reads the cache of the partition whose log is in dir.
// A missing file is an empty cache.
func OpenLeaderEpochCache(dir string) (*LeaderEpochCache, error) {
	c := &LeaderEpochCache{path: filepath.Join(dir, LeaderEpochCheckpointFile)}
	lines, err := commitlog.ReadCheckpoint(c.path)
	if err != nil {
		return nil, err
	}
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s line %d: %q is not \"epoch offset\"", c.path, i+3, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		offset, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s line %d: %q is not \"epoch offset\"", c.path, i+3, line)
		}
		c.entries = append(c.entries, EpochEntry{Epoch: int32(epoch), StartOffset: offset})
	}
	return c, nil
}

// Entries returns a copy of the entries, oldest first.
func (c *LeaderEpochCache) Entries() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

// LatestEpoch is the newest epoch, or UndefinedEpoch for an empty cache.
func (c *LeaderEpochCache) LatestEpoch() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Assign records that epoch starts at startOffset, when a leader of epoch
// appends its first batch or a follower copies one, and writes the
// checkpoint before it returns. An epoch the cache already has, or an
// older one, changes nothing. Entries that would no longer start before
// startOffset are removed first: they came from a leader whose batches
// were truncated away.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) error {
	if !c.assignUnflushed(epoch, startOffset) {
		return nil
	}
	return c.Flush()
}

// assignUnflushed is Assign without the write: the entry is in memory only
// until Flush. MakeLeader records its new epoch so, for its LeaderAndIsr
// not to wait for one fsync per partition; the leader's appends flush
// first. It reports whether the cache changed.
func (c *LeaderEpochCache) assignUnflushed(epoch int32, startOffset int64) bool {
	// Leaders call this on every append: the common case (an epoch already
	// known) takes only the read lock.
	if epoch <= c.LatestEpoch() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && epoch <= c.entries[n-1].Epoch {
		return false
	}
	kept := c.entries
	for len(kept) > 0 && kept[len(kept)-1].StartOffset >= startOffset {
		kept = kept[:len(kept)-1]
	}
	c.entries = append(kept, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	c.version++
	return true
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor does: the largest epoch at or below
// requested that the cache knows, and the offset where it ends. Chapter 3,
// "Leader epochs", has Kafka's edge cases; a query the cache cannot answer
// gets (UndefinedEpoch, UndefinedOffset).
func (c *LeaderEpochCache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// exercise 03.3: the leader epoch cache's lookup, where an epoch ends
	// hint: an epoch ends where the next known epoch starts, the newest at the log end; chapter 3, "Leader epochs", gives the edges
	// tests: TestEpochCacheAnswersOffsetForLeaderEpoch, TestEpochCacheAnswersForAnEpochOlderThanItsFirst
	n := len(c.entries)
	switch {
	case requested == UndefinedEpoch || n == 0:
		return UndefinedEpoch, UndefinedOffset
	case requested == c.entries[n-1].Epoch:
		return requested, logEndOffset
	}
	// higher is the first entry with an epoch greater than requested.
	higher := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > requested })
	switch {
	case higher == n:
		return UndefinedEpoch, UndefinedOffset
	case higher == 0:
		return requested, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
	// end exercise
}

// TruncateFromEnd removes what the cache knows at or after endOffset, when
// the log is truncated to endOffset.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	if n == len(c.entries) {
		c.mu.Unlock()
		return nil
	}
	c.entries = c.entries[:n]
	c.version++
	c.mu.Unlock()
	return c.Flush()
}

// TruncateFromStart forgets epochs that ended before startOffset, when the
// log's start moves (retention, or a follower starting over); the epoch that
// holds startOffset now starts there.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= startOffset {
		i++
	}
	if i == 0 && (len(c.entries) == 0 || c.entries[0].StartOffset >= startOffset) {
		c.mu.Unlock()
		return nil
	}
	c.entries = append([]EpochEntry(nil), c.entries[i:]...)
	c.entries[0].StartOffset = max(c.entries[0].StartOffset, startOffset)
	c.version++
	c.mu.Unlock()
	return c.Flush()
}

// Clear empties the cache.
func (c *LeaderEpochCache) Clear() error {
	c.mu.Lock()
	c.entries = nil
	c.version++
	c.mu.Unlock()
	return c.Flush()
}

// Flushed reports whether the checkpoint file holds every entry.
func (c *LeaderEpochCache) Flushed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.flushed == c.version
}

// Flush writes the entries to the checkpoint file, if it does not hold
// them yet, and fsyncs it (commitlog.WriteCheckpoint), so that a restarted
// broker truncates by the epochs it served. The write holds flushMu only:
// readers and appenders of the cache go on meanwhile, and a change made
// during the write is left for the next Flush.
func (c *LeaderEpochCache) Flush() error {
	if c.Flushed() {
		return nil
	}
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.gone { // nothing to write to: count it written, so no appender waits
		c.mu.Lock()
		c.flushed = c.version
		c.mu.Unlock()
		return nil
	}
	c.mu.RLock()
	version := c.version
	if c.flushed == version { // flushed meanwhile, by another writer
		c.mu.RUnlock()
		return nil
	}
	lines := make([]string, len(c.entries))
	for i, e := range c.entries {
		lines[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	c.mu.RUnlock()
	if err := commitlog.WriteCheckpoint(c.path, lines); err != nil {
		return fmt.Errorf("leader epoch cache: %w", err)
	}
	c.mu.Lock()
	c.flushed = version // writers are serialized: flushed only grows
	c.mu.Unlock()
	return nil
}

// deleted stops the writes of the checkpoint, before the partition's
// directory is deleted (StopReplica): a write in progress finishes first,
// and none starts after, so none recreates a file in a directory being
// removed (Kafka's writeIfDirExists serves the same end).
func (c *LeaderEpochCache) deleted() {
	c.flushMu.Lock()
	c.gone = true
	c.flushMu.Unlock()
}

// EpochForOffset returns the epoch of the leader that wrote offset, or
// UndefinedEpoch if the cache starts after it.
func (c *LeaderEpochCache) EpochForOffset(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if i == 0 {
		return UndefinedEpoch
	}
	return c.entries[i-1].Epoch
}

// end build
