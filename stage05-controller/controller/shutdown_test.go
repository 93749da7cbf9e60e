package controller_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestControlledShutdownOfAFollowerBumpsTheLeaderEpoch: a broker shutting
// down cleanly leaves the ISRs it follows in, and the new state carries a
// new leader epoch (Kafka's removeReplicasFromIsr), so that the leader,
// which ignores a LeaderAndIsr at its current epoch, takes the smaller ISR.
// Without the bump the leader kept the stopped broker in its own ISR while
// ZooKeeper's had dropped it, and never added it back once it returned
// (found by final/faults: a bounce left __consumer_offsets partitions with
// an ISR of two for good).
func TestControlledShutdownOfAFollowerBumpsTheLeaderEpoch(t *testing.T) {
	ens := zktest.StartStandalone(t)
	for id := range int32(3) {
		fakeBroker(t, ens, id)
	}
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0, 1, 2}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(tp)
		return err == nil && s.Leader == 0 && slices.Equal(s.ISR, []int32{0, 1, 2})
	}, 20*time.Second, 5*time.Millisecond, "the topic's partition online")
	before, _, err := zk.PartitionState(tp)
	require.NoError(t, err)

	remaining, err := ctl.ctl.ControlledShutdown(1, -1)
	require.NoError(t, err)
	require.Empty(t, remaining, "broker 1 leads nothing")
	after, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	require.Equal(t, int32(0), after.Leader, "the leader stays")
	require.Equal(t, []int32{0, 2}, after.ISR, "the shutting-down follower leaves the ISR")
	require.Equal(t, before.LeaderEpoch+1, after.LeaderEpoch, "a new leader epoch, for the leader to take the new ISR")
}
