package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// KIP-101, scenario 1: a follower restarts with a stale high watermark,
// and the leader dies before the follower has fetched again. Truncating to
// the high watermark on becoming a follower, as Kafka did before leader
// epochs, would throw away a record that was acknowledged, and the follower
// would then lead without it. A follower that truncates only by what its
// leader says about epochs keeps it: a leader it cannot reach tells it
// nothing, and nothing is cut.
func TestKIP101FollowerWithStaleHighWatermarkKeepsAcknowledgedRecord(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("kip101", 1, 2) // leader 0, follower 1
	p := tp("kip101", 0)
	c.produce(p, kgo.AllISRAcks(), "m1", "m2") // both acknowledged: both replicas have both
	c.waitInSync(p)

	// Broker 1 dies having checkpointed its high watermark before it
	// learned that m2 was committed: its checkpoint says 1.
	require.NoError(t, c.CrashBroker(1, cluster_Crash(nil, map[commitlog.TopicPartition]int64{p: 1})))
	require.NoError(t, c.Controller.BrokerStopped(1))
	// The leader dies too, and broker 1 restarts, before the controller
	// notices the leader's death: broker 1 is told to follow broker 0.
	require.NoError(t, c.StopBroker(0))
	c.start(1)
	b1, _ := c.Broker(1)
	rp, ok := b1.Replicas.Partition(p.Topic, p.Partition)
	require.True(t, ok)
	require.Equal(t, int64(1), rp.HighWatermark(), "the stale checkpoint was read")
	require.Equal(t, int64(2), rp.Log.EndOffset(), "becoming a follower cut nothing")

	require.NoError(t, c.Controller.BrokerStopped(0)) // now the controller notices
	st, _ := c.Controller.State(p)
	require.Equal(t, int32(1), st.Leader)
	require.Len(t, c.logOf(1, p), 2, "the new leader has the acknowledged m2")

	// In this stage every assigned replica counts for the high watermark,
	// so m2 becomes readable when broker 0 is back as a follower (stage
	// 04's ISR would let the new leader go on alone).
	c.start(0)
	c.waitInSync(p)
	require.Equal(t, []string{"m1", "m2"}, c.consume(p, 2), "the acknowledged m2 survived")
}

// KIP-101, scenario 2: both replicas lose power with different unflushed
// tails. The follower comes back first and becomes leader of a new epoch,
// and writes at the offset where the old leader had a record the follower
// never got. When the old leader returns as a follower, truncating by epoch
// removes that record: no offset holds different records on the two
// replicas.
func TestKIP101ReplicasThatLostDifferentTailsDoNotDiverge(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("kip101b", 1, 2) // leader 0, follower 1
	p := tp("kip101b", 0)
	c.produce(p, kgo.AllISRAcks(), "m1")
	c.waitInSync(p)
	c.produce(p, kgo.LeaderAck(), "m2")
	c.waitInSync(p)

	// Power fails. Broker 1 had not flushed m2 (offset 1); broker 0 had.
	require.NoError(t, c.CrashBroker(1, cluster_Crash(map[commitlog.TopicPartition]int64{p: 1}, nil)))
	require.NoError(t, c.CrashBroker(0, cluster_Crash(nil, nil)))
	require.NoError(t, c.Controller.BrokerStopped(0))
	require.NoError(t, c.Controller.BrokerStopped(1))

	c.start(1) // first back: the partition had no leader, so it leads, at a new epoch
	st, _ := c.Controller.State(p)
	require.Equal(t, int32(1), st.Leader)
	c.produce(p, kgo.LeaderAck(), "m3") // written at offset 1, where broker 0 has m2

	c.start(0) // follows broker 1: asks where epoch 0 ends (offset 1) and cuts m2
	batches := c.waitInSync(p)
	require.Len(t, batches, 2)
	require.Equal(t, int32(0), batches[0].Epoch)
	require.Equal(t, st.LeaderEpoch, batches[1].Epoch, "offset 1 holds the new leader's m3 on both replicas")
	require.Equal(t, []string{"m1", "m3"}, c.consume(p, 2))
}

// KIP-279: after leadership moved twice while a replica was away, that
// replica's latest epoch is one the current leader never had. The leader
// answers with its largest epoch below it; the replica does not have that
// epoch either, so it cuts back to where its own older epoch ended and asks
// again, until both sides agree. Its logs never diverge from the leader's.
func TestKIP279FollowerTruncatesStepByStepAfterTwoLeaderChanges(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("kip279", 1, 3) // replicas 0, 1, 2; leader 0 at epoch 0
	p := tp("kip279", 0)
	c.produce(p, kgo.AllISRAcks(), "m0")
	c.waitInSync(p)

	// Broker 1 leads alone and writes m1.
	c.stop(0)
	c.stop(2)
	c.elect(p, 1)
	c.produce(p, kgo.LeaderAck(), "m1")
	m1, _ := c.Controller.State(p)
	// Broker 0 comes back while 1 is away, leads, and writes m2 at
	// offset 1 (an unclean election: it never had m1).
	c.stop(1)
	require.NoError(t, c.StartBroker(0))
	require.NoError(t, c.Controller.BrokerStarted(0))
	st, _ := c.Controller.State(p)
	require.Equal(t, int32(0), st.Leader)
	c.produce(p, kgo.LeaderAck(), "m2")
	// Broker 1 leads again; broker 0 (whose latest epoch broker 1 never
	// saw) and broker 2 (which has only the first epoch) follow.
	c.stop(0)
	c.start(1)
	c.produce(p, kgo.LeaderAck(), "m3")
	m3, _ := c.Controller.State(p)
	c.start(0)
	c.start(2)

	batches := c.waitInSync(p)
	require.Equal(t, []int32{0, m1.LeaderEpoch, m3.LeaderEpoch}, []int32{batches[0].Epoch, batches[1].Epoch, batches[2].Epoch})
	require.Equal(t, []string{"m0", "m1", "m3"}, c.consume(p, 3), "m2 is gone from broker 0")
}
