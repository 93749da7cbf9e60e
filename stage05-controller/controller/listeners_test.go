package controller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// The controller reaches a broker, and tells followers to reach their
// leader, on the inter-broker listener's endpoint; without one of that
// name, on the PLAINTEXT endpoint, then the first.
func TestInterBrokerEndpointIsTheInterBrokerListeners(t *testing.T) {
	eps := []kafkazk.Endpoint{
		{Listener: "EXTERNAL", SecurityProtocol: "SSL", Host: "public.example", Port: 9093},
		{Listener: "CLIENTS", SecurityProtocol: "PLAINTEXT", Host: "public.example", Port: 9092},
		{Listener: "INTERNAL", SecurityProtocol: "PLAINTEXT", Host: "10.0.0.5", Port: 9094},
	}
	addr, ok := InterBrokerAddr(eps, "INTERNAL")
	require.True(t, ok)
	require.Equal(t, "10.0.0.5:9094", addr)
	addr, _ = InterBrokerAddr(eps, "")
	require.Equal(t, "public.example:9092", addr, "the first PLAINTEXT endpoint")
	addr, _ = InterBrokerAddr(eps[:1], "INTERNAL")
	require.Equal(t, "public.example:9093", addr, "the first endpoint")
	_, ok = InterBrokerAddr(nil, "INTERNAL")
	require.False(t, ok)

	c := New(nil, 0, Options{InterBrokerListener: "INTERNAL"})
	require.Equal(t, "10.0.0.5:9094", c.addr(kafkazk.RegisteredBroker{BrokerInfo: kafkazk.BrokerInfo{Endpoints: eps}}))
}
