package compat_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
)

// configOf finds key in a described resource.
func configOf(t *testing.T, rc kadm.ResourceConfig, key string) *kadm.Config {
	t.Helper()
	require.NoError(t, rc.Err)
	i := slices.IndexFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == key })
	require.GreaterOrEqual(t, i, 0, "%s has no %s", rc.Name, key)
	return &rc.Configs[i]
}

// testKadm runs every admin call issue 14 names through kadm and checks
// the cluster's state after each.
func testKadm(t *testing.T, c *brokertest.Cluster) {
	adm, cl := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := "kadm"
	createTopic(t, c, topic, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})

	t.Run("DescribeConfigs, IncrementalAlterConfigs, AlterConfigs (topic)", func(t *testing.T) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		require.NoError(t, err)
		require.Len(t, rcs, 1)
		isr := configOf(t, rcs[0], "min.insync.replicas")
		require.Equal(t, "2", isr.MaybeValue())
		require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, isr.Source)
		ret := configOf(t, rcs[0], "retention.ms")
		require.Equal(t, "604800000", ret.MaybeValue())
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, ret.Source)

		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")}}, topic)
		require.NoError(t, err)
		require.NoError(t, resp[0].Err)
		rcs, err = adm.DescribeTopicConfigs(ctx, topic)
		require.NoError(t, err)
		ret = configOf(t, rcs[0], "retention.ms")
		require.Equal(t, "3600000", ret.MaybeValue())
		require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, ret.Source)

		// The legacy AlterConfigs replaces the whole set: retention.ms
		// goes back to its default, min.insync.replicas stays.
		resp, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("2")}}, topic)
		require.NoError(t, err)
		require.NoError(t, resp[0].Err)
		rcs, err = adm.DescribeTopicConfigs(ctx, topic)
		require.NoError(t, err)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, configOf(t, rcs[0], "retention.ms").Source)
		require.Equal(t, "2", configOf(t, rcs[0], "min.insync.replicas").MaybeValue())
	})

	t.Run("DescribeConfigs (broker) shows final's own keys", func(t *testing.T) {
		rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
		require.NoError(t, err)
		require.Len(t, rcs, 1)
		require.Equal(t, "1000", configOf(t, rcs[0], "reserved.broker.max.id").MaybeValue())
		require.Equal(t, "0", configOf(t, rcs[0], "broker.id").MaybeValue())
	})

	t.Run("CreatePartitions", func(t *testing.T) {
		resp, err := adm.UpdatePartitions(ctx, 6, topic)
		require.NoError(t, err)
		require.NoError(t, resp[topic].Err)
		require.Eventually(t, func() bool { return partitionsOf(t, c, topic) == 6 }, 30*time.Second, 100*time.Millisecond)
		var records []*kgo.Record
		for p := range int32(6) {
			records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: []byte("to " + strconv.Itoa(int(p)))})
		}
		produceRecords(t, c, records) // every new partition has a leader that takes acks=all writes
	})

	t.Run("DescribeCluster", func(t *testing.T) {
		resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Zero(t, resp.ErrorCode)
		require.NotEmpty(t, resp.ClusterID)
		require.Len(t, resp.Brokers, 3)
		require.Contains(t, []int32{0, 1, 2}, resp.ControllerID)
	})

	t.Run("DeleteRecords, ListOffsets earliest and max timestamp", func(t *testing.T) {
		dt := "kadm-delete"
		createTopic(t, c, dt, 1, 3, nil)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		var records []*kgo.Record
		for i := range 20 {
			ts := base.Add(time.Duration(i) * time.Second)
			if i == 7 {
				ts = base.Add(time.Minute) // the newest timestamp is not the last record's
			}
			records = append(records, &kgo.Record{Topic: dt, Partition: 0, Value: []byte(strconv.Itoa(i)), Timestamp: ts})
		}
		produceRecords(t, c, records)
		maxTS, err := adm.ListMaxTimestampOffsets(ctx, dt)
		require.NoError(t, err)
		o, _ := maxTS.Lookup(dt, 0)
		require.NoError(t, o.Err)
		require.Equal(t, int64(7), o.Offset, "ListOffsets -3 (KIP-734) finds the record with the largest timestamp")

		del, err := adm.DeleteRecords(ctx, kadm.Offsets{dt: {0: {Topic: dt, Partition: 0, At: 12}}})
		require.NoError(t, err)
		require.NoError(t, del[dt][0].Err)
		require.Equal(t, int64(12), del[dt][0].LowWatermark, "every replica deleted up to 12 before the answer")
		start, err := adm.ListStartOffsets(ctx, dt)
		require.NoError(t, err)
		so, _ := start.Lookup(dt, 0)
		require.Equal(t, int64(12), so.Offset)
		got := consumeKgo(t, c, dt, 8)
		require.Equal(t, []string{"12", "13", "14", "15", "16", "17", "18", "19"}, got)
	})

	t.Run("OffsetDelete", func(t *testing.T) {
		group := "kadm-offset-delete"
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, offs)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
		fetched, err := adm.FetchOffsets(ctx, group)
		require.NoError(t, err)
		o, ok := fetched.Lookup(topic, 0)
		require.True(t, ok)
		require.Equal(t, int64(1), o.At)
		dresp, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
		require.NoError(t, err)
		require.NoError(t, dresp.Error())
		fetched, err = adm.FetchOffsets(ctx, group)
		require.NoError(t, err)
		o, ok = fetched.Lookup(topic, 0)
		require.True(t, !ok || o.At == -1, "the committed offset is gone: %+v", o)
	})

	t.Run("DescribeLogDirs", func(t *testing.T) {
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		require.NoError(t, err)
		require.Len(t, dirs, 3, "every broker answers")
		for broker, ds := range dirs {
			var size int64
			for _, d := range ds {
				require.NoError(t, d.Err)
				for p := range int32(6) {
					if dp, ok := d.Topics.Lookup(topic, p); ok {
						size += dp.Size
					}
				}
			}
			require.Positive(t, size, "broker %d holds replicas of %s with data", broker, topic)
		}
	})

	t.Run("DeleteTopics", func(t *testing.T) {
		resp, err := adm.DeleteTopics(ctx, "kadm-delete")
		require.NoError(t, err)
		require.NoError(t, resp.Error())
		require.Eventually(t, func() bool {
			md, err := adm.Metadata(ctx)
			return err == nil && !slices.Contains(md.Topics.Names(), "kadm-delete")
		}, 30*time.Second, 100*time.Millisecond)
	})
}

