package security

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kafka's keys for SASL on a broker. Each may be given for one listener
// with the prefix listener.name.<listener>. (the listener name in lower
// case), which wins over the bare key; sasl.jaas.config and
// connections.max.reauth.ms take the mechanism too:
// listener.name.<listener>.<mechanism>.sasl.jaas.config.
const (
	KeySASLEnabledMechanisms = "sasl.enabled.mechanisms"
	KeySASLJAASConfig        = "sasl.jaas.config"
	KeyConnectionsMaxReauth  = "connections.max.reauth.ms"
	// KeySASLServerMaxReceiveSize bounds the requests a client may send
	// before it has authenticated (Kafka 3.3+, after CVE-2022-34917).
	// Default 524288.
	KeySASLServerMaxReceiveSize = "sasl.server.max.receive.size"
)

// DefaultSASLServerMaxReceiveSize is sasl.server.max.receive.size's default.
const DefaultSASLServerMaxReceiveSize = 524288

// Keys lists the broker keys this package reads, bare (each may also be
// given per listener, with ListenerPrefix, and sasl.jaas.config and
// connections.max.reauth.ms per listener and mechanism).
func Keys() []string {
	return []string{KeySASLEnabledMechanisms, KeySASLJAASConfig, KeyConnectionsMaxReauth, KeySASLServerMaxReceiveSize,
		KeySSLKeystoreType, KeySSLKeystoreLocation, KeySSLKeystorePassword, KeySSLKeyPassword,
		KeySSLKeystoreCertificateChain, KeySSLKeystoreKey, KeySSLTruststoreType, KeySSLTruststoreLocation,
		KeySSLTruststoreCertificates, KeySSLClientAuth, KeySSLEnabledProtocols, KeySSLCipherSuites}
}

// Sensitive reports whether a key (bare, or with a listener's prefix)
// holds a secret: a password, a private key, or a JAAS line with
// passwords in it. DescribeConfigs answers such a key's value as null.
func Sensitive(key string) bool {
	for _, k := range []string{KeySASLJAASConfig, KeySSLKeystorePassword, KeySSLKeyPassword, KeySSLKeystoreKey} {
		if key == k || strings.HasSuffix(key, "."+k) {
			return true
		}
	}
	return false
}

// IsKey reports whether key is one this package reads: a bare key of
// Keys, or listener.name.<listener>.<key>, or, for sasl.jaas.config and
// connections.max.reauth.ms, listener.name.<listener>.<mechanism>.<key>.
func IsKey(key string) bool {
	if slices.Contains(Keys(), key) {
		return true
	}
	rest, ok := strings.CutPrefix(key, "listener.name.")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ".") // the listener's name
	if !ok {
		return false
	}
	if slices.Contains(Keys(), rest) {
		return true
	}
	_, rest, ok = strings.Cut(rest, ".") // the mechanism's name
	return ok && (rest == KeySASLJAASConfig || rest == KeyConnectionsMaxReauth)
}

// plainLoginModule is the JAAS login module whose user_<name> options are
// PLAIN's users (Kafka's PlainServerCallbackHandler reads only its options).
const plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// SASLConfig is the SASL side of one SASL_PLAINTEXT or SASL_SSL listener.
type SASLConfig struct {
	// Listener is the listener's name, for log lines.
	Listener string
	// Mechanisms are sasl.enabled.mechanisms, in the order SaslHandshake
	// lists them.
	Mechanisms []string
	// PlainUsers are PLAIN's users and passwords: the user_<name>="<password>"
	// options of the listener's PlainLoginModule.
	PlainUsers map[string]string
	// Scram holds the SCRAM credentials (ZooKeeper's /config/users).
	Scram ScramCredentials
	// MaxReauth is connections.max.reauth.ms by mechanism: a session of
	// that mechanism lasts so long, then the client must re-authenticate
	// on the connection (KIP-368) or be disconnected. Zero: forever.
	MaxReauth map[string]time.Duration
	// Logger gets the failed authentications (nil: slog.Default()).
	Logger *slog.Logger
}

// ListenerValue returns a key's value for a listener: the
// listener.name.<listener>.<key> override if there is one, else the bare
// key. ok is false when neither is set.
func ListenerValue(props map[string]string, listener, key string) (value string, ok bool) {
	if v, ok := props[ListenerPrefix(listener)+key]; ok {
		return v, true
	}
	v, ok := props[key]
	return v, ok
}

