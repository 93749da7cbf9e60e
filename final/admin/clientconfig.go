package admin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkaworkbook/workbook/final/security"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// ClientConfig is what a --command-config file says about how to reach
// the brokers: Kafka's client properties for TLS and SASL, read the way a
// Java client reads them, as far as a Go client can follow.
type ClientConfig struct {
	// Protocol is security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or
	// SASL_SSL.
	Protocol string
	// TLS is the TLS configuration for SSL and SASL_SSL, nil otherwise.
	TLS *tls.Config
	// SASL is the mechanism for SASL_PLAINTEXT and SASL_SSL, nil otherwise.
	SASL sasl.Mechanism
	// ClientID is client.id, if set.
	ClientID string
	// Unknown lists the keys this tool does not read, for a warning (a
	// Java client logs "was supplied but isn't a known config" for them).
	Unknown []string
}

// knownClientKeys are the client properties ParseClientConfig reads.
var knownClientKeys = []string{
	"security.protocol", "client.id",
	"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.certificates", "ssl.truststore.password",
	"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.keystore.password", "ssl.key.password", "ssl.endpoint.identification.algorithm",
	"sasl.mechanism", "sasl.jaas.config",
}

// ConfigError names the property and the value a --command-config file
// got wrong.
type ConfigError struct {
	Key, Value, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s=%s: %s", e.Key, e.Value, e.Reason)
}

// ReadClientConfig reads a --command-config properties file.
func ReadClientConfig(path string) (ClientConfig, error) {
	props, err := store.ReadPropertiesFile(path)
	if err != nil {
		return ClientConfig{}, fmt.Errorf("--command-config: %w", err)
	}
	cfg, err := ParseClientConfig(props)
	if err != nil {
		return ClientConfig{}, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseClientConfig turns Kafka client properties into a ClientConfig.
func ParseClientConfig(props map[string]string) (ClientConfig, error) {
	cfg := ClientConfig{Protocol: "PLAINTEXT", ClientID: props["client.id"]}
	for k := range props {
		if !slices.Contains(knownClientKeys, k) {
			cfg.Unknown = append(cfg.Unknown, k)
		}
	}
	slices.Sort(cfg.Unknown)
	if p, ok := props["security.protocol"]; ok {
		cfg.Protocol = strings.ToUpper(p)
	}
	var useTLS, useSASL bool
	switch cfg.Protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return ClientConfig{}, &ConfigError{"security.protocol", props["security.protocol"],
			"not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"}
	}
	if useTLS {
		t, err := parseTLS(props)
		if err != nil {
			return ClientConfig{}, err
		}
		cfg.TLS = t
	}
	if useSASL {
		m, err := parseSASL(props)
		if err != nil {
			return ClientConfig{}, err
		}
		cfg.SASL = m
	}
	return cfg, nil
}

// Opts are the franz-go client options for this configuration.
func (c ClientConfig) Opts() []kgo.Opt {
	var opts []kgo.Opt
	if c.TLS != nil {
		// The dialer's own timeout: without one a black-holed address
		// waits for the context alone.
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: c.TLS}).DialContext))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	return opts
}

// parseTLS reads the ssl.* properties. Go reads PEM, not Java's key
// stores, so this tool takes Kafka's PEM form (KIP-651:
// ssl.truststore.type=PEM, ssl.keystore.type=PEM) and refuses JKS and
// PKCS12 by name rather than failing on their bytes.
func parseTLS(props map[string]string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}

	var roots []byte
	switch {
	case props["ssl.truststore.certificates"] != "":
		if err := requirePEMType(props, "ssl.truststore.type"); err != nil {
			return nil, err
		}
		roots = []byte(props["ssl.truststore.certificates"])
	case props["ssl.truststore.location"] != "":
		if err := requirePEMType(props, "ssl.truststore.type"); err != nil {
			return nil, err
		}
		data, err := readPEMFile(props, "ssl.truststore.location", "ssl.truststore.type")
		if err != nil {
			return nil, err
		}
		roots = data
	}
	if roots != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(roots) {
			key := "ssl.truststore.location"
			if props["ssl.truststore.certificates"] != "" {
				key = "ssl.truststore.certificates"
			}
			return nil, &ConfigError{key, props[key], "holds no PEM certificate"}
		}
		t.RootCAs = pool
	}

	// The client's own certificate, for brokers that ask for one
	// (ssl.client.auth=required): mutual TLS.
	var chain, key []byte
	switch {
	case props["ssl.keystore.certificate.chain"] != "" || props["ssl.keystore.key"] != "":
		if err := requirePEMType(props, "ssl.keystore.type"); err != nil {
			return nil, err
		}
		chain, key = []byte(props["ssl.keystore.certificate.chain"]), []byte(props["ssl.keystore.key"])
	case props["ssl.keystore.location"] != "":
		if err := requirePEMType(props, "ssl.keystore.type"); err != nil {
			return nil, err
		}
		data, err := readPEMFile(props, "ssl.keystore.location", "ssl.keystore.type")
		if err != nil {
			return nil, err
		}
		chain, key = data, data
	}
	if chain != nil || key != nil {
		if block := findPEM(key, "ENCRYPTED PRIVATE KEY"); block != nil || props["ssl.key.password"] != "" {
			return nil, &ConfigError{"ssl.key.password", "[hidden]",
				"an encrypted private key is not supported here: give the key unencrypted (openssl pkcs8 -nocrypt)"}
		}
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			k := "ssl.keystore.location"
			if props[k] == "" {
				k = "ssl.keystore.certificate.chain"
			}
			return nil, &ConfigError{k, props[k], "no certificate and private key in it: " + err.Error()}
		}
		t.Certificates = []tls.Certificate{cert}
	}

	// Kafka verifies the broker's host name by default ("https"); an
	// empty value turns that off but still checks the chain.
	switch alg, ok := props["ssl.endpoint.identification.algorithm"]; {
	case !ok || strings.EqualFold(alg, "https"):
	case alg == "":
		t.InsecureSkipVerify = true
		t.VerifyConnection = verifyChainOnly(t.RootCAs)
	default:
		return nil, &ConfigError{"ssl.endpoint.identification.algorithm", alg, `not "https" or empty`}
	}
	return t, nil
}

