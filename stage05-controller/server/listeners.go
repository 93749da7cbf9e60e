package server

import (
	"strings"

	s3 "github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// registeredEndpoints are the endpoints a broker registers in ZooKeeper:
// every advertised listener with its security protocol, in the order of
// listeners, as Kafka writes "endpoints" and
// "listener_security_protocol_map". The controller passes them all to
// every broker in UpdateMetadata, so that each answers Metadata with the
// addresses of the listener a client asked on, and reaches brokers itself
// on the inter-broker listener's.
func registeredEndpoints(e s3.BrokerEndpoint) []kafkazk.Endpoint {
	out := make([]kafkazk.Endpoint, 0, len(e.Listeners))
	for _, l := range e.Listeners {
		out = append(out, kafkazk.Endpoint{Listener: l.Name, SecurityProtocol: l.SecurityProtocol, Host: l.Host, Port: int(l.Port)})
	}
	if len(out) == 0 { // a broker built from a hand-made Config
		out = append(out, kafkazk.Endpoint{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: e.Host, Port: int(e.Port)})
	}
	return out
}

// endpointList is endpoints as Kafka writes them, LISTENER://host:port,
// comma-separated.
func endpointList(endpoints []kafkazk.Endpoint) string {
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.String()
	}
	return strings.Join(out, ",")
}
