package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestEveryBrokerAnswersZooKeepersTopicID: the id the topic was created
// with in /brokers/topics/<t> reaches every broker (UpdateMetadata v7+)
// and every replica's partition.metadata (LeaderAndIsr v5+); Metadata v12
// answers it on every broker and names the topic by it; franz-go, held to
// Fetch v13+ (it refuses to send less), consumes every record produced.
func TestEveryBrokerAnswersZooKeepersTopicID(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	createTopic(t, c, "ids", 3, nil)
	id := zkTopicID(t, observer(t, ens), "ids")
	for _, b := range []int32{0, 1, 2} {
		require.Equal(t, id, metadataTopicID(t, c.Broker(b).Addr(), "ids"), "broker %d", b)
		resp := metadataByTopicID(t, c.Broker(b).Addr(), id, store.NewTopicID())
		require.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[0].ErrorCode, "an id nobody gave (answered first, as Kafka does)")
		require.Equal(t, "ids", *resp.Topics[1].Topic)
		require.Len(t, resp.Topics[1].Partitions, 3)
		for p := range 3 {
			data, err := os.ReadFile(filepath.Join(c.Broker(b).LogDir(), fmt.Sprintf("ids-%d", p), "partition.metadata"))
			require.NoError(t, err)
			require.Equal(t, "version: 0\ntopic_id: "+id.String(), string(data), "broker %d's replica of ids-%d", b, p)
		}
	}

	fetchByID := kversion.V0_8_0() // no minimum for anything else,
	fetchByID.SetMaxKeyVersion(1, 13)
	p := client(t, c, kgo.DefaultProduceTopic("ids"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 300 {
		require.NoError(t, p.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%03d", i))).FirstErr())
	}
	cons := client(t, c, kgo.MinVersions(fetchByID), kgo.ConsumeTopics("ids"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < 300 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of 300", len(seen))
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}

// TestATopicCreatedAgainHasANewIDAndTheOldOneIsRefused: deleting a topic
// and creating one of the same name gives a new id; every broker answers
// the new one, and a fetch naming the old id gets UNKNOWN_TOPIC_ID, never
// the new topic's records.
func TestATopicCreatedAgainHasANewIDAndTheOldOneIsRefused(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	createTopic(t, c, "reborn", 1, nil)
	old := zkTopicID(t, zk, "reborn")
	roundTrip(t, c, "reborn", 1, "first", 5)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(client(t, c))
	deleted, err := adm.DeleteTopics(ctx, "reborn")
	require.NoError(t, err)
	require.NoError(t, deleted["reborn"].Err)
	require.Eventually(t, func() bool {
		exists, _, err := zk.Conn().Exists(kafkazk.TopicPath("reborn"))
		return err == nil && !exists
	}, 30*time.Second, 20*time.Millisecond, "the topic's deletion completes")
	require.Eventually(t, func() bool {
		created, err := adm.CreateTopics(ctx, 1, 3, nil, "reborn")
		return err == nil && created["reborn"].Err == nil
	}, 30*time.Second, 50*time.Millisecond, "the name can be used again")
	waitTopicEverywhere(t, c, "reborn", 1)
	id := zkTopicID(t, zk, "reborn")
	require.NotEqual(t, old, id)
	roundTrip(t, c, "reborn", 1, "second", 5)

	leader := waitLeaders(t, zk, "reborn", 1, func(int32) bool { return true })[0]
	for _, b := range []int32{0, 1, 2} {
		require.Eventually(t, func() bool { return metadataTopicID(t, c.Broker(b).Addr(), "reborn") == id },
			10*time.Second, 20*time.Millisecond, "broker %d answers the new id", b)
	}
	addr := c.Broker(leader).Addr()
	require.Equal(t, kerr.UnknownTopicID.Code, fetchPartitionByID(t, addr, old).ErrorCode, "the old id is refused")
	require.Equal(t, kerr.UnknownTopicID.Code, fetchPartitionByID(t, addr, store.NewTopicID()).ErrorCode, "so is a random one")
	p := fetchPartitionByID(t, addr, id)
	require.Zero(t, p.ErrorCode)
	require.NotEmpty(t, p.RecordBatches)
	require.Equal(t, kerr.UnknownTopicID.Code, metadataByTopicID(t, addr, old).Topics[0].ErrorCode)
}

// zkTopicID is a topic's id in /brokers/topics/<t>.
func zkTopicID(t *testing.T, zk *kafkazk.Client, topic string) store.TopicID {
	t.Helper()
	a, err := zk.TopicAssignments(topic)
	require.NoError(t, err)
	require.Contains(t, a, topic)
	require.NotEqual(t, kafkazk.TopicID{}, a[topic].ID)
	return store.TopicID(a[topic].ID)
}

// dialBroker connects to one broker, negotiating the highest versions.
func dialBroker(t *testing.T, addr string) *protocol.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := protocol.Dial(ctx, addr, "topic-ids-test")
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// metadataTopicID asks one broker for a topic by name (Metadata v12) and
// returns the id it answers.
func metadataTopicID(t *testing.T, addr, topic string) store.TopicID {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
	resp, err := dialBroker(t, addr).Request(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, int16(12), req.GetVersion())
	m := resp.(*kmsg.MetadataResponse)
	require.Len(t, m.Topics, 1)
	require.Zero(t, m.Topics[0].ErrorCode)
	return m.Topics[0].TopicID
}

// metadataByTopicID asks one broker for topics by id (Metadata v12).
func metadataByTopicID(t *testing.T, addr string, ids ...store.TopicID) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, id := range ids {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{TopicID: id})
	}
	resp, err := dialBroker(t, addr).Request(context.Background(), req)
	require.NoError(t, err)
	m := resp.(*kmsg.MetadataResponse)
	require.Len(t, m.Topics, len(ids))
	return m
}

// fetchPartitionByID fetches partition 0 of the topic with id from offset 0
// at the broker's highest Fetch version (v17: topics by id).
func fetchPartitionByID(t *testing.T, addr string, id store.TopicID) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := dialBroker(t, addr).Request(context.Background(), req)
	require.NoError(t, err)
	require.GreaterOrEqual(t, req.GetVersion(), int16(13))
	f := resp.(*kmsg.FetchResponse)
	require.Len(t, f.Topics, 1)
	require.Equal(t, [16]byte(id), f.Topics[0].TopicID)
	require.Len(t, f.Topics[0].Partitions, 1)
	return f.Topics[0].Partitions[0]
}
