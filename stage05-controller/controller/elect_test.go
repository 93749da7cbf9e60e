package controller

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
)

// The elections and the state machines are pure: these tests need no
// ZooKeeper.

func liveSet(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

func TestOfflineElectionTakesTheFirstLiveISRMemberInAssignmentOrder(t *testing.T) {
	for _, tt := range []struct {
		name          string
		replicas, isr []int32
		live          []int32
		unclean       bool
		leader        int32
		newISR        []int32
		ok            bool
	}{
		{"assignment order, not ISR order", []int32{2, 0, 1}, []int32{1, 0}, []int32{0, 1}, false, 0, []int32{1, 0}, true},
		{"a dead ISR member is skipped and leaves the ISR", []int32{0, 1, 2}, []int32{0, 1, 2}, []int32{1, 2}, false, 1, []int32{1, 2}, true},
		{"a live replica outside the ISR may not lead", []int32{0, 1, 2}, []int32{0}, []int32{1, 2}, false, -1, nil, false},
		{"unless unclean election is on: it leads alone", []int32{0, 1, 2}, []int32{0}, []int32{2, 1}, true, 1, []int32{1}, true},
		{"unclean still prefers the ISR", []int32{0, 1, 2}, []int32{2}, []int32{1, 2}, true, 2, []int32{2}, true},
		{"nobody live", []int32{0, 1}, []int32{0, 1}, nil, true, -1, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leader, newISR, ok := offlineElection(tt.replicas, tt.isr, liveSet(tt.live...), tt.unclean)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.leader, leader)
			require.Equal(t, tt.newISR, newISR)
		})
	}
}

func TestControlledShutdownAndPreferredElections(t *testing.T) {
	// Broker 0 shuts down: "live" excludes it although it still runs.
	leader, newISR, ok := controlledShutdownElection([]int32{0, 1, 2}, []int32{0, 2, 1}, liveSet(1, 2))
	require.True(t, ok)
	require.Equal(t, int32(1), leader)
	require.Equal(t, []int32{2, 1}, newISR)
	_, _, ok = controlledShutdownElection([]int32{0, 1}, []int32{0}, liveSet(1))
	require.False(t, ok, "no other ISR member: the leadership stays (reported as remaining)")

	p, ok := preferredElection([]int32{2, 0, 1}, []int32{0, 1, 2}, liveSet(0, 1, 2))
	require.True(t, ok)
	require.Equal(t, int32(2), p)
	_, ok = preferredElection([]int32{2, 0, 1}, []int32{0, 1}, liveSet(0, 1, 2))
	require.False(t, ok, "the preferred replica is not in the ISR yet")
}

func TestADeadBrokerLeavesTheISRButTheISRNeverEmpties(t *testing.T) {
	s := isr.PartitionState{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}}
	gone := liveSet(2) // "gone" as a set: broker 2
	out := withoutReplicas(s, gone)
	require.Equal(t, int32(1), out.Leader)
	require.Equal(t, []int32{1}, out.ISR)

	out = withoutReplicas(isr.PartitionState{Leader: 1, ISR: []int32{1}}, liveSet(1))
	require.Equal(t, int32(-1), out.Leader, "the last ISR member died: no leader")
	require.Equal(t, []int32{1}, out.ISR, "and it stays in the ISR, the one that may lead again")

	out = withoutReplicas(isr.PartitionState{Leader: 2, ISR: []int32{1, 2}}, liveSet(1, 2))
	require.Equal(t, []int32{2}, out.ISR, "both died at once: the leader is kept")
}

func TestStateMachinesRefuseTransitionsKafkaForbids(t *testing.T) {
	m := newMachines(slog.New(slog.NewTextHandler(io.Discard, nil)))
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.False(t, m.partition(tp, OnlinePartition), "a partition that does not exist cannot go online")
	require.True(t, m.partition(tp, NewPartition))
	require.True(t, m.partition(tp, OnlinePartition))
	require.False(t, m.partition(tp, NewPartition), "an online partition is not new again")
	require.False(t, m.partition(tp, NonExistentPartition), "it must go offline before it is deleted")
	require.True(t, m.partition(tp, OfflinePartition))
	require.True(t, m.partition(tp, NonExistentPartition))
	require.NotContains(t, m.partitions, tp)

	r := Replica{tp, 1}
	require.False(t, m.replica(r, ReplicaDeletionStarted), "only an offline replica is deleted")
	m.replicaTo(r, OnlineReplica)
	require.Equal(t, OnlineReplica, m.replicas[r], "through NewReplica")
	m.replicaTo(r, ReplicaDeletionStarted)
	require.Equal(t, ReplicaDeletionStarted, m.replicas[r], "through OfflineReplica")
	require.False(t, m.replica(r, NonExistentReplica), "not before the broker said it deleted it")
	require.True(t, m.replica(r, ReplicaDeletionSuccessful))
	require.True(t, m.replica(r, NonExistentReplica))
	require.Empty(t, m.replicas)
}
