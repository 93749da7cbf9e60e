package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createTopicsRequest(name string, partitions int32, rf int16, configs map[string]string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func TestCreateTopicsErrors(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("exists", 1)
	cl := tb.client()
	tests := []struct {
		name string
		req  *kmsg.CreateTopicsRequest
		code int16
	}{
		{"replication factor 3 on one broker", createTopicsRequest("rf3", 1, 3, nil), kerr.InvalidReplicationFactor.Code},
		{"invalid name", createTopicsRequest("bad/name", 1, 1, nil), kerr.InvalidTopicException.Code},
		{"too long", createTopicsRequest(strings.Repeat("x", 250), 1, 1, nil), kerr.InvalidTopicException.Code},
		{"exists", createTopicsRequest("exists", 1, 1, nil), kerr.TopicAlreadyExists.Code},
		{"zero partitions", createTopicsRequest("zero", 0, 1, nil), kerr.InvalidPartitions.Code},
		{"unknown config", createTopicsRequest("cfg", 1, 1, map[string]string{"segment.bytez": "1"}), kerr.InvalidConfig.Code},
		{"bad config value", createTopicsRequest("cfg", 1, 1, map[string]string{"segment.bytes": "lots"}), kerr.InvalidConfig.Code},
		{"defaults (-1, -1)", createTopicsRequest("defaults", -1, -1, nil), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := tt.req.RequestWith(context.Background(), cl)
			require.NoError(t, err)
			require.Equal(t, tt.code, resp.Topics[0].ErrorCode, "%v", resp.Topics[0].ErrorMessage)
		})
	}
	require.Empty(t, tb.Store().TopicPartitions("cfg"), "a refused topic is not created")
}

func TestTopicConfigsApplyAndSurviveRestart(t *testing.T) {
	tb := startBroker(t)
	resp, err := createTopicsRequest("small-segments", 1, 1, map[string]string{"segment.bytes": "1024"}).RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	p, _ := tb.Store().Partition("small-segments", 0)
	require.Equal(t, int64(1024), p.Log.Config().SegmentBytes)

	tb.restart()
	p, _ = tb.Store().Partition("small-segments", 0)
	require.Equal(t, int64(1024), p.Log.Config().SegmentBytes)
}

func TestValidateOnlyCreatesNothing(t *testing.T) {
	tb := startBroker(t)
	req := createTopicsRequest("dry-run", 3, 1, nil)
	req.ValidateOnly = true
	resp, err := req.RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, int32(3), resp.Topics[0].NumPartitions)
	require.Empty(t, tb.Store().TopicPartitions("dry-run"))
}

func TestDeleteTopics(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("doomed", 2)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"doomed", "never-was"}
	resp, err := req.RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
	require.Empty(t, tb.Store().TopicPartitions("doomed"))
	tb.restart()
	require.Empty(t, tb.Store().TopicPartitions("doomed"), "gone after a restart too")
}

func TestMetadataAutoCreatesTopicsWhenAllowed(t *testing.T) {
	tb := startBroker(t, "num.partitions", "4")
	metadata := func(topic string, allow bool) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = allow
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(topic)}}
		resp, err := req.RequestWith(context.Background(), tb.client())
		require.NoError(t, err)
		return resp.Topics[0]
	}
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, metadata("not-asked", false).ErrorCode)
	got := metadata("auto", true)
	require.Zero(t, got.ErrorCode)
	require.Len(t, got.Partitions, 4, "num.partitions")
	require.Equal(t, []int32{0}, got.Partitions[0].ISR)
	require.Equal(t, kerr.InvalidTopicException.Code, metadata("bad name!", true).ErrorCode)

	off := startBroker(t, "auto.create.topics.enable", "false")
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("x")}}
	resp, err := req.RequestWith(context.Background(), off.client())
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].ErrorCode)
}
