package broker

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsAdvertisesExactlyTheAPITable, with Produce from v0 (see
// ProduceAPI: what librdkafka needs to compress).
func TestApiVersionsAdvertisesExactlyTheAPITable(t *testing.T) {
	tb := startBroker(t)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	var got []kmsg.ApiVersionsResponseApiKey
	for _, k := range resp.ApiKeys {
		got = append(got, kmsg.ApiVersionsResponseApiKey{ApiKey: k.ApiKey, MinVersion: k.MinVersion, MaxVersion: k.MaxVersion})
	}
	require.Equal(t, []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 0, MaxVersion: 9},  // Produce: v0-v2 advertised, refused
		{ApiKey: 1, MinVersion: 4, MaxVersion: 17}, // Fetch: v13+ by topic id
		{ApiKey: 2, MinVersion: 1, MaxVersion: 9},  // ListOffsets
		{ApiKey: 3, MinVersion: 1, MaxVersion: 12}, // Metadata: v10+ with topic ids
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, // ApiVersions
		{ApiKey: 19, MinVersion: 0, MaxVersion: 5}, // CreateTopics
		{ApiKey: 20, MinVersion: 0, MaxVersion: 5}, // DeleteTopics
	}, got)
}

func TestProduceV2IsAdvertisedButRefused(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("old", 1)
	c := tb.dial()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(2)
	req.Acks = 1
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "old", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte("a magic 1 message set")}}}}
	c.send(req, 1)
	require.True(t, c.closedByBroker(), "v0-v2 carry old message formats: the connection closes")
}

func TestUnsupportedApiVersionsVersionGetsV0ErrorWithTheList(t *testing.T) {
	tb := startBroker(t)
	c := tb.dial()
	// v5 (a client's cluster and node ids) is newer than Kafka 3.9; a
	// newer client sends it first.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 9)
	binary.BigEndian.PutUint16(frame[6:], 5) // api_version field
	c.write(frame)

	id, body := c.receive()
	require.Equal(t, int32(9), id)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	require.NoError(t, resp.ReadFrom(body), "a v0 response, which any client can read")
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
	require.Contains(t, resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
		"the list says which ApiVersions to retry with")

	// The connection stays open for the client's retry at a lower version.
	req.SetVersion(2)
	c.send(req, 10)
	id, _ = c.receive()
	require.Equal(t, int32(10), id)
}

// TestApiVersionsV4IsServed: the version Kafka 3.9's clients send first,
// flexible, answered with response header v0 (no tagged fields after the
// correlation id) and the same list as v3.
func TestApiVersionsV4IsServed(t *testing.T) {
	tb := startBroker(t)
	c := tb.dial()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "workbook-test", "1.0"
	c.send(req, 7)
	id, body := c.receive()
	require.Equal(t, int32(7), id)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(4)
	require.NoError(t, resp.ReadFrom(body), "header v0, then a v4 body")
	require.Zero(t, resp.ErrorCode)
	require.Contains(t, resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: 18, MinVersion: 0, MaxVersion: 4})
	require.Len(t, resp.ApiKeys, len(tb.APIs()))
}

func TestOnePipelinedConnectionGetsResponsesInOrder(t *testing.T) {
	tb := startBroker(t)
	c := tb.dial()
	const n = 1000
	var batch []byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipeliner"))
	for i := range n {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(int16(1 + i%9)) // every Metadata version, flexible or not
		req.Topics = []kmsg.MetadataRequestTopic{}
		// AppendRequest writes the size at the start of its dst: frame
		// each request on its own, then concatenate.
		batch = append(batch, f.AppendRequest(nil, req, int32(1000+i))...)
	}
	c.write(batch) // all at once, without waiting for any answer
	for i := range n {
		id, body := c.receive()
		require.Equal(t, int32(1000+i), id, "response %d", i)
		v := int16(1 + i%9)
		if v >= 9 {
			body = body[1:] // response header v1: tags
		}
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(v)
		require.NoError(t, resp.ReadFrom(body))
		require.Len(t, resp.Brokers, 1)
	}
}

func TestAThousandConcurrentConnectionsAreAllServed(t *testing.T) {
	tb := startBroker(t)
	conns := make([]*rawConn, 1000)
	for i := range conns {
		conns[i] = tb.dial()
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.send(kmsg.NewPtrApiVersionsRequest(), int32(i))
		}()
	}
	wg.Wait()
	for i, c := range conns {
		id, _ := c.receive()
		require.Equal(t, int32(i), id)
	}
}
