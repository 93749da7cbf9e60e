package server

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// ask sends req to addr on a connection of its own and returns the answer.
func ask(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := protocol.Dial(context.Background(), addr, "listeners-test")
	require.NoError(t, err)
	defer cl.Close()
	resp, err := cl.Request(context.Background(), req)
	require.NoError(t, err)
	return resp
}

type addrOf struct {
	ID   int32
	Host string
	Port int32
}

func brokersOf(resp *kmsg.MetadataResponse) []addrOf {
	var out []addrOf
	for _, b := range resp.Brokers {
		out = append(out, addrOf{b.NodeID, b.Host, b.Port})
	}
	slices.SortFunc(out, func(a, b addrOf) int { return int(a.ID - b.ID) })
	return out
}

// Metadata lists every broker at its address on the listener the request
// came in on, as UpdateMetadata told it; a broker without that listener is
// left out, and a partition it leads answers LISTENER_NOT_FOUND there.
func TestMetadataAnswersEachListenerWithItsEndpoints(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"broker.id": "1", "log.dirs": t.TempDir(),
		"listeners":                      "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	s, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	plain, external := s.ListenerAddr("PLAINTEXT").String(), s.ListenerAddr("EXTERNAL").String()
	self, ok := s.AdvertisedListener("EXTERNAL")
	require.True(t, ok)

	// Before any UpdateMetadata, a broker knows itself, on each listener.
	resp := ask(t, external, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	require.Equal(t, []addrOf{{1, "127.0.0.1", self.AdvertisedPort}}, brokersOf(resp))

	endpoints := func(id int32, names ...string) []kmsg.UpdateMetadataRequestLiveBrokerEndpoint {
		var out []kmsg.UpdateMetadataRequestLiveBrokerEndpoint
		for i, n := range names {
			out = append(out, kmsg.UpdateMetadataRequestLiveBrokerEndpoint{Host: n + ".example", Port: 9000 + 10*id + int32(i), ListenerName: n})
		}
		return out
	}
	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 6, 1, 1, -1
	um.LiveBrokers = []kmsg.UpdateMetadataRequestLiveBroker{
		{ID: 1, Endpoints: endpoints(1, "PLAINTEXT", "EXTERNAL")},
		{ID: 2, Endpoints: endpoints(2, "PLAINTEXT", "EXTERNAL")},
		{ID: 3, Endpoints: endpoints(3, "PLAINTEXT")}, // no EXTERNAL listener
	}
	um.TopicStates = []kmsg.UpdateMetadataRequestTopicState{{Topic: "orders", PartitionStates: []kmsg.UpdateMetadataRequestTopicPartition{
		{Partition: 0, Leader: 2, Replicas: []int32{2, 3}, ISR: []int32{2, 3}},
		{Partition: 1, Leader: 3, Replicas: []int32{3, 2}, ISR: []int32{3, 2}},
	}}}
	require.Zero(t, ask(t, plain, um).(*kmsg.UpdateMetadataResponse).ErrorCode)

	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	resp = ask(t, external, req).(*kmsg.MetadataResponse)
	require.Equal(t, []addrOf{{1, "EXTERNAL.example", 9011}, {2, "EXTERNAL.example", 9021}}, brokersOf(resp))
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.ListenerNotFound.Code, resp.Topics[0].Partitions[1].ErrorCode, "its leader has no EXTERNAL listener")

	resp = ask(t, plain, req).(*kmsg.MetadataResponse)
	require.Equal(t, []addrOf{{1, "PLAINTEXT.example", 9010}, {2, "PLAINTEXT.example", 9020}, {3, "PLAINTEXT.example", 9030}}, brokersOf(resp))
	require.Zero(t, resp.Topics[0].Partitions[1].ErrorCode)
}

// UpdateMetadata v0 has one PLAINTEXT address per broker; v1 and v2 name
// endpoints by their security protocol only (the listener of that name).
func TestOldUpdateMetadataEndpointsNameTheirListener(t *testing.T) {
	v0 := endpointFromUpdate(kmsg.UpdateMetadataRequestLiveBroker{ID: 4, Host: "b4", Port: 9092})
	host, port, ok := v0.ForListener("PLAINTEXT")
	require.True(t, ok)
	require.Equal(t, "b4", host)
	require.Equal(t, int32(9092), port)

	v1 := endpointFromUpdate(kmsg.UpdateMetadataRequestLiveBroker{ID: 5, Endpoints: []kmsg.UpdateMetadataRequestLiveBrokerEndpoint{
		{Host: "b5", Port: 9092, SecurityProtocol: 0}, {Host: "b5", Port: 9093, SecurityProtocol: 1}}})
	require.Equal(t, []ListenerEndpoint{{"PLAINTEXT", "PLAINTEXT", "b5", 9092}, {"SSL", "SSL", "b5", 9093}}, v1.Listeners)
	require.Len(t, v1.UpdateMetadataEndpoints(), 2)
	require.Equal(t, int16(1), v1.UpdateMetadataEndpoints()[1].SecurityProtocol)
}

// Brokers reach each other in plaintext: an inter-broker listener with TLS
// or SASL is refused at start-up, naming the key.
func TestInterBrokerListenerMustBePlaintext(t *testing.T) {
	_, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
		"inter.broker.listener.name": "SSL"}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, `invalid value "SSL" for configuration inter.broker.listener.name: the inter-broker listener uses SSL`)
	_, err = ParseConfig(map[string]string{"listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
		"listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT", "inter.broker.listener.name": "INTERNAL"},
		slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "the inter-broker listener uses SASL_PLAINTEXT")
}
