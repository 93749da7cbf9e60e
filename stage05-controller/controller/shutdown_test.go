package controller_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
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

// TestAControlledShutdownStopsAFollowerOnlyOnceItIsOutOfTheISR: broker 1
// follows four partitions led by broker 0 and shuts down. Its replica
// may stop fetching (StopReplica without delete) only once the ISR in
// ZooKeeper no longer holds it: stopped but still in the ISR, it would
// hold back the high watermark and acks=all until the leader's lag
// timeout. p0 is plain; p1's state was changed by its leader since the
// controller read it (the first write fails BADVERSION, is read again
// and written); p2's state znode is gone (nothing to write, nothing to
// stop); p3's state changes under every write (the retry fails too): it
// keeps following, stays in the ISR, and is reported as remaining, so
// the broker asks again. Before, all four were stopped whatever the
// writes did, and only p0 left the ISR.
func TestAControlledShutdownStopsAFollowerOnlyOnceItIsOutOfTheISR(t *testing.T) {
	ens := zktest.StartStandalone(t)
	var brokers []*answeringBroker
	for id := range int32(3) {
		brokers = append(brokers, startAnsweringBroker(t, ens, id))
	}
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk
	p := func(i int32) commitlog.TopicPartition { return commitlog.TopicPartition{Topic: "t", Partition: i} }
	replicas := map[int32][]int32{}
	for i := range int32(4) {
		replicas[i] = []int32{0, 1, 2}
	}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: replicas}, nil))
	for i := range int32(4) {
		require.Eventually(t, func() bool {
			s, _, err := zk.PartitionState(p(i))
			return err == nil && s.Leader == 0 && slices.Equal(s.ISR, []int32{0, 1, 2})
		}, 20*time.Second, 5*time.Millisecond, "%s online", p(i))
	}
	// A leader's write the controller has not heard of (no notification).
	touch := func(tp commitlog.TopicPartition) error {
		s, v, err := zk.PartitionState(tp)
		if err == nil {
			_, err = zk.UpdatePartitionState(tp, s, v)
		}
		return err
	}
	require.NoError(t, touch(p(1)))
	require.NoError(t, zk.Conn().Delete(kafkazk.PartitionStatePath(p(2)), -1))
	controller.SetBeforeStateWrite(ctl.ctl, func(tps []commitlog.TopicPartition) {
		if slices.Contains(tps, p(3)) {
			if err := touch(p(3)); err != nil {
				t.Errorf("change %s under the controller: %v", p(3), err) // on the event goroutine: no FailNow
			}
		}
	})

	remaining, err := ctl.ctl.ControlledShutdown(1, -1)
	require.NoError(t, err)
	require.Equal(t, []commitlog.TopicPartition{p(3)}, remaining, "p3 still has broker 1 in its ISR")
	for _, i := range []int32{0, 1} {
		s, _, err := zk.PartitionState(p(i))
		require.NoError(t, err)
		require.Equal(t, []int32{0, 2}, s.ISR, "%s: broker 1 left the ISR", p(i))
	}
	s, _, err := zk.PartitionState(p(3))
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, 2}, s.ISR, "p3: the write never went through")

	require.Eventually(t, func() bool { return brokers[1].stopped(p(0), false) == 1 }, 20*time.Second, 5*time.Millisecond,
		"broker 1 stops following p0")
	var stopped []commitlog.TopicPartition
	for _, req := range brokers[1].stopReplicas() {
		if !req.DeletePartitions {
			stopped = append(stopped, stopReplicaPartitions(&req)...)
		}
	}
	require.Equal(t, []commitlog.TopicPartition{p(0), p(1)}, stopped, "and p1, nothing else")
}
