package controller_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestPartitionModificationsCreateNewPartitionsUnlessTheTopicIsBeingDeleted:
// partitions added to a topic's znode (as CreatePartitions writes them)
// are created by the controller as a new topic's are, led by their first
// replica, both state machines online; a write made against a stale
// version is refused; partitions added to a topic being deleted are taken
// out of its znode again and never created (Kafka's
// restorePartitionReplicaAssignment).
func TestPartitionModificationsCreateNewPartitionsUnlessTheTopicIsBeingDeleted(t *testing.T) {
	ens := zktest.StartStandalone(t)
	fakeBroker(t, ens, 0)
	fakeBroker(t, ens, 1)
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zkc := ctl.zk
	tp := func(p int32) commitlog.TopicPartition { return commitlog.TopicPartition{Topic: "t", Partition: p} }
	leader := func(p int32) int32 {
		s, _, err := zkc.PartitionState(tp(p))
		if err != nil {
			return -9
		}
		return s.Leader
	}
	read := func() kafkazk.VersionedAssignment {
		as, err := zkc.TopicAssignments("t")
		require.NoError(t, err)
		return as["t"]
	}
	add := func(v kafkazk.VersionedAssignment, added map[int32][]int32) error {
		a := v.TopicAssignment
		a.Replicas = maps.Clone(a.Replicas)
		maps.Copy(a.Replicas, added)
		return zkc.AddPartitions("t", a, v.ZkVersion)
	}

	require.NoError(t, zkc.CreateTopic("t", kafkazk.TopicAssignment{ID: kafkazk.TopicID{1}, Replicas: map[int32][]int32{0: {0, 1}}}, nil))
	require.Eventually(t, func() bool { return leader(0) == 0 }, 20*time.Second, 5*time.Millisecond, "the topic is created")

	v := read()
	require.NoError(t, add(v, map[int32][]int32{1: {1, 0}, 2: {0, 1}}))
	require.True(t, errors.Is(add(v, map[int32][]int32{1: {0, 1}}), zk.ErrBadVersion), "a write from a stale read is refused")
	require.Eventually(t, func() bool { return leader(1) == 1 && leader(2) == 0 }, 20*time.Second, 5*time.Millisecond,
		"new partitions led by their first replica")
	require.Eventually(t, func() bool {
		p, r, err := ctl.ctl.StateMachines()
		require.NoError(t, err)
		return p[tp(1)] == controller.OnlinePartition && p[tp(2)] == controller.OnlinePartition &&
			r[controller.Replica{TopicPartition: tp(1), Broker: 0}] == controller.OnlineReplica
	}, 20*time.Second, 5*time.Millisecond, "the state machines have them online")
	require.Equal(t, kafkazk.TopicID{1}, read().ID)

	// The fake brokers never answer StopReplica: the deletion stays in
	// progress.
	require.NoError(t, zkc.MarkTopicForDeletion("t"))
	require.Eventually(t, func() bool {
		_, r, err := ctl.ctl.StateMachines()
		require.NoError(t, err)
		return r[controller.Replica{TopicPartition: tp(0), Broker: 0}] == controller.ReplicaDeletionStarted
	}, 20*time.Second, 5*time.Millisecond, "the deletion started")
	require.NoError(t, add(read(), map[int32][]int32{3: {0, 1}}))
	require.Eventually(t, func() bool {
		return slices.Equal(slices.Sorted(maps.Keys(read().Replicas)), []int32{0, 1, 2})
	}, 20*time.Second, 5*time.Millisecond, "the added partition is taken out again")
	require.Equal(t, int32(-9), leader(3), "and never created")
}
