package security

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// testPKI is a CA with a server and a client certificate, in PEM.
type testPKI struct {
	dir                    string
	caPEM                  []byte
	caPool                 *x509.CertPool
	serverCert, clientCert []byte // PEM
	serverKey, clientKey   []byte // PKCS#8 DER
	clientPair             tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "workbook CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyDER
	}
	p.serverCert, p.serverKey = issue(2, "broker", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = issue(3, "alice", x509.ExtKeyUsageClientAuth)
	p.clientPair, err = tls.X509KeyPair(p.clientCert, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p.clientKey}))
	require.NoError(t, err)
	return p
}

// file writes data into the PKI's directory and returns its path.
func (p *testPKI) file(t *testing.T, name string, data ...[]byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	require.NoError(t, os.WriteFile(path, all, 0o600))
	return path
}

func keyPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// keystoreProps is a PEM keystore file holding the server's chain and key,
// and a PEM truststore with the CA.
func (p *testPKI) keystoreProps(t *testing.T, more ...string) map[string]string {
	props := map[string]string{
		KeySSLKeystoreType:       "PEM",
		KeySSLKeystoreLocation:   p.file(t, "broker.pem", p.serverCert, keyPEM(p.serverKey)),
		KeySSLTruststoreType:     "PEM",
		KeySSLTruststoreLocation: p.file(t, "ca.pem", p.caPEM),
	}
	for i := 0; i+1 < len(more); i += 2 {
		props[more[i]] = more[i+1]
	}
	return props
}

// handshake runs a TLS handshake between server and client over
// loopback TCP and returns the error the client sees: in its handshake,
// or (TLS 1.3 checks the client's certificate after the client finished)
// when it reads the server's first byte.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if c.(*tls.Conn).Handshake() == nil {
			c.Write([]byte("ok"))
		}
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), client)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadFull(c, make([]byte, 2))
	return err
}

func (p *testPKI) clientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.caPool, ServerName: "localhost"}
	if withCert {
		c.Certificates = []tls.Certificate{p.clientPair}
	}
	return c
}

func TestTLSConfigServesThePEMKeystoresCertificate(t *testing.T) {
	p := newTestPKI(t)
	cfg, err := TLSConfig(p.keystoreProps(t), "SSL")
	require.NoError(t, err)
	require.Equal(t, tls.NoClientCert, cfg.ClientAuth, "ssl.client.auth defaults to none")
	require.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion, "ssl.enabled.protocols defaults to TLSv1.2,TLSv1.3")
	require.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
	require.NoError(t, handshake(t, cfg, p.clientConfig(false)), "the client verifies the broker's certificate against the CA")
}

func TestSSLClientAuthRequiredAndRequested(t *testing.T) {
	p := newTestPKI(t)
	required, err := TLSConfig(p.keystoreProps(t, "listener.name.ssl.ssl.client.auth", "required"), "SSL")
	require.NoError(t, err)
	require.Error(t, handshake(t, required, p.clientConfig(false)), "required: no certificate, no connection")
	require.NoError(t, handshake(t, required, p.clientConfig(true)))

	requested, err := TLSConfig(p.keystoreProps(t, KeySSLClientAuth, "requested"), "SSL")
	require.NoError(t, err)
	require.NoError(t, handshake(t, requested, p.clientConfig(false)), "requested: a certificate is optional")
	require.NoError(t, handshake(t, requested, p.clientConfig(true)))

	// A client certificate from another CA is checked, and refused.
	other := newTestPKI(t)
	stranger := p.clientConfig(false)
	stranger.Certificates = []tls.Certificate{other.clientPair}
	require.Error(t, handshake(t, requested, stranger))
}

func TestInlinePEMAndAnEncryptedKeyForOneListener(t *testing.T) {
	p := newTestPKI(t)
	encrypted := encryptPKCS8(t, p.serverKey, "key-secret")
	props := map[string]string{
		"listener.name.external.ssl.keystore.type":              "PEM",
		"listener.name.external.ssl.keystore.certificate.chain": string(p.serverCert),
		"listener.name.external.ssl.keystore.key":               string(encrypted),
		"listener.name.external.ssl.key.password":               "key-secret",
		"ssl.keystore.type":                                     "JKS", // another listener's
	}
	cfg, err := TLSConfig(props, "EXTERNAL")
	require.NoError(t, err)
	require.NoError(t, handshake(t, cfg, p.clientConfig(false)))

	props["listener.name.external.ssl.key.password"] = "wrong"
	_, err = TLSConfig(props, "EXTERNAL")
	require.ErrorContains(t, err, "ssl.key.password")
	delete(props, "listener.name.external.ssl.key.password")
	_, err = TLSConfig(props, "EXTERNAL")
	require.ErrorContains(t, err, "ssl.key.password: not set, and the key is encrypted")
	_, err = TLSConfig(props, "INTERNAL")
	require.ErrorContains(t, err, "JKS")
}

func TestSSLEnabledProtocolsAndCipherSuitesBindTheHandshake(t *testing.T) {
	p := newTestPKI(t)
	only13, err := TLSConfig(p.keystoreProps(t, KeySSLEnabledProtocols, "TLSv1.3"), "SSL")
	require.NoError(t, err)
	old := p.clientConfig(false)
	old.MaxVersion = tls.VersionTLS12
	require.Error(t, handshake(t, only13, old), "a TLS 1.2 client meets a TLS 1.3-only listener")
	require.NoError(t, handshake(t, only13, p.clientConfig(false)))

	suite := "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	one, err := TLSConfig(p.keystoreProps(t, KeySSLEnabledProtocols, "TLSv1.2", KeySSLCipherSuites, suite+",TLS_AES_128_GCM_SHA256"), "SSL")
	require.NoError(t, err)
	other := p.clientConfig(false)
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	require.Error(t, handshake(t, one, other), "no cipher suite in common")
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	require.NoError(t, handshake(t, one, other))
}