// ListenerPrefix is the prefix of a listener's own keys: listener.name.
// and the listener's name in lower case.
func ListenerPrefix(listener string) string {
	return "listener.name." + strings.ToLower(listener) + "."
}

// ParseSASLConfig reads a SASL listener's configuration from a broker's
// properties. sasl.enabled.mechanisms defaults to PLAIN here: Kafka's
// default is GSSAPI (Kerberos), which this broker does not build, and
// naming GSSAPI is an error. PLAIN needs its users in
// listener.name.<listener>.plain.sasl.jaas.config; a bare
// sasl.jaas.config is ignored by Kafka brokers, so it is refused here
// with the key to use instead. SCRAM mechanisms need scram, the
// credentials' source.
func ParseSASLConfig(props map[string]string, listener string, scram ScramCredentials) (*SASLConfig, error) {
	cfg := &SASLConfig{Listener: listener, Scram: scram, MaxReauth: map[string]time.Duration{}}
	mechs, ok := ListenerValue(props, listener, KeySASLEnabledMechanisms)
	if !ok {
		mechs = PLAIN
	}
	for _, m := range strings.Split(mechs, ",") {
		m = strings.TrimSpace(m)
		if m == "" || slices.Contains(cfg.Mechanisms, m) {
			continue
		}
		switch m {
		case PLAIN, ScramSHA256, ScramSHA512:
		case GSSAPI:
			return nil, fmt.Errorf("security: listener %s: %s: GSSAPI (Kerberos) is not built into this broker; enable PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", listener, KeySASLEnabledMechanisms)
		default:
			return nil, fmt.Errorf("security: listener %s: %s: unknown mechanism %q (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are built)", listener, KeySASLEnabledMechanisms, m)
		}
		cfg.Mechanisms = append(cfg.Mechanisms, m)
	}
	if len(cfg.Mechanisms) == 0 {
		return nil, fmt.Errorf("security: listener %s: %s is empty: no SASL mechanisms are enabled", listener, KeySASLEnabledMechanisms)
	}
	for _, m := range cfg.Mechanisms {
		// listener.name.<l>.<mechanism>.connections.max.reauth.ms, then
		// listener.name.<l>.connections.max.reauth.ms, then the bare key, as
		// Kafka's SaslChannelBuilder reads them.
		mechKey := strings.ToLower(m) + "." + KeyConnectionsMaxReauth
		v, ok := props[ListenerPrefix(listener)+mechKey]
		if !ok {
			v, ok = ListenerValue(props, listener, KeyConnectionsMaxReauth)
		}
		if ok {
			ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || ms < 0 {
				return nil, fmt.Errorf("security: listener %s: %s: %q is not a number of milliseconds", listener, KeyConnectionsMaxReauth, v)
			}
			cfg.MaxReauth[m] = time.Duration(ms) * time.Millisecond
		}
		switch m {
		case PLAIN:
			users, err := plainUsers(props, listener)
			if err != nil {
				return nil, err
			}
			cfg.PlainUsers = users
		case ScramSHA256, ScramSHA512:
			if scram == nil {
				return nil, fmt.Errorf("security: listener %s enables %s but no SCRAM credential store is configured", listener, m)
			}
		}
	}
	return cfg, nil
}

// plainUsers reads PLAIN's users from the listener's JAAS config.
func plainUsers(props map[string]string, listener string) (map[string]string, error) {
	key := ListenerPrefix(listener) + "plain." + KeySASLJAASConfig
	jaas, ok := props[key]
	if !ok {
		hint := ""
		if _, bare := props[KeySASLJAASConfig]; bare {
			hint = " (a bare sasl.jaas.config is ignored by Kafka brokers: prefix it with the listener and mechanism)"
		}
		return nil, fmt.Errorf("security: listener %s enables PLAIN but %s is not set%s", listener, key, hint)
	}
	entries, err := ParseJAAS(jaas)
	if err != nil {
		return nil, fmt.Errorf("security: %s: %w", key, err)
	}
	if len(entries) != 1 {
		return nil, fmt.Errorf("security: %s: %d login modules, should be 1 module", key, len(entries))
	}
	if entries[0].LoginModule != plainLoginModule {
		return nil, fmt.Errorf("security: %s: login module %s, PLAIN needs %s", key, entries[0].LoginModule, plainLoginModule)
	}
	users := map[string]string{}
	for k, v := range entries[0].Options {
		if user, ok := strings.CutPrefix(k, "user_"); ok {
			users[user] = v
		}
	}
	return users, nil
}
