package server_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// createTopicsRaw sends one CreateTopics request naming topics (name,
// partitions), one replica each, and returns the answer in order.
func createTopicsRaw(t *testing.T, c *brokertest.Cluster, validateOnly bool, topics ...struct {
	name       string
	partitions int32
}) []kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis, req.ValidateOnly = 30_000, validateOnly
	for _, tt := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tt.name, tt.partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client(t, c))
	require.NoError(t, err)
	require.Len(t, resp.Topics, len(topics))
	return resp.Topics
}

// topic is one entry of createTopicsRaw.
func topic(name string, partitions int32) struct {
	name       string
	partitions int32
} {
	return struct {
		name       string
		partitions int32
	}{name, partitions}
}

// requireNoTopic requires that no znode of topic exists.
func requireNoTopic(t *testing.T, zk *kafkazk.Client, name string) {
	t.Helper()
	exists, err := zk.TopicExists(name)
	require.NoError(t, err)
	require.False(t, exists, "topic %s was not created", name)
}

// TestTopicRequestsKafkaRefusesChangeNothing: what Kafka refuses in
// DeleteTopics, CreateTopics and CreatePartitions is refused here with
// Kafka's codes, and leaves ZooKeeper as it was. One broker on one
// ZooKeeper server.
func TestTopicRequestsKafkaRefusesChangeNothing(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 1, map[string]string{"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "3"})
	zk := observer(t, ens)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	t.Run("DeleteTopics refuses the internal topics and keeps them", func(t *testing.T) {
		// The first FindCoordinator creates __consumer_offsets; a client
		// may create __transaction_state itself.
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		require.Eventually(t, func() bool {
			resp, err := fc.RequestWith(ctx, client(t, c))
			return err == nil && resp.ErrorCode == 0
		}, 60*time.Second, 100*time.Millisecond, "the offsets topic is created and led")
		require.Zero(t, createTopicsRaw(t, c, false, topic("__transaction_state", 1))[0].ErrorCode)
		waitTopicEverywhere(t, c, "__transaction_state", 1)

		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 5_000
		for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		byID := kmsg.NewDeleteTopicsRequestTopic()
		byID.TopicID = [16]byte(zkTopicID(t, zk, "__consumer_offsets"))
		req.Topics = append(req.Topics, byID)
		resp, err := req.RequestWith(ctx, client(t, c))
		require.NoError(t, err)
		require.Len(t, resp.Topics, 3)
		for _, rt := range resp.Topics {
			require.Equal(t, kerr.InvalidTopicException.Code, rt.ErrorCode, "%v", rt.Topic)
			require.NotNil(t, rt.ErrorMessage)
			require.Contains(t, *rt.ErrorMessage, "internal topic")
		}
		for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
			queued, err := zk.TopicQueuedForDeletion(name)
			require.NoError(t, err)
			require.False(t, queued, "%s is not marked for deletion", name)
			exists, err := zk.TopicExists(name)
			require.NoError(t, err)
			require.True(t, exists)
		}
	})

	t.Run("CreateTopics naming a topic twice creates neither", func(t *testing.T) {
		got := createTopicsRaw(t, c, false, topic("twice", 1), topic("once", 1), topic("twice", 2))
		for _, i := range []int{0, 2} {
			require.Equal(t, "twice", got[i].Topic)
			require.Equal(t, kerr.InvalidRequest.Code, got[i].ErrorCode, "entry %d", i)
			require.Contains(t, *got[i].ErrorMessage, "2 times")
			require.Equal(t, int32(-1), got[i].NumPartitions, "a refused topic answers -1, as Kafka's")
		}
		require.Zero(t, got[1].ErrorCode, "the other topic is created")
		requireNoTopic(t, zk, "twice")
		exists, err := zk.TopicExists("once")
		require.NoError(t, err)
		require.True(t, exists)
	})

	t.Run("CreatePartitions with a count below one creates and changes nothing", func(t *testing.T) {
		require.Zero(t, createTopicsRaw(t, c, false, topic("two", 2))[0].ErrorCode)
		before, err := zk.TopicAssignments("two")
		require.NoError(t, err)
		for v := range int16(4) {
			for _, count := range []int32{-1, 0} {
				req := kmsg.NewPtrCreatePartitionsRequest()
				req.TimeoutMillis = 5_000
				for _, name := range []string{"two", "absent"} {
					rt := kmsg.NewCreatePartitionsRequestTopic()
					rt.Topic, rt.Count = name, count
					req.Topics = append(req.Topics, rt)
				}
				versions := kversion.Stable()
				versions.SetMaxKeyVersion(req.Key(), v)
				resp, err := req.RequestWith(ctx, client(t, c, kgo.MaxVersions(versions)))
				require.NoError(t, err)
				require.Equal(t, v, resp.GetVersion())
				codes := map[string]int16{}
				for _, rt := range resp.Topics {
					codes[rt.Topic] = rt.ErrorCode
				}
				require.Equal(t, map[string]int16{"two": kerr.InvalidPartitions.Code, "absent": kerr.UnknownTopicOrPartition.Code}, codes,
					"v%d, count %d", v, count)
			}
		}
		requireNoTopic(t, zk, "absent")
		after, err := zk.TopicAssignments("two")
		require.NoError(t, err)
		require.Equal(t, before["two"].ZkVersion, after["two"].ZkVersion, "the assignment was not rewritten")
		require.Len(t, after["two"].Replicas, 2)
	})

	t.Run("a topic larger than ZooKeeper takes is refused and the broker keeps its session", func(t *testing.T) {
		_, stat, err := zk.Conn().Exists(kafkazk.BrokerPath(0))
		require.NoError(t, err)
		session := stat.EphemeralOwner
		for _, validateOnly := range []bool{true, false} {
			got := createTopicsRaw(t, c, validateOnly, topic("huge", 100_000))[0]
			require.Equal(t, kerr.InvalidPartitions.Code, got.ErrorCode, "validate_only %v", validateOnly)
			require.Contains(t, *got.ErrorMessage, "jute.maxbuffer", "the message names the limit")
		}
		got := createTopicsRaw(t, c, false, topic("absurd", math.MaxInt32))[0]
		require.Equal(t, kerr.InvalidPartitions.Code, got.ErrorCode, "refused before two billion partitions are assigned")
		grown := createPartitions(t, c, "two", 100_000, nil)
		require.Equal(t, kerr.InvalidPartitions.Code, grown.ErrorCode)
		require.Contains(t, *grown.ErrorMessage, "jute.maxbuffer")
		requireNoTopic(t, zk, "huge")

		// The broker serves on, on the same ZooKeeper session.
		require.Zero(t, createTopicsRaw(t, c, false, topic("after", 1))[0].ErrorCode)
		waitTopicEverywhere(t, c, "after", 1)
		_, stat, err = zk.Conn().Exists(kafkazk.BrokerPath(0))
		require.NoError(t, err)
		require.Equal(t, session, stat.EphemeralOwner)
		require.NotContains(t, c.Broker(0).Log(), "StateDisconnected", "the broker's connection to ZooKeeper never dropped")
	})
}
