package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// Both replicas know epoch 0, but it ends earlier on the follower: the
// follower went on to lead a later epoch from offset 3, while the leader
// kept writing epoch 0 to offset 5. The logs agree only up to where epoch 0
// ends first, on the follower's side.
func TestFollowerCutsWhereTheSharedEpochEndsOnItsOwnSide(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("shared", 1, 2) // leader 0
	p := tp("shared", 0)
	c.produce(p, kgo.AllISRAcks(), "a0", "a1", "a2")
	c.waitInSync(p)

	c.stop(1)
	c.produce(p, kgo.LeaderAck(), "a3", "a4") // epoch 0, broker 0 only
	c.stop(0)
	c.start(1) // leads a new epoch from offset 3
	c.produce(p, kgo.LeaderAck(), "b3", "b4", "b5")
	c.stop(1)
	c.start(0) // leads again; its epoch 0 runs to offset 5
	c.start(1) // epoch 0 ends at 3 here: b3..b5 go

	c.waitInSync(p)
	require.Equal(t, []string{"a0", "a1", "a2", "a3", "a4"}, c.consume(p, 5))
}

// The new leader lost its whole log and leads a new epoch from offset 0;
// the follower has records of epoch 0 that the leader never will. Asked
// about epoch 0, the leader answers that it ends at 0 (Kafka's rule for an
// epoch older than the cache's first): the follower empties its log.
func TestFollowerOfALeaderThatLostItsLogConverges(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("lost", 1, 2) // leader 0
	p := tp("lost", 0)
	c.produce(p, kgo.AllISRAcks(), values("a", 6)...)
	c.waitInSync(p)

	require.NoError(t, c.CrashBroker(1, cluster_Crash(map[commitlog.TopicPartition]int64{p: 0}, nil)))
	require.NoError(t, c.CrashBroker(0, cluster_Crash(nil, nil)))
	require.NoError(t, c.Controller.BrokerStopped(0))
	require.NoError(t, c.Controller.BrokerStopped(1))
	c.start(1) // an empty log, leading
	c.produce(p, kgo.LeaderAck(), "b0", "b1", "b2")
	c.start(0)

	batches := c.waitInSync(p)
	require.Len(t, batches, 3)
	require.Equal(t, []string{"b0", "b1", "b2"}, c.consume(p, 3))
}

// An acks=all produce waiting for a follower that is away learns at once
// that its leader moved, instead of waiting out its timeout.
func TestWaitingAcksAllProduceLearnsItsLeaderMoved(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("moved", 1, 3) // leader 0
	p := tp("moved", 0)
	c.stop(2) // every replica counts: the high watermark cannot pass new records

	leader, _ := c.Broker(0)
	cl, err := protocol.Dial(context.Background(), leader.Addr().String(), "test")
	require.NoError(t, err)
	defer cl.Close()
	data, err := record.AppendBatch(nil, record.NewBatch(time.Now().UnixMilli(), record.Record{Value: []byte("x")}))
	require.NoError(t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 60_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "moved", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: data}}}}
	type answer struct {
		resp kmsg.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := cl.Request(context.Background(), req)
		answered <- answer{resp, err}
	}()
	b0, _ := c.Broker(0)
	rp, _ := b0.Replicas.Partition(p.Topic, p.Partition)
	require.Eventually(t, func() bool { return rp.Log.EndOffset() == 1 }, 10*time.Second, time.Millisecond, "appended, now waiting")

	c.elect(p, 1)
	select {
	case a := <-answered:
		require.NoError(t, a.err)
		require.Equal(t, kerr.NotLeaderForPartition.Code, a.resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	case <-time.After(10 * time.Second):
		t.Fatal("the produce waited on, although its leader moved (its timeout is 60 s)")
	}
}
