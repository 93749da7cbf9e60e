package controller

import (
	"slices"

	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
)

// build 05.B: the controller's leader elections: offline, controlled shutdown, preferred; dead brokers out of the ISR
// tests: TestOfflineElectionTakesTheFirstLiveISRMemberInAssignmentOrder, TestControlledShutdownAndPreferredElections, TestADeadBrokerLeavesTheISRButTheISRNeverEmpties

// The controller's leader elections (Kafka's
// PartitionLeaderElectionAlgorithms). Each takes the assignment in
// preference order, the ISR, and which brokers may lead; each returns the
// new leader and ISR, or ok false when no replica qualifies.

// offlineElection elects a leader for a partition whose leader died: the
// first replica, in assignment order, that is live and in the ISR; the
// new ISR is the live part of the old one. If none is, and unclean
// election is enabled for the topic, the first live replica leads alone:
// an out-of-sync replica, so what the ISR had and it lacks is lost
// (stage 04's Jepsen story).
func offlineElection(replicas, inSync []int32, live func(int32) bool, unclean bool) (leader int32, newISR []int32, ok bool) {
	// exercise 05.2: elect a dead leader's successor from the ISR
	// hint: walk replicas (the assignment, the preference order), not inSync; the first that is live and in the ISR (slices.Contains) leads, and the new ISR is liveISR(inSync, live); with unclean, and only when no ISR member is live, the first live replica leads with an ISR of itself; nobody: -1, nil, false
	// tests: TestOfflineElectionTakesTheFirstLiveISRMemberInAssignmentOrder
	for _, r := range replicas {
		if live(r) && slices.Contains(inSync, r) {
			return r, liveISR(inSync, live), true
		}
	}
	if unclean {
		for _, r := range replicas {
			if live(r) {
				return r, []int32{r}, true
			}
		}
	}
	return -1, nil, false
	// end exercise
}

// controlledShutdownElection moves the leadership off a broker that is
// shutting down (live reports it not live): the first live replica in the
// ISR, in assignment order; the new ISR leaves the shutting-down brokers out.
func controlledShutdownElection(replicas, inSync []int32, live func(int32) bool) (leader int32, newISR []int32, ok bool) {
	for _, r := range replicas {
		if live(r) && slices.Contains(inSync, r) {
			return r, liveISR(inSync, live), true
		}
	}
	return -1, nil, false
}

// preferredElection gives the leadership back to the preferred replica
// (the first assigned) if it is live and in the ISR.
func preferredElection(replicas, inSync []int32, live func(int32) bool) (leader int32, ok bool) {
	if len(replicas) == 0 {
		return -1, false
	}
	p := replicas[0]
	return p, live(p) && slices.Contains(inSync, p)
}

// liveISR is the ISR without the brokers that are not live, in its order.
func liveISR(inSync []int32, live func(int32) bool) []int32 {
	out := make([]int32, 0, len(inSync))
	for _, r := range inSync {
		if live(r) {
			out = append(out, r)
		}
	}
	return out
}

// withoutReplicas removes brokers from a partition state's ISR, as the
// controller does when they die (Kafka's removeReplicasFromIsr): a dead
// leader leaves the partition without one (-1), and the ISR never becomes
// empty: its last member stays, so that when it comes back it can be
// elected cleanly, having everything that was committed.
func withoutReplicas(s isr.PartitionState, gone func(int32) bool) isr.PartitionState {
	// exercise 05.3: take dead brokers out of a partition's ISR, never emptying it
	// hint: copy s and keep the ISR members that are not gone, in order; if that leaves none, keep one of the old members (the leader if it was in the ISR, else the first) so that it may be elected cleanly when it returns; a gone leader becomes -1
	// tests: TestADeadBrokerLeavesTheISRButTheISRNeverEmpties
	out := s
	out.ISR = nil
	for _, r := range s.ISR {
		if !gone(r) {
			out.ISR = append(out.ISR, r)
		}
	}
	if len(out.ISR) == 0 && len(s.ISR) > 0 {
		keep := s.ISR[0] // every ISR member has what was committed; keep the leader if it was one
		if slices.Contains(s.ISR, s.Leader) {
			keep = s.Leader
		}
		out.ISR = []int32{keep}
	}
	if gone(s.Leader) {
		out.Leader = -1
	}
	return out
	// end exercise
}

// end build