// requirePEMType refuses a key store type other than PEM. Kafka's
// default type is JKS; here an unset type means PEM, and the file's
// content is checked.
func requirePEMType(props map[string]string, typeKey string) error {
	typ, ok := props[typeKey]
	if !ok || strings.EqualFold(typ, "PEM") {
		return nil
	}
	return &ConfigError{typeKey, typ, "this tool reads PEM only (set " + typeKey +
		"=PEM); convert a JKS or PKCS12 store with keytool -exportcert -rfc or openssl pkcs12 -nodes"}
}

// readPEMFile reads the file a *.location key names and checks that it is
// PEM, so a JKS file (binary, magic 0xFEEDFEED) is refused by name.
func readPEMFile(props map[string]string, locationKey, typeKey string) ([]byte, error) {
	path := props[locationKey]
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{locationKey, path, err.Error()}
	}
	if !strings.Contains(string(data), "-----BEGIN ") {
		reason := "not a PEM file"
		if len(data) >= 4 && string(data[:4]) == "\xfe\xed\xfe\xed" {
			reason = "a JKS key store"
		}
		return nil, &ConfigError{locationKey, path, reason + "; this tool reads PEM only (" + typeKey +
			"=PEM): export it with keytool -exportcert -rfc or openssl pkcs12 -nodes"}
	}
	return data, nil
}

// findPEM returns the first PEM block of the given type in data.
func findPEM(data []byte, typ string) *pem.Block {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == typ {
			return b
		}
	}
}

// verifyChainOnly checks the broker's certificate chain against roots
// without its host name (ssl.endpoint.identification.algorithm= empty).
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("the broker sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

// parseSASL reads sasl.mechanism and the credentials in sasl.jaas.config.
func parseSASL(props map[string]string) (sasl.Mechanism, error) {
	mech, ok := props["sasl.mechanism"]
	if !ok {
		mech = "GSSAPI" // Kafka's default, which this tool cannot do
	}
	mech = strings.ToUpper(mech)
	if mech != "PLAIN" && mech != "SCRAM-SHA-256" && mech != "SCRAM-SHA-512" {
		return nil, &ConfigError{"sasl.mechanism", mech, "not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"}
	}
	jaas, ok := props["sasl.jaas.config"]
	if !ok {
		return nil, &ConfigError{"sasl.jaas.config", "", "missing: security.protocol " + props["security.protocol"] +
			` needs a login module line, e.g. org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`}
	}
	user, pass, err := ParseJAAS(jaas)
	if err != nil {
		return nil, &ConfigError{"sasl.jaas.config", redactJAAS(jaas), err.Error()}
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// jaasModules are the login modules whose username and password options
// carry the credentials of PLAIN and SCRAM.
var jaasModules = []string{
	"org.apache.kafka.common.security.plain.PlainLoginModule",
	"org.apache.kafka.common.security.scram.ScramLoginModule",
}

// ParseJAAS reads the username and password from a Kafka JAAS line:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";
//
// The line is read by the broker's own reader (security.ParseJAAS, Kafka's
// rules); it must hold one PlainLoginModule or ScramLoginModule entry
// with both options.
func ParseJAAS(line string) (user, pass string, err error) {
	entries, err := security.ParseJAAS(line)
	if err != nil {
		return "", "", errors.New(strings.TrimPrefix(err.Error(), "security: JAAS config: "))
	}
	if len(entries) != 1 {
		return "", "", fmt.Errorf("%d login modules: a client names one", len(entries))
	}
	e := entries[0]
	if !slices.Contains(jaasModules, e.LoginModule) {
		return "", "", fmt.Errorf("login module %q: this tool knows PlainLoginModule and ScramLoginModule", e.LoginModule)
	}
	user, okU := e.Options["username"]
	pass, okP := e.Options["password"]
	if !okU || !okP {
		return "", "", fmt.Errorf("needs username=\"...\" and password=\"...\" options")
	}
	return user, pass, nil
}

// jaasPassword matches a JAAS password option, for error messages.
var jaasPassword = regexp.MustCompile(`password\s*=\s*("(\\.|[^"\\])*"?|\S*)`)

// redactJAAS hides the password in a JAAS line an error message repeats.
func redactJAAS(line string) string {
	return jaasPassword.ReplaceAllString(line, `password="[hidden]"`)
}
