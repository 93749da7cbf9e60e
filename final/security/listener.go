package security

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// Listener is what security adds to one listener: the TLS config of an
// SSL or SASL_SSL listener (nil otherwise) and the handler wrapper of a
// SASL_PLAINTEXT or SASL_SSL listener (identity otherwise).
type Listener struct {
	TLS  *tls.Config
	Wrap func(network.Handler) network.Handler
	// MaxReceiveBeforeAuth is sasl.server.max.receive.size on a SASL
	// listener (0 otherwise): the largest request a connection may send
	// until it has authenticated (network.Listener.InitialMaxFrameBytes;
	// the gate lifts it).
	MaxReceiveBeforeAuth int32
}

// ForListener reads a listener's security from a broker's properties:
// protocol is its security protocol (listener.security.protocol.map's
// value: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), scram the SCRAM
// credentials (a *ZKCredentials; nil if no listener enables SCRAM).
func ForListener(props map[string]string, listener, protocol string, scram ScramCredentials, logger *slog.Logger) (Listener, error) {
	l := Listener{Wrap: func(h network.Handler) network.Handler { return h }}
	switch protocol {
	case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return Listener{}, fmt.Errorf("security: listener %s: unknown security protocol %q", listener, protocol)
	}
	if protocol == "SSL" || protocol == "SASL_SSL" {
		cfg, err := TLSConfig(props, listener)
		if err != nil {
			return Listener{}, err
		}
		l.TLS = cfg
	}
	if protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" {
		cfg, err := ParseSASLConfig(props, listener, scram)
		if err != nil {
			return Listener{}, err
		}
		cfg.Logger = logger
		l.Wrap = func(h network.Handler) network.Handler { return NewSASLGate(cfg, h) }
		l.MaxReceiveBeforeAuth = DefaultSASLServerMaxReceiveSize
		if v, ok := ListenerValue(props, listener, KeySASLServerMaxReceiveSize); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < 1 {
				return Listener{}, fmt.Errorf("security: listener %s: invalid value %q for configuration %s: not a number of bytes from 1", listener, v, KeySASLServerMaxReceiveSize)
			}
			l.MaxReceiveBeforeAuth = int32(n)
		}
	}
	return l, nil
}
