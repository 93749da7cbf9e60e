package server_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// An OffsetCommit for a topic, or a partition, that does not exist
// answers UNKNOWN_TOPIC_OR_PARTITION for it, as Kafka's
// handleOffsetCommitRequest does (the partition must be in the metadata
// cache), and stores nothing for it; the partitions that exist in the
// same request are committed.
func TestOffsetCommitForAnUnknownTopicAnswersUnknownTopicOrPartition(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 1, map[string]string{"offsets.topic.replication.factor": "1"})
	createTopicRF(t, c, "known", 1)
	waitTopicEverywhere(t, c, "known", 1)
	cl := client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = "simple", -1, ""
	for topic, parts := range map[string][]int32{"known": {0, 7}, "nope": {0}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 42
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	var got map[string]map[int32]string
	require.Eventually(t, func() bool { // the coordinator loads its partition first
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		got = map[string]map[int32]string{}
		for _, rt := range resp.Topics {
			got[rt.Topic] = map[int32]string{}
			for _, rp := range rt.Partitions {
				got[rt.Topic][rp.Partition] = codeName(rp.ErrorCode)
			}
		}
		return got["known"][0] != codeName(kerr.CoordinatorLoadInProgress.Code) && got["known"][0] != codeName(kerr.NotCoordinator.Code)
	}, 30*time.Second, 50*time.Millisecond)
	unknown := codeName(kerr.UnknownTopicOrPartition.Code)
	require.Equal(t, map[string]map[int32]string{"known": {0: "NONE", 7: unknown}, "nope": {0: unknown}}, got)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "simple"
	fetched, err := fetch.RequestWith(ctx, cl)
	require.NoError(t, err)
	committed := map[string]map[int32]int64{}
	for _, rt := range fetched.Topics {
		committed[rt.Topic] = map[int32]int64{}
		for _, rp := range rt.Partitions {
			committed[rt.Topic][rp.Partition] = rp.Offset
		}
	}
	require.Equal(t, map[string]map[int32]int64{"known": {0: 42}}, committed, "only the existing partition is stored")
}

func codeName(c int16) string {
	if c == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(c).Error()
}

// The group coordinator's keys come from the broker's properties (final's
// server.properties lists them): group.max.size, and the bound on a
// group's record, message.max.bytes, which __consumer_offsets inherits.
// Kafka's defaults otherwise: Integer.MAX_VALUE members, 1048588 bytes.
func TestGroupCoordinatorConfigComesFromTheBrokersProperties(t *testing.T) {
	props := map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(),
		"zookeeper.connect": "127.0.0.1:2181"}
	cfg, err := server.ParseConfig(props, slog.Default())
	require.NoError(t, err)
	require.Equal(t, 1<<31-1, cfg.Group.MaxSize)
	require.Equal(t, 1048588, cfg.Group.MaxRecordBytes)

	props["group.max.size"], props["message.max.bytes"] = "250", "2000000"
	cfg, err = server.ParseConfig(props, slog.Default())
	require.NoError(t, err)
	require.Equal(t, 250, cfg.Group.MaxSize)
	require.Equal(t, 2000000, cfg.Group.MaxRecordBytes)
}
