package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestACutOffControllerIsReplacedAndFenced: KAFKA-6082's zombie
// controller, shown rather than assumed. The controller's process is cut
// off from every ZooKeeper server (a network partition: nothing closes)
// past its session timeout. It stops acting on its own; another broker is
// elected at a higher epoch and leads the partitions. What the old one
// could still do is refused: a LeaderAndIsr at its epoch, by every broker
// (STALE_CONTROLLER_EPOCH), and a ZooKeeper write at its epoch's version,
// by the epoch check (the multi's first op). Reconnected, it registers
// again at a newer broker epoch and serves as a broker.
func TestACutOffControllerIsReplacedAndFenced(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.StartWith(t, ens, 3, nil, brokertest.Options{ZooKeeperProxies: true})
	zk := observer(t, ens)
	old := waitController(t, zk, func(int32) bool { return true })
	oldEpoch, err := zk.ControllerEpochValue()
	require.NoError(t, err)

	const topic, partitions = "zombie", 3
	createTopic(t, c, topic, partitions, nil)
	waitLeaders(t, zk, topic, partitions, func(int32) bool { return true })
	roundTrip(t, c, topic, partitions, "before", 10)
	registered, err := zk.Brokers()
	require.NoError(t, err)
	var oldBrokerEpoch int64
	for _, b := range registered {
		if b.ID == old {
			oldBrokerEpoch = b.Epoch
		}
	}

	cut := time.Now()
	c.Broker(old).CutZooKeeper()
	next := waitController(t, zk, func(id int32) bool { return id != old })
	t.Logf("controller %d cut off: broker %d elected after %v (session timeout %v)", old, next,
		time.Since(cut).Round(time.Millisecond), zktest.SessionTimeout)
	newEpoch, err := zk.ControllerEpochValue()
	require.NoError(t, err)
	require.Greater(t, newEpoch.Epoch, oldEpoch.Epoch)
	others := func(id int32) bool { return id != old }
	waitLeaders(t, zk, topic, partitions, others)
	require.Contains(t, c.Broker(old).Log(), "the controller stops acting", "the old controller stopped on its own")

	// A LeaderAndIsr as the zombie would send it, to each broker that has
	// heard from the new controller (its Metadata names it: it got the new
	// controller's UpdateMetadata, and with it the new epoch): refused. A
	// broker that has not heard from the new controller yet cannot know,
	// in Kafka as here; hence the wait.
	for _, id := range []int32{0, 1, 2} {
		if id == old {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(id).Addr()))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
			return err == nil && resp.ControllerID == next
		}, 30*time.Second, 20*time.Millisecond, "broker %d heard from controller %d", id, next)
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = old, oldEpoch.Epoch, -1
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = 0, oldEpoch.Epoch, old, 1000
		ps.ISR, ps.Replicas = []int32{old}, []int32{0, 1, 2}
		req.TopicStates = []kmsg.LeaderAndISRRequestTopicState{{Topic: topic, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}}}
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		require.Equal(t, kerr.StaleControllerEpoch.Code, resp.ErrorCode, "broker %d refuses the zombie's LeaderAndIsr", id)
		cl.Close()
	}
	// A ZooKeeper write as the zombie would make it: fenced.
	tp := commitlog.TopicPartition{Topic: topic, Partition: 0}
	s, v, err := zk.PartitionState(tp)
	require.NoError(t, err)
	zombie := s
	zombie.Leader = old
	_, _, err = zk.UpdatePartitionStates(oldEpoch, map[commitlog.TopicPartition]kafkazk.VersionedState{tp: {PartitionState: zombie, ZkVersion: v}})
	require.ErrorIs(t, err, kafkazk.ErrControllerMoved)
	// The new controller may write this state meanwhile (taking the
	// cut-off broker out of the ISR), so compare only what the zombie
	// wrote: its leader.
	after, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	require.NotEqual(t, old, after.Leader, "nothing of the zombie's write landed")

	c.Broker(old).RestoreZooKeeper()
	require.Eventually(t, func() bool {
		brokers, err := zk.Brokers()
		if err != nil {
			return false
		}
		for _, b := range brokers {
			if b.ID == old && b.Epoch > oldBrokerEpoch {
				return true
			}
		}
		return false
	}, 60*time.Second, 20*time.Millisecond, "broker %d registers again, at a newer broker epoch", old)
	id, _, err := zk.ControllerID()
	require.NoError(t, err)
	require.Equal(t, next, id, "the new controller stays")
	require.True(t, strings.Contains(c.Broker(old).Log(), "resigning as controller"), "and the old one resigned")
	waitLeaders(t, zk, topic, partitions, func(int32) bool { return true })
	roundTrip(t, c, topic, partitions, "after", 10)
}