// testSaramaAdmin: Sarama's ClusterAdmin, which failed outright on a broker
// without DescribeConfigs (ListTopics describes every topic's config).
func testSaramaAdmin(t *testing.T, c *brokertest.Cluster) {
	topic := "sarama-admin"
	createTopic(t, c, topic, 2, 3, map[string]*string{"retention.ms": kadm.StringPtr("86400000")})
	adm, err := sarama.NewClusterAdmin(c.Addrs(), saramaConfig())
	require.NoError(t, err)
	defer adm.Close()

	topics, err := adm.ListTopics()
	require.NoError(t, err)
	d, ok := topics[topic]
	require.True(t, ok, "ListTopics lists %s", topic)
	require.Equal(t, int32(2), d.NumPartitions)
	require.Equal(t, int16(3), d.ReplicationFactor)
	require.NotNil(t, d.ConfigEntries["retention.ms"])
	require.Equal(t, "86400000", *d.ConfigEntries["retention.ms"])

	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	require.NoError(t, err)
	i := slices.IndexFunc(entries, func(e sarama.ConfigEntry) bool { return e.Name == "retention.ms" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "86400000", entries[i].Value)

	require.NoError(t, adm.CreatePartitions(topic, 4, nil, false))
	require.Eventually(t, func() bool { return partitionsOf(t, c, topic) == 4 }, 30*time.Second, 100*time.Millisecond)
}
