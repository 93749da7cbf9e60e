package replica

import (
	"errors"
	"fmt"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// ErrPolicyViolation: DeleteRecords on a partition whose cleanup.policy
// does not include delete (a compacted topic loses records to the cleaner
// only), Kafka's POLICY_VIOLATION.
var ErrPolicyViolation = errors.New("replica: records of a partition without cleanup.policy delete cannot be deleted")

// DeleteRecordsHighWatermark, as a DeleteRecords offset, means "up to the
// high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// build 03.E: the log start offset: DeleteRecords on the leader, and the low watermark
// tests: TestDeleteRecordsOnLeaderStopsAtTheHighWatermarkAndWaitsForEveryReplica, TestFollowerCopiesItsLeadersLogStartUpToItsHighWatermark

// DeleteRecordsOnLeader moves the log start offset of the partition this
// broker leads to offset (DeleteRecordsHighWatermark: its high watermark),
// as Kafka's Partition.deleteRecordsOnLeader: records below it are gone for
// every reader at once. An offset past the high watermark, or below 0, is
// refused (commitlog.ErrOffsetOutOfRange): records a leader change could
// still take back are not the client's to delete. It returns the offset
// asked for and the partition's low watermark now; the deletion is done,
// for the client, when the low watermark reaches the offset, that is when
// every replica has moved its own log start that far (stage 04 waits for
// it in a purgatory). alive tells which brokers count (LowWatermark).
func (p *Partition) DeleteRecordsOnLeader(offset int64, alive func(id int32) bool) (requested, lowWatermark int64, err error) {
	p.mu.RLock()
	if p.role != Leader {
		p.mu.RUnlock()
		return 0, 0, ErrNotLeader
	}
	if !p.Log.Config().CleanupPolicy.Delete() {
		p.mu.RUnlock()
		return 0, 0, ErrPolicyViolation
	}
	if offset == DeleteRecordsHighWatermark {
		offset = p.highWatermark
	}
	var moved bool
	if offset < 0 || offset > p.highWatermark {
		err = fmt.Errorf("%w: %d, the high watermark of %s is %d", commitlog.ErrOffsetOutOfRange, offset, p.TopicPartition, p.highWatermark)
	} else {
		// Under the read lock, as an append: no leader change interleaves.
		moved, err = p.Log.IncrementStartOffset(offset)
	}
	p.mu.RUnlock()
	if err != nil {
		return 0, 0, err
	}
	if moved {
		var n news
		p.logStartAdvanced(offset, &n)
		n.tell()
	}
	lw, err := p.LowWatermark(alive)
	return offset, lw, err
}

// LowWatermark is the smallest log start offset among the leader and its
// followers on live brokers (alive; nil: every follower), as Kafka's
// Partition.lowWatermarkIfLeader: below it no replica holds a record any
// more. A follower that has not fetched from this leader yet counts as -1.
// Followers tell their log start with every fetch (UpdateFollowerFetchState)
// and copy the leader's from every fetch response
// (MaybeIncrementLogStartOffset).
func (p *Partition) LowWatermark(alive func(id int32) bool) (int64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Leader {
		return 0, ErrNotLeader
	}
	lw := p.Log.StartOffset()
	for id, r := range p.remotes {
		if alive == nil || alive(id) {
			lw = min(lw, r.LogStartOffset)
		}
	}
	return lw, nil
}

// MaybeIncrementLogStartOffset is a follower's copy of its leader's log
// start offset, from a fetch response (Kafka's ReplicaFetcherThread calls
// maybeIncrementLogStartOffset with LeaderOffsetIncremented): records the
// leader deleted go here too. As in Kafka, never past this replica's high
// watermark; a start beyond it waits for a later response, once the records
// up to it are here (the leader's start is never past its own high
// watermark, nor, then, this replica's once it has caught up).
func (p *Partition) MaybeIncrementLogStartOffset(leaderStart int64) error {
	var n news
	defer func() { n.tell() }()
	return p.maybeIncrementLogStartOffset(leaderStart, &n)
}

func (p *Partition) maybeIncrementLogStartOffset(leaderStart int64, n *news) error {
	p.mu.RLock()
	if leaderStart > p.highWatermark {
		p.mu.RUnlock()
		return nil
	}
	moved, err := p.Log.IncrementStartOffset(leaderStart)
	p.mu.RUnlock()
	if err != nil {
		return err
	}
	if moved {
		p.logStartAdvanced(leaderStart, n)
	}
	return nil
}

// logStartAdvanced forgets the leader epochs that ended before the new
// start (Kafka's leaderEpochCache.truncateFromStart) and gathers the news
// for the listener (stage 04 forgets producers). Called with no lock held.
func (p *Partition) logStartAdvanced(start int64, n *news) {
	if err := p.Epochs.TruncateFromStart(start); err != nil {
		p.logger.Error("leader epoch cache", "err", err)
	}
	n.add(func() { p.listener.LogStartAdvanced(p, start) })
}

// end build