func TestTLSConfigErrorsNameTheKey(t *testing.T) {
	p := newTestPKI(t)
	otherKey := newTestPKI(t).serverKey
	for want, props := range map[string]map[string]string{
		"ssl.keystore.type: JKS (Kafka's default): a Java keystore cannot be read here": {KeySSLKeystoreLocation: "/etc/kafka/broker.jks"},
		"ssl.keystore.type: PKCS12: a Java keystore cannot be read here":                p.keystoreProps(t, KeySSLKeystoreType, "PKCS12"),
		"ssl.truststore.type: JKS":                            p.keystoreProps(t, KeySSLTruststoreType, "JKS"),
		"ssl.keystore.location: not set":                      {KeySSLKeystoreType: "PEM"},
		"no such file":                                        p.keystoreProps(t, KeySSLKeystoreLocation, "/nonexistent.pem"),
		"no PRIVATE KEY":                                      p.keystoreProps(t, KeySSLKeystoreLocation, p.file(t, "nokey.pem", p.serverCert)),
		"private key does not match public key":               p.keystoreProps(t, KeySSLKeystoreLocation, p.file(t, "mismatch.pem", p.serverCert, keyPEM(otherKey))),
		"ssl.key.password: set, but the key is not encrypted": p.keystoreProps(t, KeySSLKeyPassword, "x"),
		`ssl.client.auth: "always" is not none`:               p.keystoreProps(t, KeySSLClientAuth, "always"),
		"needs a truststore":                                  {KeySSLKeystoreType: "PEM", KeySSLKeystoreLocation: p.file(t, "b.pem", p.serverCert, keyPEM(p.serverKey)), KeySSLClientAuth: "required"},
		"not a contiguous range":                              p.keystoreProps(t, KeySSLEnabledProtocols, "TLSv1.1,TLSv1.3"),
		`unknown protocol "SSLv3"`:                            p.keystoreProps(t, KeySSLEnabledProtocols, "SSLv3"),
		`unknown cipher suite "TLS_RSA_WITH_RC4_128_MD5"`:     p.keystoreProps(t, KeySSLCipherSuites, "TLS_RSA_WITH_RC4_128_MD5"),
	} {
		_, err := TLSConfig(props, "SSL")
		require.ErrorContains(t, err, want)
	}
}

// encryptPKCS8 wraps a PKCS#8 key as openssl pkcs8 -topk8 -v2 aes-256-cbc
// -v2prf hmacWithSHA256 does: PBES2, PBKDF2 with HMAC-SHA256, AES-256-CBC.
func encryptPKCS8(t *testing.T, der []byte, password string) []byte {
	t.Helper()
	salt, iv := make([]byte, 16), make([]byte, 16)
	rand.Read(salt)
	rand.Read(iv)
	key, err := pbkdf2.Key(sha256.New, password, salt, 2048, 32)
	require.NoError(t, err)
	pad := aes.BlockSize - len(der)%aes.BlockSize
	plain := append(append([]byte{}, der...), bytesOf(byte(pad), pad)...)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	enc := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(enc, plain)

	raw := func(v any) asn1.RawValue {
		b, err := asn1.Marshal(v)
		require.NoError(t, err)
		return asn1.RawValue{FullBytes: b}
	}
	kdf := raw(pbkdf2Params{Salt: salt, IterationCount: 2048,
		PRF: algorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}, Parameters: asn1.NullRawValue}})
	params := raw(pbes2Params{
		KeyDerivationFunc: algorithmIdentifier{Algorithm: oidPBKDF2, Parameters: kdf},
		EncryptionScheme:  algorithmIdentifier{Algorithm: asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}, Parameters: raw(iv)},
	})
	out, err := asn1.Marshal(encryptedPrivateKeyInfo{Algorithm: algorithmIdentifier{Algorithm: oidPBES2, Parameters: params}, EncryptedData: enc})
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: out})
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestForListenerFollowsTheSecurityProtocol(t *testing.T) {
	p := newTestPKI(t)
	props := p.keystoreProps(t, "listener.name.client.plain.sasl.jaas.config", testJAAS)
	var next network.Handler = network.HandlerFunc(func(*network.Request) {})
	for protocol, want := range map[string]struct{ tls, gate bool }{
		"PLAINTEXT": {false, false}, "SSL": {true, false}, "SASL_PLAINTEXT": {false, true}, "SASL_SSL": {true, true},
	} {
		l, err := ForListener(props, "CLIENT", protocol, nil, quietLogger)
		require.NoError(t, err, protocol)
		require.Equal(t, want.tls, l.TLS != nil, protocol)
		_, gated := l.Wrap(next).(*Gate)
		require.Equal(t, want.gate, gated, protocol)
	}
	_, err := ForListener(props, "CLIENT", "SASL_TLS", nil, quietLogger)
	require.ErrorContains(t, err, `unknown security protocol "SASL_TLS"`)
	_, err = ForListener(map[string]string{}, "CLIENT", "SASL_PLAINTEXT", nil, quietLogger)
	require.ErrorContains(t, err, "listener.name.client.plain.sasl.jaas.config is not set")
}
