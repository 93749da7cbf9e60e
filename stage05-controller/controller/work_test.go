package controller_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// fakeBroker registers a broker id in ZooKeeper, as a broker would, at an
// address where nothing listens: the controller's requests to it are
// retried, never answered, which this test does not need.
func fakeBroker(t *testing.T, ens *zktest.Ensemble, id int32) *kafkazk.Client {
	t.Helper()
	zk, err := kafkazk.Connect(ens.Addr(0), kafkazk.Options{SessionTimeout: zktest.SessionTimeout, Logger: testLogger()})
	require.NoError(t, err)
	t.Cleanup(zk.Close)
	require.NoError(t, zk.CreateTopLevelPaths())
	_, err = zk.RegisterBroker(kafkazk.BrokerInfo{ID: id, JmxPort: -1, Timestamp: time.Now(), Endpoints: []kafkazk.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}})
	require.NoError(t, err)
	return zk
}

// TestLeaderElectionFromTheISRAndTheStateMachines drives the controller
// with broker registrations alone (no broker processes: this is the
// controller's own logic, on a real ZooKeeper): a new topic's partitions
// go NewPartition to OnlinePartition, led by their first replica; a dead
// broker's replicas go OfflineReplica and its leaderships go to the next
// live replica in the ISR, in assignment order, the ISR losing it; with
// every ISR member dead a partition goes OfflinePartition, keeping its
// last ISR member, and comes back online only when that member does (a
// live replica outside the ISR may not lead: clean election); deleting
// the topic starts its replicas' deletion, ineligible on a dead broker.
func TestLeaderElectionFromTheISRAndTheStateMachines(t *testing.T) {
	ens := zktest.StartStandalone(t)
	brokers := map[int32]*kafkazk.Client{0: fakeBroker(t, ens, 0), 1: fakeBroker(t, ens, 1), 2: fakeBroker(t, ens, 2)}
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk

	t0, t1 := commitlog.TopicPartition{Topic: "t", Partition: 0}, commitlog.TopicPartition{Topic: "t", Partition: 1}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0, 1, 2}, 1: {1, 2, 0}}}, nil))
	state := func(tp commitlog.TopicPartition) isr.PartitionState {
		s, _, err := zk.PartitionState(tp)
		if err != nil {
			return isr.PartitionState{Leader: -9}
		}
		return s
	}
	waitState := func(tp commitlog.TopicPartition, leader int32, inSync []int32, what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			s := state(tp)
			return s.Leader == leader && slices.Equal(s.ISR, inSync)
		}, 20*time.Second, 5*time.Millisecond, "%s: %s should be led by %d with ISR %v, is %+v", what, tp, leader, inSync, state(tp))
	}
	machines := func() (map[commitlog.TopicPartition]controller.PartitionStateName, map[controller.Replica]controller.ReplicaStateName) {
		p, r, err := ctl.ctl.StateMachines()
		require.NoError(t, err)
		return p, r
	}
	waitMachines := func(what string, ok func(map[commitlog.TopicPartition]controller.PartitionStateName, map[controller.Replica]controller.ReplicaStateName) bool) {
		t.Helper()
		require.Eventually(t, func() bool { return ok(machines()) }, 20*time.Second, 5*time.Millisecond, what)
	}

	waitState(t0, 0, []int32{0, 1, 2}, "created")
	waitState(t1, 1, []int32{1, 2, 0}, "created")
	waitMachines("new partitions online, every replica online", func(p map[commitlog.TopicPartition]controller.PartitionStateName, r map[controller.Replica]controller.ReplicaStateName) bool {
		return p[t0] == controller.OnlinePartition && p[t1] == controller.OnlinePartition && len(r) == 6 &&
			!slices.ContainsFunc(mapsValues(r), func(s controller.ReplicaStateName) bool { return s != controller.OnlineReplica })
	})

	brokers[0].Close()
	waitState(t0, 1, []int32{1, 2}, "broker 0 died")
	waitState(t1, 1, []int32{1, 2}, "broker 0 died")
	waitMachines("broker 0's replicas offline", func(_ map[commitlog.TopicPartition]controller.PartitionStateName, r map[controller.Replica]controller.ReplicaStateName) bool {
		return r[controller.Replica{TopicPartition: t0, Broker: 0}] == controller.OfflineReplica &&
			r[controller.Replica{TopicPartition: t1, Broker: 0}] == controller.OfflineReplica &&
			r[controller.Replica{TopicPartition: t0, Broker: 1}] == controller.OnlineReplica
	})
	s0 := state(t0)
	require.Equal(t, int32(1), s0.LeaderEpoch, "a new leader, a new epoch")

	brokers[1].Close()
	waitState(t0, 2, []int32{2}, "broker 1 died")
	waitState(t1, 2, []int32{2}, "broker 1 died")
	brokers[2].Close()
	waitState(t0, -1, []int32{2}, "every ISR member dead: offline, the last member kept")
	waitState(t1, -1, []int32{2}, "every ISR member dead")
	waitMachines("offline partitions", func(p map[commitlog.TopicPartition]controller.PartitionStateName, _ map[controller.Replica]controller.ReplicaStateName) bool {
		return p[t0] == controller.OfflinePartition && p[t1] == controller.OfflinePartition
	})

	brokers[0] = fakeBroker(t, ens, 0)
	waitMachines("broker 0's replicas online again", func(_ map[commitlog.TopicPartition]controller.PartitionStateName, r map[controller.Replica]controller.ReplicaStateName) bool {
		return r[controller.Replica{TopicPartition: t0, Broker: 0}] == controller.OnlineReplica
	})
	require.Equal(t, int32(-1), state(t0).Leader, "broker 0 is not in the ISR: no clean election")

	brokers[2] = fakeBroker(t, ens, 2)
	waitState(t0, 2, []int32{2}, "the last ISR member is back")
	waitState(t1, 2, []int32{2}, "the last ISR member is back")
	waitMachines("online again", func(p map[commitlog.TopicPartition]controller.PartitionStateName, _ map[controller.Replica]controller.ReplicaStateName) bool {
		return p[t0] == controller.OnlinePartition && p[t1] == controller.OnlinePartition
	})

	require.NoError(t, zk.MarkTopicForDeletion("t"))
	waitMachines("deletion started on live brokers, ineligible on the dead one", func(_ map[commitlog.TopicPartition]controller.PartitionStateName, r map[controller.Replica]controller.ReplicaStateName) bool {
		return r[controller.Replica{TopicPartition: t0, Broker: 0}] == controller.ReplicaDeletionStarted &&
			r[controller.Replica{TopicPartition: t0, Broker: 2}] == controller.ReplicaDeletionStarted &&
			r[controller.Replica{TopicPartition: t0, Broker: 1}] == controller.ReplicaDeletionIneligible
	})
}

func mapsValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestAControllerThatResignsInABrokerChangeStopsThere: one BrokerChange
// can hold a broker both dead and started (it registered again, with a
// new broker epoch, before the controller read /brokers/ids). If the
// controller's writes for the dead broker find a newer /controller_epoch,
// it resigns, which drops its channels to the brokers; it must not go on
// to the started one (it did: a nil channel map, and the broker process
// exited; found by final/faults). Here a newer controller is faked by
// bumping /controller_epoch, and broker 1, the partition's leader,
// registers again in one ZooKeeper multi; then /controller is deleted as
// the real successor's election would, and the same controller is elected
// again and finds broker 1 still leading.
func TestAControllerThatResignsInABrokerChangeStopsThere(t *testing.T) {
	ens := zktest.StartStandalone(t)
	brokers := map[int32]*kafkazk.Client{0: fakeBroker(t, ens, 0), 1: fakeBroker(t, ens, 1), 2: fakeBroker(t, ens, 2)}
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1, 0, 2}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(tp)
		return err == nil && s.Leader == 1 && slices.Equal(s.ISR, []int32{1, 0, 2})
	}, 20*time.Second, 5*time.Millisecond, "the partition online, led by broker 1")
	epoch, _ := ctl.ctl.Epoch()

	// A newer controller, as far as the fence can tell.
	cur, err := zk.ControllerEpochValue()
	require.NoError(t, err)
	_, err = zk.Conn().Set(kafkazk.ControllerEpochPath, kafkazk.EncodeControllerEpoch(cur.Epoch+1), cur.ZkVersion)
	require.NoError(t, err)
	// Broker 1 dies and registers again, in one step.
	info := kafkazk.BrokerInfo{ID: 1, JmxPort: -1, Timestamp: time.Now(), Endpoints: []kafkazk.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}}
	_, err = brokers[1].Conn().Multi(
		&gozk.DeleteRequest{Path: kafkazk.BrokerPath(1), Version: -1},
		&gozk.CreateRequest{Path: kafkazk.BrokerPath(1), Data: info.Encode(), Acl: gozk.WorldACL(gozk.PermAll), Flags: gozk.FlagEphemeral})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return !ctl.ctl.IsActive() && len(ctl.resignedTimes()) == 1 },
		20*time.Second, 5*time.Millisecond, "the controller's write for the dead broker is fenced, and it resigns")
	s, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	require.Equal(t, int32(1), s.Leader, "the fenced write changed nothing")

	require.NoError(t, zk.ResignController())
	active(t, []*candidate{ctl})
	again, _ := ctl.ctl.Epoch()
	require.Greater(t, again.Epoch, epoch.Epoch+1, "elected again, above the faked epoch")
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(tp)
		return err == nil && s.Leader == 1 && slices.Equal(s.ISR, []int32{1, 0, 2})
	}, 20*time.Second, 5*time.Millisecond, "broker 1, alive, still leads")
}

