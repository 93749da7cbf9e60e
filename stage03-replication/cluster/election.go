package cluster

import (
	"fmt"
	"slices"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// FirstLiveReplica is the election policy of a cluster whose Options.Elect
// is nil: the first live replica in assignment order leads, and the ISR
// stays as it is; -1 if no replica is live. Every replica counts in stage
// 03, so any of them may lead; stage 04 passes Kafka's rule, which picks
// only from the ISR.
func FirstLiveReplica(_ commitlog.TopicPartition, s PartitionState, live func(id int32) bool) (leader int32, isr []int32) {
	for _, r := range s.Replicas {
		if live(r) {
			return r, s.ISR
		}
	}
	return -1, s.ISR
}

// electLeader asks the election policy for s's leader and ISR, and checks
// that the leader it names is one of s's replicas, or -1.
func (ct *Controller) electLeader(tp commitlog.TopicPartition, s PartitionState, live func(id int32) bool) (int32, []int32, error) {
	leader, isr := ct.elect(tp, cloneState(s), live)
	if leader != -1 && !slices.Contains(s.Replicas, leader) {
		return -1, s.ISR, fmt.Errorf("election policy chose broker %d, not a replica of %v", leader, s.Replicas)
	}
	return leader, slices.Clone(isr), nil
}
