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
// the cache cannot answer: the epoch asked for is older than every epoch it
// knows.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

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
// The cache is written to leader-epoch-checkpoint on every change, in
// Kafka's checkpoint format ("0", the count, then "epoch startOffset"
// lines). It is safe for concurrent use.
type LeaderEpochCache struct {
	path string

	mu      sync.RWMutex
	entries []EpochEntry // Invariant: epochs and start offsets strictly increase. Protected by mu.
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
// appends its first batch or a follower copies one. An epoch the cache
// already has, or an older one, changes nothing. Entries that would no
// longer start before startOffset are removed first: they came from a
// leader whose batches were truncated away.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) error {
	// Leaders call this on every append: the common case (an epoch already
	// known) takes only the read lock.
	if epoch <= c.LatestEpoch() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && epoch <= c.entries[n-1].Epoch {
		return nil
	}
	kept := c.entries
	for len(kept) > 0 && kept[len(kept)-1].StartOffset >= startOffset {
		kept = kept[:len(kept)-1]
	}
	c.entries = append(kept, EpochEntry{Epoch: epoch, StartOffset: startOffset})
	return c.flushLocked()
}

// EndOffsetFor answers OffsetForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor does:
//
//   - the newest epoch: it ends at logEndOffset;
//   - an older epoch: the largest epoch <= requested the cache knows, ending
//     where the next epoch starts;
//   - an epoch older than every entry: the requested epoch itself, ending
//     where the first entry starts (nothing of it can be in this log);
//   - an epoch newer than the newest, or an empty cache: (UndefinedEpoch,
//     UndefinedOffset).
func (c *LeaderEpochCache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	// exercise 03.3: the leader epoch cache's lookup, where an epoch ends
	// hint: c.entries is sorted by epoch; sort.Search finds the first entry with an epoch above requested; the epoch before it ends where that entry starts, the newest ends at logEndOffset; mind the edges the doc comment lists (UndefinedEpoch, UndefinedOffset)
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
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	if n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return c.flushLocked()
}

// TruncateFromStart forgets epochs that ended before startOffset, when the
// log's start moves (retention, or a follower starting over); the epoch that
// holds startOffset now starts there.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= startOffset {
		i++
	}
	if i == 0 && (len(c.entries) == 0 || c.entries[0].StartOffset >= startOffset) {
		return nil
	}
	c.entries = append([]EpochEntry(nil), c.entries[i:]...)
	c.entries[0].StartOffset = max(c.entries[0].StartOffset, startOffset)
	return c.flushLocked()
}

// Clear empties the cache.
func (c *LeaderEpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	return c.flushLocked()
}

// flushLocked writes the checkpoint; Kafka flushes on every change, so that
// a restarted broker truncates by the same epochs it served.
func (c *LeaderEpochCache) flushLocked() error {
	lines := make([]string, len(c.entries))
	for i, e := range c.entries {
		lines[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	return commitlog.WriteCheckpoint(c.path, lines)
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
