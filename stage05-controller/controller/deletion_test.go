package controller_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// The paths of Kafka's TopicDeletionManager, each of which used to leave
// a topic marked for deletion for ever: a broker down when the deletion
// starts, a broker that dies before it answers StopReplica, a refused
// StopReplica. The brokers are answeringBrokers: the controller's
// requests reach them, and they answer as each test says.

// deletionCluster is three answering brokers and one controller.
type deletionCluster struct {
	ens     *zktest.Ensemble
	brokers []*answeringBroker
	ctl     *candidate
}

func startDeletionCluster(t *testing.T) *deletionCluster {
	t.Helper()
	ens := zktest.StartStandalone(t)
	dc := &deletionCluster{ens: ens}
	for id := range int32(3) {
		dc.brokers = append(dc.brokers, startAnsweringBroker(t, ens, id))
	}
	dc.ctl = startCandidates(t, ens, 1)[0]
	active(t, []*candidate{dc.ctl})
	return dc
}

// createTopic creates a topic with partitions replicated on every broker
// and waits for each to have a leader.
func (dc *deletionCluster) createTopic(t *testing.T, topic string, partitions int32) []commitlog.TopicPartition {
	t.Helper()
	replicas := map[int32][]int32{}
	var tps []commitlog.TopicPartition
	for p := range partitions {
		replicas[p] = []int32{p % 3, (p + 1) % 3, (p + 2) % 3}
		tps = append(tps, commitlog.TopicPartition{Topic: topic, Partition: p})
	}
	require.NoError(t, dc.ctl.zk.CreateTopic(topic, kafkazk.TopicAssignment{Replicas: replicas}, nil))
	for _, tp := range tps {
		require.Eventually(t, func() bool {
			s, _, err := dc.ctl.zk.PartitionState(tp)
			return err == nil && s.Leader >= 0
		}, 20*time.Second, 5*time.Millisecond, "%s gets a leader", tp)
	}
	return tps
}

// topicGone reports whether the topic's znodes and its deletion mark are
// all gone.
func (dc *deletionCluster) topicGone(t *testing.T, topic string) bool {
	exists, err := dc.ctl.zk.TopicExists(topic)
	require.NoError(t, err)
	marked, _, err := dc.ctl.zk.Conn().Exists(kafkazk.DeleteTopicPath(topic))
	require.NoError(t, err)
	return !exists && !marked
}

// replicaStates returns the replica state machine's states of topic's
// replicas on broker.
func (dc *deletionCluster) replicaStates(t *testing.T, tps []commitlog.TopicPartition, broker int32) []controller.ReplicaStateName {
	_, replicas, err := dc.ctl.ctl.StateMachines()
	require.NoError(t, err)
	var out []controller.ReplicaStateName
	for _, tp := range tps {
		out = append(out, replicas[controller.Replica{TopicPartition: tp, Broker: broker}])
	}
	return out
}

func allIn(states []controller.ReplicaStateName, s ...controller.ReplicaStateName) bool {
	for _, x := range states {
		if !slices.Contains(s, x) {
			return false
		}
	}
	return len(states) > 0
}

// waiting are the states of a replica whose deletion waits for its
// broker: ReplicaDeletionIneligible, and OfflineReplica once no other
// replica's answer is awaited (Kafka's retryDeletionForIneligibleReplicas
// puts it there, ready to be started again when the topic is resumed).
var waiting = []controller.ReplicaStateName{controller.ReplicaDeletionIneligible, controller.OfflineReplica}

// TestATopicWaitsForABrokerThatIsDownAndIsDeletedWhenItStarts: broker 2
// is down when the deletion starts. The replicas on brokers 0 and 1 are
// deleted, broker 2's wait (ReplicaDeletionIneligible, then
// OfflineReplica) and so does the topic (its znodes go only when every
// replica is deleted); when broker 2
// starts, its replicas are sent StopReplica and the topic is gone (Kafka's
// onBrokerStartup, resumeDeletionForTopics). Before, broker 2 got its
// StopReplica on start but nobody listened to its answer: the topic
// stayed marked for ever.
func TestATopicWaitsForABrokerThatIsDownAndIsDeletedWhenItStarts(t *testing.T) {
	dc := startDeletionCluster(t)
	tps := dc.createTopic(t, "doomed", 2)
	dc.brokers[2].kill()
	require.Eventually(t, func() bool { return allIn(dc.replicaStates(t, tps, 2), controller.OfflineReplica) },
		20*time.Second, 5*time.Millisecond, "the controller sees broker 2 die")

	require.NoError(t, dc.ctl.zk.MarkTopicForDeletion("doomed"))
	require.Eventually(t, func() bool {
		return allIn(dc.replicaStates(t, tps, 0), controller.ReplicaDeletionSuccessful) &&
			allIn(dc.replicaStates(t, tps, 1), controller.ReplicaDeletionSuccessful) &&
			allIn(dc.replicaStates(t, tps, 2), waiting...)
	}, 20*time.Second, 5*time.Millisecond, "the live brokers' replicas deleted, broker 2's waiting")
	require.False(t, dc.topicGone(t, "doomed"), "the topic waits for broker 2")

	dc.brokers[2].start()
	require.Eventually(t, func() bool { return dc.topicGone(t, "doomed") }, 20*time.Second, 10*time.Millisecond,
		"broker 2 started: its replicas are deleted and the topic is gone")
	for _, tp := range tps {
		require.Equal(t, 1, dc.brokers[2].stopped(tp, true), "broker 2 deleted %s on start", tp)
	}
}

