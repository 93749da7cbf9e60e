package cluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

func TestFollowerWithAnEmptyDiskCatchesUp(t *testing.T) {
	c := startCluster(t, 3, "log.segment.bytes", "4096")
	c.createTopic("rebuild", 1, 3)
	p := tp("rebuild", 0)
	c.produce(p, kgo.AllISRAcks(), values("before", 200)...)
	c.waitInSync(p)

	// Broker 2 loses its disk.
	require.NoError(t, c.StopBroker(2))
	require.NoError(t, c.Controller.BrokerStopped(2))
	require.NoError(t, os.RemoveAll(c.LogDir(2)))
	c.start(2)

	batches := c.waitInSync(p)
	require.Equal(t, int64(199), batches[len(batches)-1].LastOffset)
	b2, _ := c.Broker(2)
	rp, _ := b2.Replicas.Partition(p.Topic, p.Partition)
	require.Greater(t, len(rp.Log.Segments()), 3, "the copy rolled segments as it went")
}

func TestFollowerSeveralSegmentsBehindCatchesUp(t *testing.T) {
	c := startCluster(t, 3, "log.segment.bytes", "4096")
	c.createTopic("behind", 1, 3)
	p := tp("behind", 0)
	c.produce(p, kgo.AllISRAcks(), values("a", 20)...)
	c.waitInSync(p)

	c.stop(2)
	// With every replica counting, acks=all would wait for broker 2:
	// acks=1 lets the leader go on without it.
	c.produce(p, kgo.LeaderAck(), values("b", 300)...)
	b0, _ := c.Broker(0)
	lp, _ := b0.Replicas.Partition(p.Topic, p.Partition)
	require.Greater(t, len(lp.Log.Segments()), 5)
	require.Equal(t, int64(20), lp.HighWatermark(), "broker 2 holds the high watermark back while away")

	c.start(2)
	c.waitInSync(p)
	require.Equal(t, int64(320), lp.HighWatermark())
}

func TestFormerLeaderTruncatesItsUncommittedTail(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("tail", 1, 3)
	p := tp("tail", 0)
	c.produce(p, kgo.AllISRAcks(), "committed")
	c.waitInSync(p)

	c.stop(1)
	c.stop(2)
	c.produce(p, kgo.LeaderAck(), "never-committed-1", "never-committed-2") // only broker 0 has them
	c.stop(0)
	c.start(1)
	c.start(2)
	c.produce(p, kgo.LeaderAck(), "new-leader")
	c.start(0)

	batches := c.waitInSync(p)
	require.Len(t, batches, 2)
	require.Equal(t, []string{"committed", "new-leader"}, c.consume(p, 2))
}

func TestStaleControllerAndLeaderEpochsAreIgnored(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("fenced", 1, 2)
	p := tp("fenced", 0)
	c.elect(p, 1) // leader 1, epoch 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	leaderAndIsr := func(controllerEpoch, leader, leaderEpoch int32) *kmsg.LeaderAndISRResponse {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 9, controllerEpoch, -1
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = 0, controllerEpoch, leader, leaderEpoch
		ps.ISR, ps.Replicas = []int32{0, 1}, []int32{0, 1}
		req.TopicStates = []kmsg.LeaderAndISRRequestTopicState{{Topic: p.Topic, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}}}
		resp, err := c.Controller.Send(ctx, 0, req)
		require.NoError(t, err)
		return resp.(*kmsg.LeaderAndISRResponse)
	}
	b0, _ := c.Broker(0)
	rp, _ := b0.Replicas.Partition(p.Topic, p.Partition)

	// A controller from before the current one (epoch 0 < 1): refused whole.
	resp := leaderAndIsr(0, 0, 5)
	require.Equal(t, kerr.StaleControllerEpoch.Code, resp.ErrorCode)
	require.Equal(t, replica.Follower, rp.Role(), "nothing changed")

	// The current controller, but a leader epoch that is not newer: ignored.
	resp = leaderAndIsr(1, 0, 1)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, kerr.StaleControllerEpoch.Code, server.LeaderAndIsrResults(resp)[0].ErrorCode, "Kafka's answer for a stale partition state")
	leader, epoch := rp.Leader()
	require.Equal(t, []int32{1, 1}, []int32{leader, epoch})
	require.Equal(t, replica.Follower, rp.Role())

	// UpdateMetadata from a stale controller is refused too.
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.ControllerEpoch = 0
	r, err := c.Controller.Send(ctx, 0, um)
	require.NoError(t, err)
	require.Equal(t, kerr.StaleControllerEpoch.Code, r.(*kmsg.UpdateMetadataResponse).ErrorCode)

	// A newer epoch is taken.
	resp = leaderAndIsr(2, 0, 2)
	require.Zero(t, server.LeaderAndIsrResults(resp)[0].ErrorCode)
	require.Equal(t, replica.Leader, rp.Role())
}

func TestProducingToAFollowerGetsNotLeaderAndClientsFollowTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("moving", 1, 3)
	p := tp("moving", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "moving", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte("not even a batch")}}}}
	resp, err := c.Controller.Send(ctx, 1, req) // broker 1 follows
	require.NoError(t, err)
	require.Equal(t, kerr.NotLeaderForPartition.Code, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)

	// franz-go refreshes its metadata and goes to the leader by itself,
	// seeded with a follower only.
	b1, _ := c.Broker(1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "moving", Value: []byte("found the leader")}).FirstErr())
	c.elect(p, 2)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "moving", Value: []byte("found the new leader")}).FirstErr())
	c.waitInSync(p)
	require.Equal(t, []string{"found the leader", "found the new leader"}, c.consume(p, 2))
}
