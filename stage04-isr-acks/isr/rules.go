package isr

import (
	"slices"
	"time"

	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// The ISR rules, as pure functions of what the leader knows (Kafka's
// Partition.getOutOfSyncReplicas and isFollowerInSync). The Manager applies
// them; tests can check them without a cluster.

// DefaultLagTimeMax is replica.lag.time.max.ms since Kafka 2.5 (KIP-537).
// The seed's 10 s was the default before.
const DefaultLagTimeMax = 30 * time.Second

// build 04.E: the ISR rules: who falls out of sync, who may join
// tests: TestOutOfSyncFollowsLastCaughtUpTimeNotLastFetch, TestOutOfSyncPassesOverAnIDThatIsNoLongerAReplica, TestCanJoinNeedsTheHighWatermarkAndTheEpochStart, TestWithAndWithoutKeepTheOrderMembersJoinedIn

// OutOfSync returns the followers in isr that have fallen out of sync, in
// isr's order, maxLag being replica.lag.time.max.ms. A follower that keeps
// fetching but never reaches the end (too slow for the produce rate) falls
// out as surely as one that stopped: what counts is the last time it had
// everything, not the last time it asked.
func OutOfSync(leader int32, isr []int32, followers map[int32]replica.ReplicaState, leaderLEO int64, now time.Time, maxLag time.Duration) []int32 {
	// exercise 04.1: find the ISR members that have fallen out of sync
	// hint: what counts is how long since the follower last had everything, not how long since it last asked
	// tests: TestOutOfSyncFollowsLastCaughtUpTimeNotLastFetch, TestOutOfSyncPassesOverAnIDThatIsNoLongerAReplica
	var out []int32
	for _, id := range isr {
		if id == leader {
			continue
		}
		f, ok := followers[id]
		if !ok {
			continue // not a replica any more: the controller removes it
		}
		if f.LogEndOffset != leaderLEO && now.Sub(f.LastCaughtUpTime) > maxLag {
			out = append(out, id)
		}
	}
	return out
	// end exercise
}

// CanJoin reports whether a follower outside the ISR may join it (Kafka's
// Partition.isFollowerInSync). Joining is a promise: the follower could
// lead without losing a committed record, and nothing it holds can still
// diverge from this leader's log.
func CanJoin(followerLEO, highWatermark, epochStartOffset int64) bool {
	// exercise 04.2: decide whether a follower may rejoin the ISR
	// hint: each of the two promises is a point the follower's log end offset must have reached
	// tests: TestCanJoinNeedsTheHighWatermarkAndTheEpochStart
	return followerLEO >= highWatermark && followerLEO >= epochStartOffset
	// end exercise
}

// Without returns isr minus the ids in out, in isr's order.
func Without(isr, out []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return slices.Contains(out, id) })
}

// With returns isr plus id at the end: Kafka lists the ISR in the order
// its members joined.
func With(isr []int32, id int32) []int32 {
	if slices.Contains(isr, id) {
		return slices.Clone(isr)
	}
	return append(slices.Clone(isr), id)
}

// Quorum counts the in-sync replicas for the high watermark
// (replica.Quorum): stage 03 counted every assigned replica, so one dead
// follower stopped it; now a follower that leaves the ISR stops counting.
type Quorum struct{}

// Counted returns the ISR without the leader: stage 03's AllReplicas,
// over the ISR instead of the assignment.
func (Quorum) Counted(local int32, _, isr []int32) []int32 {
	return replica.AllReplicas{}.Counted(local, isr, nil)
}

// end build