// TestAPartitionStateDeletedUnderTheControllerIsForgotten: a partition's
// state znode is deleted behind the controller's back (as a topic
// deletion by an earlier controller, or by hand, leaves it), then its
// leader dies. The controller's election write finds no znode (NONODE):
// it used to read the state again, find nothing, decide again from what
// it remembered and write again, for ever, and its event goroutine
// answered nothing more. It forgets the state now: the partition goes
// OfflinePartition, nothing is created in its place, and the next events
// are handled.
func TestAPartitionStateDeletedUnderTheControllerIsForgotten(t *testing.T) {
	ens := zktest.StartStandalone(t)
	brokers := map[int32]*kafkazk.Client{0: fakeBroker(t, ens, 0), 1: fakeBroker(t, ens, 1), 2: fakeBroker(t, ens, 2)}
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0, 1, 2}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(tp)
		return err == nil && s.Leader == 0
	}, 20*time.Second, 5*time.Millisecond, "the partition online, led by broker 0")

	require.NoError(t, zk.Conn().Delete(kafkazk.PartitionStatePath(tp), -1))
	brokers[0].Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var partitions map[commitlog.TopicPartition]controller.PartitionStateName
		err := within(10*time.Second, func() (err error) {
			partitions, _, err = ctl.ctl.StateMachines()
			return err
		})
		if errors.Is(err, errNoAnswer) {
			ctl.ctl = nil // a stuck controller cannot be closed
			t.Fatal("broker 0 died: " + err.Error())
		}
		require.NoError(t, err)
		if partitions[tp] == controller.OfflinePartition {
			break // its state forgotten
		}
		require.False(t, time.Now().After(deadline), "the partition should be offline, is %v", partitions[tp])
	}
	_, _, err := zk.PartitionState(tp)
	require.ErrorIs(t, err, isr.ErrNoNode, "and no state was written in its place")

	other := commitlog.TopicPartition{Topic: "next", Partition: 0}
	require.NoError(t, zk.CreateTopic("next", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1, 2}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(other)
		return err == nil && s.Leader == 1
	}, 20*time.Second, 5*time.Millisecond, "the controller goes on: a new topic is led")
}

// errNoAnswer is what within reports when f did not return in time.
var errNoAnswer = errors.New("no answer: the controller's event goroutine is stuck")

// within runs f and waits for it at most d.
func within(d time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return errNoAnswer
	}
}

// TestANewPartitionWithNoLiveReplicaIsCreatedWhenOneStarts: a topic
// created while its only replica's broker is down gets no state (no
// replica can lead). When the broker starts, the partition is created,
// led by it (Kafka's onBrokerStartup elects new partitions as well as
// offline ones). Before, only partitions with a state were elected at a
// broker's start, and this one waited for the next controller.
func TestANewPartitionWithNoLiveReplicaIsCreatedWhenOneStarts(t *testing.T) {
	ens := zktest.StartStandalone(t)
	fakeBroker(t, ens, 0)
	ctl := startCandidates(t, ens, 1)[0]
	active(t, []*candidate{ctl})
	zk := ctl.zk
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	require.NoError(t, zk.CreateTopic("t", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {1}}}, nil))
	// A topic created after it, whose leader shows the controller has
	// handled both.
	require.NoError(t, zk.CreateTopic("u", kafkazk.TopicAssignment{Replicas: map[int32][]int32{0: {0}}}, nil))
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: "u", Partition: 0})
		return err == nil && s.Leader == 0
	}, 20*time.Second, 5*time.Millisecond, "the next topic is led")
	_, _, err := zk.PartitionState(tp)
	require.ErrorIs(t, err, isr.ErrNoNode, "no state: its only replica is down")

	fakeBroker(t, ens, 1)
	require.Eventually(t, func() bool {
		s, _, err := zk.PartitionState(tp)
		return err == nil && s.Leader == 1 && slices.Equal(s.ISR, []int32{1})
	}, 20*time.Second, 5*time.Millisecond, "broker 1 started: it leads the partition")
}
