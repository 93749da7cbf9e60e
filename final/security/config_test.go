package security

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseJAASReadsWhatKafkaReads(t *testing.T) {
	entries, err := ParseJAAS(`
		// a comment
		org.apache.kafka.common.security.plain.PlainLoginModule required /* another */
		username="admin" password='admin-secret'
		user_admin="admin-secret"
		user_alice=alice-secret
		user_bob="b\"o;b=";`)
	require.NoError(t, err)
	require.Equal(t, []JAASEntry{{
		LoginModule: "org.apache.kafka.common.security.plain.PlainLoginModule",
		Flag:        "required",
		Options: map[string]string{"username": "admin", "password": "admin-secret",
			"user_admin": "admin-secret", "user_alice": "alice-secret", "user_bob": `b"o;b=`},
	}}, entries)

	for config, want := range map[string]string{
		``: "login module not specified",
		`org.apache.kafka.common.security.plain.PlainLoginModule`:                      "control flag not specified",
		`org.apache.kafka.common.security.plain.PlainLoginModule mandatory a="b";`:     `invalid login module control flag "mandatory"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required a="b"`:       "not terminated by semi-colon",
		`org.apache.kafka.common.security.plain.PlainLoginModule required a=;`:         `value not specified for key "a"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a=123;`: `value not specified for key "user_a"`,
	} {
		_, err := ParseJAAS(config)
		require.ErrorContains(t, err, want, "config %q", config)
	}
}

func TestParseSASLConfigNamesTheKeyItNeeds(t *testing.T) {
	cfg, err := ParseSASLConfig(map[string]string{
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": testJAAS,
	}, "SASL_PLAINTEXT", nil)
	require.NoError(t, err)
	require.Equal(t, []string{PLAIN}, cfg.Mechanisms, "PLAIN by default: GSSAPI, Kafka's default, is not built")
	require.Equal(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"}, cfg.PlainUsers)

	cfg, err = ParseSASLConfig(map[string]string{
		"listener.name.internal.sasl.enabled.mechanisms":                 "SCRAM-SHA-512",
		"sasl.enabled.mechanisms":                                        "PLAIN",
		"connections.max.reauth.ms":                                      "60000",
		"listener.name.internal.scram-sha-512.connections.max.reauth.ms": "1000",
	}, "INTERNAL", NewCredentialCache())
	require.NoError(t, err)
	require.Equal(t, []string{ScramSHA512}, cfg.Mechanisms, "the listener's own key wins")
	require.Equal(t, time.Second, cfg.MaxReauth[ScramSHA512])

	// The listener's key without a mechanism wins over the bare one.
	cfg, err = ParseSASLConfig(map[string]string{
		"sasl.enabled.mechanisms":                          "SCRAM-SHA-512",
		"connections.max.reauth.ms":                        "60000",
		"listener.name.internal.connections.max.reauth.ms": "2000",
	}, "INTERNAL", NewCredentialCache())
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, cfg.MaxReauth[ScramSHA512])

	for props, want := range map[*map[string]string]string{
		{"sasl.jaas.config": testJAAS}:        "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set (a bare sasl.jaas.config is ignored by Kafka brokers",
		{}:                                    "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set",
		{"sasl.enabled.mechanisms": "GSSAPI"}: "GSSAPI (Kerberos) is not built",
		{"sasl.enabled.mechanisms": "OAUTHBEARER"}:   `unknown mechanism "OAUTHBEARER"`,
		{"sasl.enabled.mechanisms": " , "}:           "no SASL mechanisms are enabled",
		{"sasl.enabled.mechanisms": "SCRAM-SHA-256"}: "no SCRAM credential store",
		{"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`}: "PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule",
		{"listener.name.sasl_plaintext.plain.sasl.jaas.config": `broken`}:                                                            "listener.name.sasl_plaintext.plain.sasl.jaas.config: security: JAAS config",
		{"connections.max.reauth.ms": "soon", "listener.name.sasl_plaintext.plain.sasl.jaas.config": testJAAS}:                       "connections.max.reauth.ms",
	} {
		_, err := ParseSASLConfig(*props, "SASL_PLAINTEXT", nil)
		require.ErrorContains(t, err, want, "props %v", *props)
	}
}

func TestParseScramConfigValueReadsKafkaConfigsSyntax(t *testing.T) {
	pw, it, err := ParseScramConfigValue("[iterations=8192,password=alice-secret]")
	require.NoError(t, err)
	require.Equal(t, "alice-secret", pw)
	require.Equal(t, 8192, it)
	pw, it, err = ParseScramConfigValue("[password=alice-secret]")
	require.NoError(t, err)
	require.Equal(t, "alice-secret", pw)
	require.Zero(t, it)
	for _, bad := range []string{"password=x", "[iterations=x,password=y]", "[iterations=4096]", "[salt=x,password=y]"} {
		_, _, err := ParseScramConfigValue(bad)
		require.Error(t, err, bad)
	}
}
