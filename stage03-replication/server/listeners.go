package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// ListenerEndpoint is one listener of a broker as UpdateMetadata carries
// it: Kafka's UpdateMetadataEndpoint.
type ListenerEndpoint struct {
	Name             string // the listener's name, PLAINTEXT by default
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	Host             string
	Port             int32
}

// ForListener is the broker's address on listener name. A broker reached
// on a listener is told every broker's address on that listener, as
// Kafka's MetadataCache.getAliveBrokerNodes(listenerName) does; a broker
// without that listener has none (ok false). An endpoint built without
// listeners (Listeners empty) has its one address for every listener.
func (e BrokerEndpoint) ForListener(name string) (host string, port int32, ok bool) {
	if len(e.Listeners) == 0 || name == "" { // name "": a request built by hand
		return e.Host, e.Port, true
	}
	for _, l := range e.Listeners {
		if l.Name == name {
			return l.Host, l.Port, true
		}
	}
	return "", 0, false
}

// endpointFromUpdate reads a live broker of an UpdateMetadata request: v0
// has one PLAINTEXT address, v1-v2 endpoints named after their security
// protocol, v3 and later endpoints with their listener's name.
func endpointFromUpdate(b kmsg.UpdateMetadataRequestLiveBroker) BrokerEndpoint {
	e := BrokerEndpoint{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack}
	if len(b.Endpoints) == 0 { // v0
		e.Listeners = []ListenerEndpoint{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
		return e
	}
	e.Host, e.Port = b.Endpoints[0].Host, b.Endpoints[0].Port
	for _, ep := range b.Endpoints {
		protocol := securityProtocolName(ep.SecurityProtocol)
		name := ep.ListenerName
		if name == "" { // v1-v2: Kafka's ListenerName.forSecurityProtocol
			name = protocol
		}
		e.Listeners = append(e.Listeners, ListenerEndpoint{Name: name, SecurityProtocol: protocol, Host: ep.Host, Port: ep.Port})
	}
	return e
}

// UpdateMetadataEndpoints are a broker's listeners as an UpdateMetadata
// request (v3+) lists them: what a controller sends.
func (e BrokerEndpoint) UpdateMetadataEndpoints() []kmsg.UpdateMetadataRequestLiveBrokerEndpoint {
	var out []kmsg.UpdateMetadataRequestLiveBrokerEndpoint
	for _, l := range e.Listeners {
		out = append(out, kmsg.UpdateMetadataRequestLiveBrokerEndpoint{Host: l.Host, Port: l.Port, ListenerName: l.Name,
			SecurityProtocol: SecurityProtocolID(l.SecurityProtocol)})
	}
	return out
}

// SecurityProtocolID is a security protocol's id on the wire
// (UpdateMetadata's security_protocol): PLAINTEXT 0, SSL 1,
// SASL_PLAINTEXT 2, SASL_SSL 3.
func SecurityProtocolID(name string) int16 {
	for i, p := range broker.SecurityProtocols {
		if p == name {
			return int16(i)
		}
	}
	return 0
}

func securityProtocolName(id int16) string {
	if id >= 0 && int(id) < len(broker.SecurityProtocols) {
		return broker.SecurityProtocols[id]
	}
	return fmt.Sprintf("UNKNOWN(%d)", id)
}

// listenerEndpoints are this broker's listeners with their advertised
// addresses.
func listenerEndpoints(c broker.Config) []ListenerEndpoint {
	var out []ListenerEndpoint
	for _, l := range c.Listeners {
		out = append(out, ListenerEndpoint{Name: l.Name, SecurityProtocol: l.SecurityProtocol, Host: l.AdvertisedHost, Port: l.AdvertisedPort})
	}
	return out
}

// BrokerFor is a live broker's address on listener name.
func (c *MetadataCache) BrokerFor(id int32, listener string) (host string, port int32, ok bool) {
	b, ok := c.Broker(id)
	if !ok {
		return "", 0, false
	}
	return b.ForListener(listener)
}

// metadataBrokers are the brokers a Metadata request on listener lists:
// those with an endpoint on it, at that endpoint.
func (s *Server) metadataBrokers(listener string) []kmsg.MetadataResponseBroker {
	brokers := s.Metadata.Brokers()
	if len(brokers) == 0 {
		// Before the first UpdateMetadata a broker knows only itself.
		brokers = []BrokerEndpoint{s.Endpoint()}
	}
	var out []kmsg.MetadataResponseBroker
	for _, b := range brokers {
		if host, port, ok := b.ForListener(listener); ok {
			out = append(out, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: host, Port: port, Rack: b.Rack})
		}
	}
	return out
}

// leaderOffListener is the error of a partition whose leader is alive but
// has no endpoint on the request's listener (the brokers' listeners
// differ): Kafka answers LISTENER_NOT_FOUND from Metadata v6 on, and
// LEADER_NOT_AVAILABLE before; 0 when the leader is reachable there.
func (s *Server) leaderOffListener(leader int32, listener string, version int16) int16 {
	if leader < 0 {
		return 0
	}
	b, alive := s.Metadata.Broker(leader)
	if !alive {
		return 0
	}
	if _, _, ok := b.ForListener(listener); ok {
		return 0
	}
	if version >= 6 {
		return kerr.ListenerNotFound.Code
	}
	return kerr.LeaderNotAvailable.Code
}

// checkInterBrokerListener refuses an inter-broker listener that needs
// TLS or SASL: replica fetchers and the controller dial other brokers
// with protocol.Dial, in plaintext, and there is no seam to dial them
// otherwise (a broker whose inter-broker listener is SSL would fetch from
// nobody). Kafka can; the workbook says so at start-up.
func checkInterBrokerListener(c broker.Config) error {
	for _, l := range c.Listeners {
		if l.Name == c.InterBrokerListener && l.SecurityProtocol != "PLAINTEXT" {
			return &commitlog.ConfigError{Key: broker.KeyInterBrokerListenerName, Value: l.Name,
				Reason: fmt.Sprintf("the inter-broker listener uses %s; brokers reach each other in plaintext only (replica fetchers and the controller dial without TLS or SASL): name a PLAINTEXT listener",
					l.SecurityProtocol)}
		}
	}
	return nil
}
