package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Kafka's ssl.* keys for a broker's listener. Each may be given for one
// listener with the prefix listener.name.<listener>. (ListenerValue).
const (
	KeySSLKeystoreType             = "ssl.keystore.type"
	KeySSLKeystoreLocation         = "ssl.keystore.location"
	KeySSLKeystorePassword         = "ssl.keystore.password"
	KeySSLKeyPassword              = "ssl.key.password"
	KeySSLKeystoreCertificateChain = "ssl.keystore.certificate.chain"
	KeySSLKeystoreKey              = "ssl.keystore.key"
	KeySSLTruststoreType           = "ssl.truststore.type"
	KeySSLTruststoreLocation       = "ssl.truststore.location"
	KeySSLTruststoreCertificates   = "ssl.truststore.certificates"
	KeySSLClientAuth               = "ssl.client.auth"
	KeySSLEnabledProtocols         = "ssl.enabled.protocols"
	KeySSLCipherSuites             = "ssl.cipher.suites"
)

// tlsVersion is one of ssl.enabled.protocols' names and its version.
type tlsVersion struct {
	name    string
	version uint16
}

// tlsVersions are ssl.enabled.protocols' names, oldest first.
var tlsVersions = []tlsVersion{
	{"TLSv1", tls.VersionTLS10}, {"TLSv1.1", tls.VersionTLS11}, {"TLSv1.2", tls.VersionTLS12}, {"TLSv1.3", tls.VersionTLS13},
}

// TLSConfig builds the *tls.Config of an SSL or SASL_SSL listener from
// Kafka's keys, each read for the listener first
// (listener.name.<listener>.ssl.keystore.location, ...):
//
//   - the broker's certificate and key: ssl.keystore.type=PEM (KIP-651)
//     with ssl.keystore.location naming a PEM file that holds the
//     certificate chain and the private key, or with the PEM text inline
//     in ssl.keystore.certificate.chain and ssl.keystore.key. An encrypted
//     key ("ENCRYPTED PRIVATE KEY", PKCS#8 with PBES2) is decrypted with
//     ssl.key.password.
//   - the CAs that sign client certificates: ssl.truststore.type=PEM with
//     ssl.truststore.location or ssl.truststore.certificates.
//   - ssl.client.auth: none (default), requested (a certificate is asked
//     for and checked if given) or required.
//   - ssl.enabled.protocols (default TLSv1.2,TLSv1.3): a contiguous range.
//   - ssl.cipher.suites (default: Go's): IANA names, as Java spells them
//     too. Go fixes TLS 1.3's suites; the list applies to TLS 1.2 and
//     older, and TLS 1.3 names in it are accepted.
//
// Java keystores (JKS, Kafka's default type, and PKCS12) are refused:
// reading them needs Java's keystore code (JKS is a Java-only format, and
// Go's standard library has no PKCS#12 reader). Convert them to PEM
// (keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes).
func TLSConfig(props map[string]string, listener string) (*tls.Config, error) {
	get := func(key string) string {
		v, _ := ListenerValue(props, listener, key)
		return strings.TrimSpace(v)
	}
	fail := func(key, format string, args ...any) error {
		return fmt.Errorf("security: listener %s: %s: %s", listener, key, fmt.Sprintf(format, args...))
	}
	cfg := &tls.Config{}

	cert, err := keystore(get, fail)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{cert}

	if pool, err := truststore(get, fail); err != nil {
		return nil, err
	} else if pool != nil {
		cfg.ClientCAs = pool
	}

	switch auth := strings.ToLower(get(KeySSLClientAuth)); auth {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fail(KeySSLClientAuth, "%q is not none, requested or required", auth)
	}
	if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
		return nil, fail(KeySSLClientAuth, "%s needs a truststore (%s) to check client certificates", cfg.ClientAuth, KeySSLTruststoreLocation)
	}

	protocols := get(KeySSLEnabledProtocols)
	if protocols == "" {
		protocols = "TLSv1.2,TLSv1.3"
	}
	var enabled []int
	for _, p := range strings.Split(protocols, ",") {
		i := slices.IndexFunc(tlsVersions, func(v tlsVersion) bool { return v.name == strings.TrimSpace(p) })
		if i < 0 {
			return nil, fail(KeySSLEnabledProtocols, "unknown protocol %q (TLSv1, TLSv1.1, TLSv1.2, TLSv1.3)", strings.TrimSpace(p))
		}
		enabled = append(enabled, i)
	}
	slices.Sort(enabled)
	enabled = slices.Compact(enabled)
	if enabled[len(enabled)-1]-enabled[0] != len(enabled)-1 {
		return nil, fail(KeySSLEnabledProtocols, "%q is not a contiguous range: Go's TLS has a minimum and a maximum version", protocols)
	}
	cfg.MinVersion, cfg.MaxVersion = tlsVersions[enabled[0]].version, tlsVersions[enabled[len(enabled)-1]].version

	if suites := get(KeySSLCipherSuites); suites != "" {
		byName := map[string]*tls.CipherSuite{}
		for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
			byName[s.Name] = s
		}
		for _, name := range strings.Split(suites, ",") {
			s, ok := byName[strings.TrimSpace(name)]
			if !ok {
				return nil, fail(KeySSLCipherSuites, "unknown cipher suite %q", strings.TrimSpace(name))
			}
			if !slices.Contains(s.SupportedVersions, tls.VersionTLS13) {
				cfg.CipherSuites = append(cfg.CipherSuites, s.ID)
			}
		}
		// Go fixes TLS 1.3's suites. A list naming none for TLS 1.2 allows
		// no TLS 1.2 suite, as Java would: TLS 1.3 only (an empty
		// CipherSuites would mean Go's whole default list instead).
		if len(cfg.CipherSuites) == 0 {
			if cfg.MaxVersion < tls.VersionTLS13 {
				return nil, fail(KeySSLCipherSuites, "%q names only TLS 1.3 suites, but ssl.enabled.protocols stops below TLSv1.3", suites)
			}
			cfg.MinVersion = tls.VersionTLS13
		}
	}
	return cfg, nil
}

