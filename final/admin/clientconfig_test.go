package admin_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkaworkbook/workbook/final/admin"
	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
)

// TestParseJAASReadsKafkasLoginModuleLine: the username and password of
// Kafka's JAAS line, quoted or bare, with escapes; anything else is an
// error that says what is wrong.
func TestParseJAASReadsKafkasLoginModuleLine(t *testing.T) {
	for _, tt := range []struct {
		line, user, pass, err string
	}{
		{line: `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			user: "alice", pass: "alice-secret"},
		{line: `  org.apache.kafka.common.security.scram.ScramLoginModule required  password="p w\"q"   username=bob ;`,
			user: "bob", pass: `p w"q`},
		{line: `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="x"`, err: "not terminated by semi-colon"},
		{line: `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;`, err: `login module "com.sun.security.auth.module.Krb5LoginModule"`},
		{line: `org.apache.kafka.common.security.plain.PlainLoginModule must username="a" password="b";`, err: `control flag "must"`},
		{line: `org.apache.kafka.common.security.plain.PlainLoginModule required username="a";`, err: "needs username"},
		{line: `org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b;`, err: "not terminated by semi-colon"},
	} {
		user, pass, err := admin.ParseJAAS(tt.line)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, tt.line)
			continue
		}
		require.NoError(t, err, tt.line)
		require.Equal(t, [2]string{tt.user, tt.pass}, [2]string{user, pass})
	}
}

// TestClientConfigErrorsNameTheKeyAndValue: each mistake in a
// --command-config file is reported with the key and the value (never a
// password), JKS stores are refused by name with the way out.
func TestClientConfigErrorsNameTheKeyAndValue(t *testing.T) {
	dir := t.TempDir()
	jks := filepath.Join(dir, "truststore.jks")
	require.NoError(t, os.WriteFile(jks, []byte("\xfe\xed\xfe\xed\x00\x00\x00\x02"), 0o600))
	for _, tt := range []struct {
		props map[string]string
		err   string
	}{
		{map[string]string{"security.protocol": "SASL_TLS"}, "security.protocol=SASL_TLS: not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": jks, "ssl.truststore.type": "JKS"},
			"ssl.truststore.type=JKS: this tool reads PEM only"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": jks},
			"ssl.truststore.location=" + jks + ": a JKS key store; this tool reads PEM only"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": filepath.Join(dir, "none.pem")},
			"ssl.truststore.location=" + filepath.Join(dir, "none.pem") + ": open "},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.location": jks, "ssl.keystore.type": "PKCS12"},
			"ssl.keystore.type=PKCS12: this tool reads PEM only"},
		{map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
			`ssl.endpoint.identification.algorithm=dns: not "https" or empty`},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": "x"},
			"sasl.mechanism=GSSAPI: not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config=: missing"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret"`},
			`password="[hidden]": entry not terminated by semi-colon`},
	} {
		_, err := admin.ParseClientConfig(tt.props)
		require.ErrorContains(t, err, tt.err)
		require.NotContains(t, err.Error(), "s3cret")
	}
	cfg, err := admin.ParseClientConfig(map[string]string{"client.id": "ops", "acks": "all"})
	require.NoError(t, err)
	require.Equal(t, "PLAINTEXT", cfg.Protocol)
	require.Equal(t, []string{"acks"}, cfg.Unknown)
}

// TestCommandConfigReachesSASLAndMutualTLSListeners: the same command
// config a Java client would use (PEM stores) reaches a PLAIN listener,
// and a TLS listener that asks for the client's certificate; without
// the certificate, or with the wrong password, the command fails.
func TestCommandConfigReachesSASLAndMutualTLSListeners(t *testing.T) {
	_, bs := fakeCluster(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "admin-secret"))
	plain := `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="%s";`
	good := clientConfig(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", fmt.Sprintf(plain, "admin-secret"))
	bad := clientConfig(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", fmt.Sprintf(plain, "wrong"))
	require.Contains(t, ok(t, "cluster", "--bootstrap-server", bs, "--command-config", good), "Brokers:\n")
	fails(t, "SASL", "cluster", "--bootstrap-server", bs, "--command-config", bad, "--timeout", "3s")

	pki := tlstest.New(t)
	clientPEM := pki.WriteFile("client.pem", pki.ClientKeystorePEM("admin-client"))
	caPEM := pki.WriteFile("ca.pem", pki.CAPEM())
	_, tlsBS := fakeCluster(t, kfake.NumBrokers(1), kfake.TLS(pki.ServerConfig(tls.RequireAndVerifyClientCert)))

	mtls := clientConfig(t, "security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.truststore.location="+caPEM,
		"ssl.keystore.type=PEM", "ssl.keystore.location="+clientPEM)
	require.Contains(t, ok(t, "cluster", "--bootstrap-server", tlsBS, "--command-config", mtls), "Brokers:\n")
	noCert := clientConfig(t, "security.protocol=SSL", "ssl.truststore.location="+caPEM)
	fails(t, "Error: ", "cluster", "--bootstrap-server", tlsBS, "--command-config", noCert, "--timeout", "3s")
	fails(t, "Error: ", "cluster", "--bootstrap-server", tlsBS, "--timeout", "3s")
}
