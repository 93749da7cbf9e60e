package security

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// APIs are SaslHandshake (17, v0-v1) and SaslAuthenticate (36, v0-v2) as
// a broker registers them (broker.Register), so that ApiVersions
// advertises them on every listener, as Kafka's does. The gate answers
// them before authentication; what reaches the broker, on a listener
// without SASL or on a connection already authenticated, is answered
// ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it.
func APIs() []broker.API {
	return []broker.API{
		{Key: keySaslHandshake, MinVersion: 0, MaxVersion: 1, Handle: func(r *broker.Request) {
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.ErrorCode = kerr.IllegalSaslState.Code
			r.Respond(resp)
		}},
		{Key: keySaslAuthenticate, MinVersion: 0, MaxVersion: 2, Handle: func(r *broker.Request) {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.ErrorCode = kerr.IllegalSaslState.Code
			resp.ErrorMessage = new("SaslAuthenticate request received after successful authentication")
			r.Respond(resp)
		}},
	}
}
