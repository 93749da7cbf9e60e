// Package security is the broker's authentication: SASL (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512) on SASL_PLAINTEXT and SASL_SSL listeners,
// and TLS for SSL and SASL_SSL listeners, configured with Kafka's keys.
//
// # SASL
//
// A SASL listener's network handler is a Gate (NewSASLGate) in front of
// the broker's. It is Kafka's SaslServerAuthenticator: a connection may
// ask ApiVersions once, must then choose a mechanism with SaslHandshake
// and carry the mechanism's tokens in SaslAuthenticate requests (KIP-152);
// until it has authenticated, any other request closes it.
//
//	client                                gate                      broker
//	  ApiVersions ───────────────────────▶ (once) ────────────────▶ API table
//	  SaslHandshake{SCRAM-SHA-256} ──────▶ NONE, [PLAIN SCRAM-…]
//	  SaslAuthenticate{n,,n=alice,r=…} ──▶ r=…,s=<salt>,i=4096
//	  SaslAuthenticate{c=biws,r=…,p=…} ──▶ v=<server signature>
//	  Produce, Fetch, … ─────────────────▶ (authenticated) ───────▶ handlers
//
// Kafka answers one ApiVersions before the handshake; the gate lets a
// client ask again until it sends SaslHandshake, because it passes
// ApiVersions to the broker and cannot tell an answer at a supported
// version from an UNSUPPORTED_VERSION one, after which a client must ask
// again (KIP-511).
//
// The gate keeps each connection's state (which step, which mechanism,
// which user) in the connection's slot that stage 02's network layer
// offers (network.Request.Conn). Wrong credentials are answered
// SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection
// closes. SaslHandshake v0, whose tokens travel as bare frames without a
// request header, is still served, as Kafka 3.9 serves it (Kafka 4.0
// removed it with KIP-896). connections.max.reauth.ms gives sessions a
// lifetime after which the client re-authenticates on the connection
// (KIP-368).
//
// SaslHandshake and SaslAuthenticate are also registered in the broker's
// API table (APIs), so that ApiVersions advertises them; what reaches the
// broker (a SASL request on a plaintext listener, or after authentication)
// is answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers it.
//
// PLAIN's users come from the listener's JAAS config
// (listener.name.<listener>.plain.sasl.jaas.config, user_<name>="<password>"),
// read as Kafka's JaasConfig reads it. SCRAM's credentials are salted
// keys (RFC 5802), never passwords: ZKCredentials keeps them as ZooKeeper
// holds them in /config/users/<user>, and follows /config/changes so that
// a user added with kafka-configs.sh (or AddScramCredential) logs in
// without a restart.
//
// # TLS
//
// TLSConfig builds a listener's *tls.Config from Kafka's ssl.* keys
// (ssl.keystore.*, ssl.truststore.*, ssl.client.auth, ssl.enabled.protocols,
// ssl.cipher.suites), each with its listener.name.<listener>. override.
// Java keystores (JKS, PKCS12) need Java to read; Kafka's PEM stores
// (KIP-651) are read instead.
//
// # Files
//
//	config.go       SASLConfig from Kafka's keys; ListenerValue
//	jaas.go         sasl.jaas.config's syntax
//	mechanism.go    the mechanisms' interface; PLAIN
//	scram.go        SCRAM: credentials, the server's two steps
//	gate.go         the Gate: Kafka's SaslServerAuthenticator
//	apis.go         SaslHandshake and SaslAuthenticate in the API table
//	credentials.go  the credential cache, ZooKeeper's credentials, kafka-configs' writes
//	tls.go          TLSConfig
//	pkcs8.go        encrypted PEM keys (PBES2), which Go's x509 does not read
//	listener.go     ForListener: what a listener of each security protocol gets
//
// # Wiring
//
// A broker registers APIs() in its table, starts WatchZKCredentials on
// its ZooKeeper session if a listener enables SCRAM, and for each listener
// calls ForListener with the listener's name and security protocol: it
// serves TLS with Listener.TLS and wraps the broker's handler with
// Listener.Wrap. User tells a handler who a request's connection is.
package security