// TestATopicDeletionSurvivesABrokerThatDiesBeforeAnswering: broker 1
// holds its StopReplica and dies. Its channel, and the request in it, is
// dropped; its replicas go ReplicaDeletionIneligible (Kafka's
// failReplicaDeletion from onBrokerFailure), and when it starts again
// they are sent StopReplica again and the topic is deleted. Before, they
// were sent StopReplica on its start, and the answer was not listened to.
func TestATopicDeletionSurvivesABrokerThatDiesBeforeAnswering(t *testing.T) {
	dc := startDeletionCluster(t)
	tps := dc.createTopic(t, "doomed", 2)
	dc.brokers[1].setReplies(func(int) stopReply { return stopHolds })
	require.NoError(t, dc.ctl.zk.MarkTopicForDeletion("doomed"))
	require.Eventually(t, func() bool { return dc.brokers[1].stopped(tps[0], true) == 1 }, 20*time.Second, 5*time.Millisecond,
		"broker 1 got its StopReplica")
	require.Equal(t, []controller.ReplicaStateName{controller.ReplicaDeletionStarted, controller.ReplicaDeletionStarted},
		dc.replicaStates(t, tps, 1), "and has not answered")

	dc.brokers[1].kill()
	require.Eventually(t, func() bool { return allIn(dc.replicaStates(t, tps, 1), waiting...) },
		20*time.Second, 5*time.Millisecond, "its replicas wait once it is dead")
	require.False(t, dc.topicGone(t, "doomed"))

	dc.brokers[1].setReplies(nil)
	dc.brokers[1].start()
	require.Eventually(t, func() bool { return dc.topicGone(t, "doomed") }, 20*time.Second, 10*time.Millisecond,
		"broker 1 started again: the topic is gone")
	require.GreaterOrEqual(t, dc.brokers[1].stopped(tps[0], true), 2, "asked before its death, and again after")
}

// TestARefusedOrLostStopReplicaIsSentAgain: broker 0 closes the connection
// on its first StopReplica (the channel sends it again on a new one);
// broker 1 answers KAFKA_STORAGE_ERROR for one partition of its first;
// broker 2 refuses its first request whole. Each refused replica goes
// ReplicaDeletionIneligible and is asked again (after
// deletionRetryBackoff: Kafka would wait for a broker to start); the
// topic is deleted only once every replica is. Before, a refused request
// left the topic marked for ever, and a refused partition counted as
// deleted.
func TestARefusedOrLostStopReplicaIsSentAgain(t *testing.T) {
	dc := startDeletionCluster(t)
	tps := dc.createTopic(t, "doomed", 2)
	first := func(reply stopReply) func(int) stopReply {
		return func(n int) stopReply {
			if n == 1 {
				return reply
			}
			return stopDeletes
		}
	}
	dc.brokers[0].setReplies(first(stopDropsConnection))
	dc.brokers[1].setReplies(first(stopRefusesFirstPartition))
	dc.brokers[2].setReplies(first(stopRefusesRequest))

	require.NoError(t, dc.ctl.zk.MarkTopicForDeletion("doomed"))
	require.Eventually(t, func() bool { return dc.topicGone(t, "doomed") }, 30*time.Second, 10*time.Millisecond,
		"every replica deleted in the end, and the topic gone")
	for id, b := range dc.brokers {
		for _, tp := range tps {
			n := b.stopped(tp, true)
			if id == 1 && tp != tps[0] {
				require.Equal(t, 1, n, "broker 1 deleted %s at once: it is not asked again", tp)
				continue
			}
			require.Equal(t, 2, n, fmt.Sprintf("broker %d was asked again for %s", id, tp))
		}
	}
}

// TestATopicDeletionResumesUnderANewController: the controller fails over
// while broker 1 holds its StopReplica, and a partition's state znode is
// already gone (as a predecessor's half-done teardown leaves it). The new
// controller finds the topic in /admin/delete_topics before it elects
// anything (Kafka's fetchTopicDeletionsInProgress, before its state
// machines start): it creates no state for that partition and tells no
// broker to lead or follow the topic; it asks every replica again (a
// broker asked twice deletes nothing twice) and deletes the topic.
// Before, its failover created the missing state and sent LeaderAndIsr
// for the topic, then deleted it.
func TestATopicDeletionResumesUnderANewController(t *testing.T) {
	ens := zktest.StartStandalone(t)
	var brokers []*answeringBroker
	for id := range int32(3) {
		brokers = append(brokers, startAnsweringBroker(t, ens, id))
	}
	cds := startCandidates(t, ens, 2)
	first := active(t, cds)
	dc := &deletionCluster{ens: ens, brokers: brokers, ctl: first}
	tps := dc.createTopic(t, "doomed", 2)
	brokers[1].setReplies(func(int) stopReply { return stopHolds })
	require.NoError(t, first.zk.MarkTopicForDeletion("doomed"))
	require.Eventually(t, func() bool { return brokers[1].stopped(tps[0], true) == 1 }, 20*time.Second, 5*time.Millisecond,
		"broker 1 got its StopReplica")
	require.NoError(t, first.zk.Conn().Delete(kafkazk.PartitionStatePath(tps[1]), -1))
	var led []int
	for _, b := range brokers {
		led = append(led, b.leaderAndIsrs(tps[0])+b.leaderAndIsrs(tps[1]))
	}

	brokers[1].setReplies(nil)
	first.stop()
	dc.ctl = active(t, cds)
	require.Eventually(t, func() bool { return dc.topicGone(t, "doomed") }, 20*time.Second, 10*time.Millisecond,
		"the new controller finished the deletion")
	require.Equal(t, 2, brokers[1].stopped(tps[0], true), "broker 1 was asked again by the new controller")
	for id, b := range brokers {
		require.Equal(t, led[id], b.leaderAndIsrs(tps[0])+b.leaderAndIsrs(tps[1]),
			"broker %d was told nothing of the topic by the new controller", id)
	}
}
