package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestTopicsAreCreatedAndDeletedThroughKadmWithKafkasZnodes: franz-go's
// admin client creates a topic on any broker; the znodes it leaves are
// Kafka's, byte for byte where the content is fixed (the assignment's key
// order and partition order, the config, the state); a bad request gets
// Kafka's error codes; deleting the topic stops and deletes every replica
// (the log directories go) and removes every znode of it. Three broker
// processes on a three-node ZooKeeper ensemble.
func TestTopicsAreCreatedAndDeletedThroughKadmWithKafkasZnodes(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	adm := kadm.NewClient(client(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	created, err := adm.CreateTopics(ctx, 3, 2, map[string]*string{"cleanup.policy": kadm.StringPtr("delete"),
		"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, created["orders"].Err)
	leaders := waitLeaders(t, zk, "orders", 3, func(int32) bool { return true })

	data, _, err := zk.Conn().Get(kafkazk.TopicPath("orders"))
	require.NoError(t, err)
	require.Regexp(t, `^\{"partitions":\{"0":\[\d,\d\],"1":\[\d,\d\],"2":\[\d,\d\]\},"topic_id":"[A-Za-z0-9_-]{22}",`+
		`"adding_replicas":\{\},"removing_replicas":\{\},"version":3\}$`, string(data), "Kafka 2.8's /brokers/topics/<t>")
	a, err := kafkazk.DecodeTopicAssignment("orders", data)
	require.NoError(t, err)
	require.Equal(t, kadm.TopicID(a.ID), created["orders"].ID, "CreateTopics v7 answers the id written into ZooKeeper")
	for p, replicas := range a.Replicas {
		require.Equal(t, replicas[0], leaders[p], "partition %d is led by its preferred replica", p)
	}
	data, _, err = zk.Conn().Get(kafkazk.ConfigTopicPath("orders"))
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"config":{"cleanup.policy":"delete","min.insync.replicas":"2"}}`, string(data))
	data, _, err = zk.Conn().Get(kafkazk.PartitionStatePath(commitlog.TopicPartition{Topic: "orders", Partition: 1}))
	require.NoError(t, err)
	epoch, err := zk.ControllerEpochValue()
	require.NoError(t, err)
	want, _ := json.Marshal(a.Replicas[1])
	require.Equal(t, fmt.Sprintf(`{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":0,"isr":%s}`,
		epoch.Epoch, a.Replicas[1][0], want), string(data))

	// Kafka's error codes for what cannot be created.
	for _, tt := range []struct {
		name        string
		partitions  int32
		replication int16
		configs     map[string]*string
		want        error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"too-many-replicas", 1, 4, nil, kerr.InvalidReplicationFactor},
		{"no-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"bad-config", 1, 1, map[string]*string{"no.such.key": kadm.StringPtr("1")}, kerr.InvalidConfig},
	} {
		res, err := adm.CreateTopics(ctx, tt.partitions, tt.replication, tt.configs, tt.name)
		require.NoError(t, err)
		require.ErrorIs(t, res[tt.name].Err, tt.want, tt.name)
	}
	exists, _, err := zk.Conn().Exists(kafkazk.TopicPath("too-many-replicas"))
	require.NoError(t, err)
	require.False(t, exists, "a refused topic leaves no znode")

	roundTrip(t, c, "orders", 3, "doomed", 5)
	deleted, err := adm.DeleteTopics(ctx, "orders")
	require.NoError(t, err)
	require.NoError(t, deleted["orders"].Err)
	for _, p := range []string{kafkazk.TopicPath("orders"), kafkazk.ConfigTopicPath("orders"), kafkazk.DeleteTopicPath("orders")} {
		p := p
		require.Eventually(t, func() bool {
			exists, _, err := zk.Conn().Exists(p)
			return err == nil && !exists
		}, 30*time.Second, 20*time.Millisecond, "%s is gone", p)
	}
	require.Eventually(t, func() bool {
		for _, id := range []int32{0, 1, 2} {
			matches, _ := filepath.Glob(filepath.Join(c.Broker(id).LogDir(), "orders-*"))
			var live []string
			for _, m := range matches {
				if !regexp.MustCompile(`-delete$`).MatchString(m) {
					live = append(live, m)
				}
			}
			if len(live) > 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every replica's log is deleted")
	topics, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	require.False(t, topics.Has("orders"), "no broker lists it")
	res, err := adm.DeleteTopics(ctx, "orders")
	require.NoError(t, err)
	require.ErrorIs(t, res["orders"].Err, kerr.UnknownTopicOrPartition)

	// DeleteTopics v6 names topics by id: a known one is deleted, an
	// unknown one is UNKNOWN_TOPIC_ID.
	byID, err := adm.CreateTopics(ctx, 1, 1, nil, "by-id")
	require.NoError(t, err)
	require.NoError(t, byID["by-id"].Err)
	waitLeaders(t, zk, "by-id", 1, func(int32) bool { return true })
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 30000
	var random [16]byte
	random[0] = 7
	for _, id := range [][16]byte{byID["by-id"].ID, random} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	require.Eventually(t, func() bool { // every broker's metadata must know the id first
		resp, err := req.RequestWith(ctx, client(t, c))
		if err != nil {
			return false
		}
		codes := map[[16]byte]int16{}
		for _, rt := range resp.Topics {
			codes[rt.TopicID] = rt.ErrorCode
		}
		return codes[byID["by-id"].ID] == 0 && codes[random] == kerr.UnknownTopicID.Code
	}, 30*time.Second, 100*time.Millisecond, "DeleteTopics v6 by id")
	require.Eventually(t, func() bool {
		exists, _, err := zk.Conn().Exists(kafkazk.TopicPath("by-id"))
		return err == nil && !exists
	}, 30*time.Second, 20*time.Millisecond, "the topic named by its id is deleted")
}
