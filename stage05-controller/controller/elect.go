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

// offlineElection elects a leader for a partition whose leader died
// (Kafka's offlinePartitionLeaderElection): from the ISR, or, when no ISR
// member is live and unclean election is enabled for the topic, from the
// other live replicas, losing what the ISR had and the new leader lacks
// (stage 04's Jepsen story).
func offlineElection(replicas, inSync []int32, live func(int32) bool, unclean bool) (leader int32, newISR []int32, ok bool) {
	// exercise 05.2: elect a dead leader's successor from the ISR
	// hint: only an ISR member is sure to hold every committed record, and the preference order is the assignment's, not the ISR's; unclean election is the last resort
	// tests: TestOfflineElectionTakesTheFirstLiveISRMemberInAssignmentOrder
	// break 05.b1: elect the first live replica, in the ISR or not
	// predict: a partition's leader dies while a lagging follower is first in the assignment: who leads now, and which acknowledged records does the new leader lack?
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
	// broken:
	// for _, r := range replicas {
	// 	if live(r) {
	// 		return r, []int32{r}, true
	// 	}
	// }
	// return -1, nil, false
	// end break
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
// controller does when they die (Kafka's removeReplicasFromIsr), never
// emptying it: a member kept has everything that was committed and can be
// elected cleanly when it comes back.
func withoutReplicas(s isr.PartitionState, gone func(int32) bool) isr.PartitionState {
	// exercise 05.3: take dead brokers out of a partition's ISR, never emptying it
	// hint: drop the dead from the ISR, but never empty it: a last member has everything committed and can be elected cleanly when it returns
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
