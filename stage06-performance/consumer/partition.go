package consumer

import (
	"cmp"
	"maps"
	"slices"
	"sync/atomic"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) compare(o TopicPartition) int {
	if c := cmp.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, o.Partition)
}

// unknown is an offset not known yet: a partition assigned without a
// committed offset, or reset after OFFSET_OUT_OF_RANGE, waits for its
// fetcher to ask ListOffsets where auto.offset.reset points.
const unknown = -1

// partitionState is one assigned partition's offsets (Kafka's
// TopicPartitionState in SubscriptionState). Its fields are atomics: the
// fetcher of the partition's leader, the application's Poll, the
// committer and the group's rebalance read and write them without a
// lock. A seek, a reset or a new assignment never edits a state: it
// publishes a new one in a new assignment, so a fetch or a commit that
// was begun for the old one can tell (its state is no longer the
// assignment's) and is dropped.
//
// Invariant: consumed ≤ position ≤ fetchOffset, once known. committed is
// whichever of them was last acknowledged (consumed from the background
// committer, position from CommitSync or Close), or what the group had
// committed before the partition came to this consumer.
type partitionState struct {
	tp TopicPartition // immutable

	// leader is the broker leading the partition, -1 when unknown;
	// written by the metadata refresh, read by the fetchers (each takes
	// the partitions its broker leads).
	leader atomic.Int32
	// fetchOffset is the next offset to fetch. Only a fetcher moves it,
	// by CompareAndSwap from the offset its request asked for to the end
	// of what came back, so two fetchers (the old and the new leader's,
	// around a leader change) never both deliver the same range.
	fetchOffset atomic.Int64
	// position is the next offset Poll delivers: the end of the records
	// it returned. Only Poll moves it, by CompareAndSwap (the fetcher
	// sets it once, from unknown, after ListOffsets).
	position atomic.Int64
	// consumed is the position at the start of the latest Poll: the
	// application asked for more, so it is done with every record below.
	// The background committer commits it. Poll stores it (the fetcher
	// once, from unknown).
	consumed atomic.Int64
	// committed is the last offset the coordinator acknowledged for the
	// partition (an OffsetCommit answered without error).
	committed atomic.Int64
	// highWatermark is the partition's high watermark in the last fetch
	// response: the lag is highWatermark - position.
	highWatermark atomic.Int64
}

// newPartitionState is the state of tp starting at offset (unknown: ask
// ListOffsets), with the offset committed for it (unknown: none).
func newPartitionState(tp TopicPartition, offset, committed int64, leader int32) *partitionState {
	s := &partitionState{tp: tp}
	s.leader.Store(leader)
	s.fetchOffset.Store(offset)
	s.position.Store(offset)
	s.consumed.Store(offset)
	s.committed.Store(committed)
	s.highWatermark.Store(unknown)
	return s
}

// assignment is the set of partitions the consumer reads. It is never
// modified: a change builds a new one and swaps it into
// Consumer.assigned with CompareAndSwap.
type assignment struct {
	parts map[TopicPartition]*partitionState
	// list is parts sorted by topic and partition, for loops that want a
	// stable order (fetch requests, commits).
	list []*partitionState
}

func newAssignment(parts map[TopicPartition]*partitionState) *assignment {
	a := &assignment{parts: parts, list: slices.Collect(maps.Values(parts))}
	slices.SortFunc(a.list, func(x, y *partitionState) int { return x.tp.compare(y.tp) })
	return a
}

// current reports whether s is still the state of its partition in a.
func (a *assignment) current(s *partitionState) bool { return a.parts[s.tp] == s }

// swapAssignment publishes change(old) in place of old, retrying when
// another goroutine swapped in between (a fetcher resetting one partition
// while the group hands out a new assignment); change must be a pure
// function of old. It wakes the fetchers and returns the new assignment.
func (c *Consumer) swapAssignment(change func(old *assignment) *assignment) *assignment {
	for {
		old := c.assigned.Load()
		next := change(old)
		if next == old || c.assigned.CompareAndSwap(old, next) {
			c.changed.broadcast()
			return next
		}
	}
}

// replaceState publishes a fresh state for s's partition, starting at
// offset, if s is still the current one. It is how a seek and an offset
// reset take effect: whatever is fetched or buffered for s is dropped.
func (c *Consumer) replaceState(s *partitionState, offset int64) bool {
	replaced := false
	var ns *partitionState
	c.swapAssignment(func(old *assignment) *assignment {
		replaced = false
		if !old.current(s) {
			return old
		}
		parts := maps.Clone(old.parts)
		ns = newPartitionState(s.tp, offset, s.committed.Load(), s.leader.Load())
		parts[s.tp] = ns
		replaced = true
		return newAssignment(parts)
	})
	if replaced && ns.leader.Load() < 0 {
		// The metadata loop may be storing the leader into s right now,
		// which the new state, copied before, would never see (a Seek
		// just after Assign): ask for another round.
		c.refreshSoon()
	}
	return replaced
}
