package replica

// build 03.B: the high watermark and who counts for it
// tests: TestHighWatermarkIsTheSmallestLogEndOffset, TestQuorumDecidesWhoCountsForTheHighWatermark

// HighWatermark is the high watermark a leader computes (§1.2): the
// smallest log end offset among itself and the followers that count. Every
// replica that counts has every offset below it, so it is the offset below
// which records are committed and consumers may read. A follower that has
// not fetched since this leader took over has an unknown log end offset
// (-1) and holds the high watermark back until it fetches.
//
// The caller never lets the result move the high watermark backwards.
func HighWatermark(leaderLEO int64, followerLEOs []int64) int64 {
	// exercise 03.1: the high watermark, the smallest log end offset that counts
	// hint: the committed prefix ends where the shortest log that counts ends; an unknown log end (-1) holds it back on purpose
	// tests: TestHighWatermarkIsTheSmallestLogEndOffset, TestLeaderHighWatermarkWaitsForEveryReplicaAndNeverGoesBack
	hw := leaderLEO
	for _, leo := range followerLEOs {
		hw = min(hw, leo)
	}
	return hw
	// end exercise
}

// Quorum says which followers a leader's high watermark waits for. This
// stage's AllReplicas counts every assigned replica, so one dead follower
// stops the high watermark; stage 04 counts the in-sync replicas (§1.3) and
// grows and shrinks that set.
//
// Counted is a pure function of what it is given: the partition calls it
// with its own lock held, so it passes values, not itself, and a Quorum
// cannot reach back into the partition (which would deadlock). The slices
// are the partition's: read them, do not keep or change them.
type Quorum interface {
	// Counted returns the ids of the followers whose log end offsets bound
	// the high watermark, given the local (leader) id, the assignment and
	// the ISR.
	Counted(local int32, replicas, isr []int32) []int32
}

// AllReplicas counts every assigned replica.
type AllReplicas struct{}

// Counted returns every assigned follower.
func (AllReplicas) Counted(local int32, replicas, _ []int32) []int32 {
	out := make([]int32, 0, len(replicas))
	for _, id := range replicas {
		if id != local {
			out = append(out, id)
		}
	}
	return out
}

// end build
