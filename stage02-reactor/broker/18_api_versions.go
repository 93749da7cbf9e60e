package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ApiVersions (key 18), v0-v4. The client's first request: the broker
// answers with every API it serves and the version range of each, taken
// from the broker's API table, so it advertises exactly what is registered,
// with one deliberate exception: Produce is advertised from v0 (see
// ProduceAPI).
// A version the broker does not know gets the same list in a v0 response
// with UNSUPPORTED_VERSION (see Broker.Handle).
//
// v3 (KIP-511) is flexible and carries the client's software name; its
// response header stays v0. v4 (Kafka 3.9, KAFKA-17011) has v3's bytes: it
// only lets the supported features list a feature whose minimum version is
// 0, which v0-v3 answers leave out; this broker lists no features (they
// are KRaft's metadata.version and friends), so its v4 answer is its v3
// answer. Kafka's newest clients send v4 first and step down on
// UNSUPPORTED_VERSION.
var apiVersionsAPI = API{Key: 18, MinVersion: 0, MaxVersion: 4, Handle: handleApiVersions}

func handleApiVersions(r *Request) {
	r.Respond(r.Broker.apiVersionsResponse())
}

func (b *Broker) apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, api := range b.APIs() {
		min := api.MinVersion
		if api.AdvertiseV0 {
			min = 0
		}
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{
			ApiKey: api.Key, MinVersion: min, MaxVersion: api.MaxVersion,
		})
	}
	return resp
}
