package cluster

// FirstLiveReplica is how the controller elects a leader after a failure
// or a start: the first live replica in assignment order leads, and the
// ISR stays as it is; -1 if no replica is live. Every replica counts in
// stage 03, so any of them may lead.
func FirstLiveReplica(s PartitionState, live func(id int32) bool) (leader int32, isr []int32) {
	for _, r := range s.Replicas {
		if live(r) {
			return r, s.ISR
		}
	}
	return -1, s.ISR
}
