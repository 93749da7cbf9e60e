package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

// TestEveryBrokerNamesATopicByTheControllersID: the controller's topic id
// reaches every broker's metadata cache (UpdateMetadata v7+) and every
// replica's partition.metadata (LeaderAndIsr v5+); Metadata v12 answers
// the same id on each broker and names the topic by it; a consumer that
// fetches by id (franz-go, Fetch v13+) reads what was produced.
func TestEveryBrokerNamesATopicByTheControllersID(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("ids", 2, 3)
	var id store.TopicID
	for _, b := range c.IDs() {
		s, _ := c.Broker(b)
		cl, err := protocol.Dial(context.Background(), s.Addr().String(), "topic-ids-test")
		require.NoError(t, err)
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("ids")}}
		resp, err := cl.Request(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, int16(12), req.GetVersion())
		got := store.TopicID(resp.(*kmsg.MetadataResponse).Topics[0].TopicID)
		require.False(t, got.IsZero(), "broker %d", b)
		if id.IsZero() {
			id = got
		}
		require.Equal(t, id, got, "broker %d names the topic by the same id", b)
		held, ok := s.Store().TopicID("ids")
		require.True(t, ok, "broker %d holds replicas: partition.metadata", b)
		require.Equal(t, id, held)

		byID := kmsg.NewPtrMetadataRequest()
		byID.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}, {TopicID: store.NewTopicID()}}
		resp, err = cl.Request(context.Background(), byID)
		require.NoError(t, err)
		topics := resp.(*kmsg.MetadataResponse).Topics
		require.Len(t, topics, 2)
		require.Equal(t, kerr.UnknownTopicID.Code, topics[0].ErrorCode, "an id nobody gave")
		require.Equal(t, "ids", *topics[1].Topic)
		require.Len(t, topics[1].Partitions, 2)
	}
	c.produce(tp("ids", 0), kgo.AllISRAcks(), values("by-id", 50)...)
	require.Equal(t, values("by-id", 50), c.consume(tp("ids", 0), 50))
}

// TestLeaderAndIsrForAnotherTopicOfTheSameNameIsRefused: a replica keeps
// the id it was created with; a LeaderAndIsr naming the same topic with
// another id (a topic deleted and created again while this broker kept the
// old log) answers INCONSISTENT_TOPIC_ID and changes nothing.
func TestLeaderAndIsrForAnotherTopicOfTheSameNameIsRefused(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic("reused", 1, 2)
	p := tp("reused", 0)
	b0, _ := c.Broker(0)
	id, ok := b0.Store().TopicID("reused")
	require.True(t, ok)
	rp, _ := b0.Replicas.Partition(p.Topic, p.Partition)
	leader, epoch := rp.Leader()

	req := kmsg.NewPtrLeaderAndISRRequest()
	req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 9, 1, -1
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = 0, 1, 1, epoch+5
	ps.ISR, ps.Replicas = []int32{0, 1}, []int32{0, 1}
	other := store.NewTopicID()
	req.TopicStates = []kmsg.LeaderAndISRRequestTopicState{{Topic: p.Topic, TopicID: other, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Controller.Send(ctx, 0, req)
	require.NoError(t, err)
	results := server.LeaderAndIsrResults(resp.(*kmsg.LeaderAndISRResponse))
	require.Len(t, results, 1)
	require.Equal(t, kerr.InconsistentTopicID.Code, results[0].ErrorCode)
	require.Equal(t, [16]byte(other), resp.(*kmsg.LeaderAndISRResponse).Topics[0].TopicID, "v5+ answers by topic id")

	l, e := rp.Leader()
	require.Equal(t, []int32{leader, epoch}, []int32{l, e}, "the partition is left alone")
	data, err := os.ReadFile(filepath.Join(c.LogDir(0), "reused-0", "partition.metadata"))
	require.NoError(t, err)
	require.Equal(t, "version: 0\ntopic_id: "+id.String(), string(data))
}
