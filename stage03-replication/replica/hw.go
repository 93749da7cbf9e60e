package replica

// HighWatermark is the high watermark a leader computes (§1.2): the
// smallest log end offset among itself and the followers that count. Every
// replica that counts has every offset below it, so it is the offset below
// which records are committed and consumers may read. A follower that has
// not fetched since this leader took over has an unknown log end offset
// (-1) and holds the high watermark back until it fetches.
//
// The caller never lets the result move the high watermark backwards.
func HighWatermark(leaderLEO int64, followerLEOs []int64) int64 {
	hw := leaderLEO
	for _, leo := range followerLEOs {
		hw = min(hw, leo)
	}
	return hw
}

// Quorum says which followers a leader's high watermark waits for. This
// stage's AllReplicas counts every assigned replica, so one dead follower
// stops the high watermark; stage 04 counts the in-sync replicas (§1.3) and
// grows and shrinks that set.
type Quorum interface {
	// Counted returns the ids of the followers whose log end offsets bound
	// the high watermark of p. It is called with p's lock held.
	Counted(p *Partition) []int32
}

// AllReplicas counts every assigned replica.
type AllReplicas struct{}

// Counted returns every assigned follower.
func (AllReplicas) Counted(p *Partition) []int32 {
	var out []int32
	for _, id := range p.replicas {
		if id != p.localID {
			out = append(out, id)
		}
	}
	return out
}
