package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestDescribeConfigsOfAHundredThousandResourcesIsAnsweredAtOnce: one
// DescribeConfigs request naming 100,000 resources, nearly all topics
// that do not exist, is answered within 20 s, every resource in the
// order asked with its own code: the topic that exists with its configs
// (its own segment.bytes among them), the unknown ones
// UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION, a
// repeat of the existing topic INVALID_REQUEST (described once: repeats
// would make a response of gigabytes from a request of megabytes), and
// the broker with its configs. Each topic was looked up in ZooKeeper on
// its own before: 10,000 took 5 s, and this request went past a minute.
// The 20 s is a bound for failure, not a figure anything relies on: the
// request takes about a second here.
func TestDescribeConfigsOfAHundredThousandResourcesIsAnsweredAtOnce(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 1, nil)
	createTopicRF(t, c, "described", 1)
	alterReq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "described"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "segment.bytes", Value: kmsg.StringPtr("1048576")}}
	alterReq.Resources = append(alterReq.Resources, ar)
	alterResp, err := alterReq.RequestWith(context.Background(), client(t, c))
	require.NoError(t, err)
	require.Zero(t, alterResp.Resources[0].ErrorCode)

	const n = 100_000
	req := kmsg.NewPtrDescribeConfigsRequest()
	topic := func(name string) kmsg.DescribeConfigsRequestResource {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, name
		return r
	}
	req.Resources = append(req.Resources, topic("described"), topic("bad/name"), topic("described"))
	brokerRes := kmsg.NewDescribeConfigsRequestResource()
	brokerRes.ResourceType, brokerRes.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	req.Resources = append(req.Resources, brokerRes)
	for i := len(req.Resources); i < n; i++ {
		req.Resources = append(req.Resources, topic(fmt.Sprintf("missing-%d", i)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pc, err := protocol.Dial(ctx, c.Broker(0).Addr(), "describe-many")
	require.NoError(t, err)
	defer pc.Close()
	start := time.Now()
	raw, err := pc.Request(ctx, req)
	require.NoError(t, err, "no answer within 20 s")
	t.Logf("100,000 resources described in %v", time.Since(start))
	resp := raw.(*kmsg.DescribeConfigsResponse)

	require.Len(t, resp.Resources, n)
	for i, res := range resp.Resources {
		require.Equal(t, req.Resources[i].ResourceName, res.ResourceName, "answered in the order asked")
	}
	described := resp.Resources[0]
	require.Zero(t, described.ErrorCode)
	var segmentBytes string
	for _, cfg := range described.Configs {
		if cfg.Name == "segment.bytes" {
			segmentBytes = *cfg.Value
		}
	}
	require.Equal(t, "1048576", segmentBytes)
	require.Equal(t, kerr.InvalidTopicException.Code, resp.Resources[1].ErrorCode)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Resources[2].ErrorCode, "the repeat")
	require.Empty(t, resp.Resources[2].Configs)
	require.Zero(t, resp.Resources[3].ErrorCode, "the broker")
	require.NotEmpty(t, resp.Resources[3].Configs)
	for _, res := range resp.Resources[4:] {
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, res.ErrorCode, res.ResourceName)
	}
}