// keystore reads the broker's certificate chain and private key.
func keystore(get func(string) string, fail func(string, string, ...any) error) (tls.Certificate, error) {
	location, chain, key := get(KeySSLKeystoreLocation), get(KeySSLKeystoreCertificateChain), get(KeySSLKeystoreKey)
	if err := pemOnly(get(KeySSLKeystoreType), location+chain+key != "", fail, KeySSLKeystoreType); err != nil {
		return tls.Certificate{}, err
	}
	var data []byte
	switch {
	case location != "" && (chain != "" || key != ""):
		return tls.Certificate{}, fail(KeySSLKeystoreLocation, "set either it or %s and %s, not both", KeySSLKeystoreCertificateChain, KeySSLKeystoreKey)
	case location != "":
		var err error
		if data, err = os.ReadFile(location); err != nil {
			return tls.Certificate{}, fail(KeySSLKeystoreLocation, "%v", err)
		}
	case chain != "" && key != "":
		data = []byte(chain + "\n" + key)
	default:
		return tls.Certificate{}, fail(KeySSLKeystoreLocation, "not set: an SSL listener needs its certificate and key (or %s and %s)", KeySSLKeystoreCertificateChain, KeySSLKeystoreKey)
	}
	var cert tls.Certificate
	var keyDER []byte
	password := get(KeySSLKeyPassword)
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		switch block.Type {
		case "CERTIFICATE":
			cert.Certificate = append(cert.Certificate, block.Bytes)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if password != "" {
				// Kafka: with ssl.key.password the key must be encrypted.
				return tls.Certificate{}, fail(KeySSLKeyPassword, "set, but the key is not encrypted (ENCRYPTED PRIVATE KEY)")
			}
			keyDER = block.Bytes
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return tls.Certificate{}, fail(KeySSLKeyPassword, "not set, and the key is encrypted")
			}
			der, err := decryptPKCS8(block.Bytes, []byte(password))
			if err != nil {
				return tls.Certificate{}, fail(KeySSLKeyPassword, "%v", err)
			}
			keyDER = der
		}
	}
	if len(cert.Certificate) == 0 {
		return tls.Certificate{}, fail(KeySSLKeystoreLocation, "no CERTIFICATE in the PEM keystore")
	}
	if keyDER == nil {
		return tls.Certificate{}, fail(KeySSLKeystoreLocation, "no PRIVATE KEY in the PEM keystore")
	}
	// tls.X509KeyPair reads PKCS#8, PKCS#1 and SEC 1 keys alike, and
	// checks that the key is the leaf certificate's.
	pair, err := tls.X509KeyPair(pemOf(cert.Certificate), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return tls.Certificate{}, fail(KeySSLKeystoreLocation, "%v", err)
	}
	return pair, nil
}

// truststore reads the CAs that sign client certificates; nil if none are
// configured.
func truststore(get func(string) string, fail func(string, string, ...any) error) (*x509.CertPool, error) {
	location, inline := get(KeySSLTruststoreLocation), get(KeySSLTruststoreCertificates)
	if err := pemOnly(get(KeySSLTruststoreType), location+inline != "", fail, KeySSLTruststoreType); err != nil {
		return nil, err
	}
	var data []byte
	switch {
	case location != "" && inline != "":
		return nil, fail(KeySSLTruststoreLocation, "set either it or %s, not both", KeySSLTruststoreCertificates)
	case location != "":
		var err error
		if data, err = os.ReadFile(location); err != nil {
			return nil, fail(KeySSLTruststoreLocation, "%v", err)
		}
	case inline != "":
		data = []byte(inline)
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fail(KeySSLTruststoreLocation, "no CERTIFICATE in the PEM truststore")
	}
	return pool, nil
}

// pemOnly refuses the Java keystore types; typ is the store's type key's
// value, configured whether the store has a location or inline PEM.
func pemOnly(typ string, configured bool, fail func(string, string, ...any) error, key string) error {
	switch t := strings.ToUpper(typ); t {
	case "PEM":
		return nil
	case "", "JKS", "PKCS12":
		if t == "" {
			if !configured {
				return nil // nothing configured: the caller says what is missing
			}
			t = "JKS (Kafka's default)"
		}
		return fail(key, "%s: a Java keystore cannot be read here (JKS is Java's own format and Go's standard library reads no PKCS#12); set %s=PEM with a PEM file (KIP-651)", t, key)
	default:
		return fail(key, "unknown store type %q (PEM)", t)
	}
}

func pemOf(ders [][]byte) []byte {
	var out []byte
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
	}
	return out
}
