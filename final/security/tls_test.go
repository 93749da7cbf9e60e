package security

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/asn1"
	"encoding/pem"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
)

// keystoreProps is a PEM keystore file holding the server's chain and key,
// and a PEM truststore with the CA.
func keystoreProps(p *tlstest.PKI, more ...string) map[string]string {
	props := map[string]string{
		KeySSLKeystoreType:       "PEM",
		KeySSLKeystoreLocation:   p.WriteFile("broker.pem", p.ServerKeystorePEM()),
		KeySSLTruststoreType:     "PEM",
		KeySSLTruststoreLocation: p.WriteFile("ca.pem", p.CAPEM()),
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

func TestTLSConfigServesThePEMKeystoresCertificate(t *testing.T) {
	p := tlstest.New(t)
	cfg, err := TLSConfig(keystoreProps(p), "SSL")
	require.NoError(t, err)
	require.Equal(t, tls.NoClientCert, cfg.ClientAuth, "ssl.client.auth defaults to none")
	require.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion, "ssl.enabled.protocols defaults to TLSv1.2,TLSv1.3")
	require.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
	require.NoError(t, handshake(t, cfg, p.ClientConfig("")), "the client verifies the broker's certificate against the CA")
}

func TestSSLClientAuthRequiredAndRequested(t *testing.T) {
	p := tlstest.New(t)
	required, err := TLSConfig(keystoreProps(p, "listener.name.ssl.ssl.client.auth", "required"), "SSL")
	require.NoError(t, err)
	require.Error(t, handshake(t, required, p.ClientConfig("")), "required: no certificate, no connection")
	require.NoError(t, handshake(t, required, p.ClientConfig("alice")))

	requested, err := TLSConfig(keystoreProps(p, KeySSLClientAuth, "requested"), "SSL")
	require.NoError(t, err)
	require.NoError(t, handshake(t, requested, p.ClientConfig("")), "requested: a certificate is optional")
	require.NoError(t, handshake(t, requested, p.ClientConfig("alice")))

	// A client certificate from another CA is checked, and refused.
	other := tlstest.New(t)
	stranger := p.ClientConfig("")
	stranger.Certificates = other.ClientConfig("alice").Certificates
	require.Error(t, handshake(t, requested, stranger))
}

func TestInlinePEMAndAnEncryptedKeyForOneListener(t *testing.T) {
	p := tlstest.New(t)
	key, _ := pem.Decode(p.ServerKeyPEM())
	encrypted := encryptPKCS8(t, key.Bytes, "key-secret")
	props := map[string]string{
		"listener.name.external.ssl.keystore.type":              "PEM",
		"listener.name.external.ssl.keystore.certificate.chain": string(p.ServerCertPEM()),
		"listener.name.external.ssl.keystore.key":               string(encrypted),
		"listener.name.external.ssl.key.password":               "key-secret",
		"ssl.keystore.type":                                     "JKS", // another listener's
	}
	cfg, err := TLSConfig(props, "EXTERNAL")
	require.NoError(t, err)
	require.NoError(t, handshake(t, cfg, p.ClientConfig("")))

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
	p := tlstest.New(t)
	only13, err := TLSConfig(keystoreProps(p, KeySSLEnabledProtocols, "TLSv1.3"), "SSL")
	require.NoError(t, err)
	old := p.ClientConfig("")
	old.MaxVersion = tls.VersionTLS12
	require.Error(t, handshake(t, only13, old), "a TLS 1.2 client meets a TLS 1.3-only listener")
	require.NoError(t, handshake(t, only13, p.ClientConfig("")))

	suite := "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	one, err := TLSConfig(keystoreProps(p, KeySSLEnabledProtocols, "TLSv1.2", KeySSLCipherSuites, suite+",TLS_AES_128_GCM_SHA256"), "SSL")
	require.NoError(t, err)
	other := p.ClientConfig("")
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	require.Error(t, handshake(t, one, other), "no cipher suite in common")
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	require.NoError(t, handshake(t, one, other))

	// Only TLS 1.3 suites named: no TLS 1.2 suite is allowed, so TLS 1.2
	// is not either (an empty list would have meant Go's whole default).
	only13Suites, err := TLSConfig(keystoreProps(p, KeySSLCipherSuites, "TLS_AES_256_GCM_SHA384"), "SSL")
	require.NoError(t, err)
	require.Error(t, handshake(t, only13Suites, old), "a TLS 1.2 client meets a listener naming only TLS 1.3 suites")
	require.NoError(t, handshake(t, only13Suites, p.ClientConfig("")))
	_, err = TLSConfig(keystoreProps(p, KeySSLEnabledProtocols, "TLSv1.2", KeySSLCipherSuites, "TLS_AES_256_GCM_SHA384"), "SSL")
	require.ErrorContains(t, err, "ssl.cipher.suites")
}

func TestTLSConfigErrorsNameTheKey(t *testing.T) {
	p := tlstest.New(t)
	otherKey := tlstest.New(t).ServerKeyPEM()
	for want, props := range map[string]map[string]string{
		"ssl.keystore.type: JKS (Kafka's default): a Java keystore cannot be read here": {KeySSLKeystoreLocation: "/etc/kafka/broker.jks"},
		"ssl.keystore.type: PKCS12: a Java keystore cannot be read here":                keystoreProps(p, KeySSLKeystoreType, "PKCS12"),
		"ssl.truststore.type: JKS":                            keystoreProps(p, KeySSLTruststoreType, "JKS"),
		"ssl.keystore.location: not set":                      {KeySSLKeystoreType: "PEM"},
		"no such file":                                        keystoreProps(p, KeySSLKeystoreLocation, "/nonexistent.pem"),
		"no PRIVATE KEY":                                      keystoreProps(p, KeySSLKeystoreLocation, p.WriteFile("nokey.pem", p.ServerCertPEM())),
		"private key does not match public key":               keystoreProps(p, KeySSLKeystoreLocation, p.WriteFile("mismatch.pem", p.ServerCertPEM(), otherKey)),
		"ssl.key.password: set, but the key is not encrypted": keystoreProps(p, KeySSLKeyPassword, "x"),
		`ssl.client.auth: "always" is not none`:               keystoreProps(p, KeySSLClientAuth, "always"),
		"needs a truststore":                                  {KeySSLKeystoreType: "PEM", KeySSLKeystoreLocation: p.WriteFile("b.pem", p.ServerKeystorePEM()), KeySSLClientAuth: "required"},
		"not a contiguous range":                              keystoreProps(p, KeySSLEnabledProtocols, "TLSv1.1,TLSv1.3"),
		`unknown protocol "SSLv3"`:                            keystoreProps(p, KeySSLEnabledProtocols, "SSLv3"),
		`unknown cipher suite "TLS_RSA_WITH_RC4_128_MD5"`:     keystoreProps(p, KeySSLCipherSuites, "TLS_RSA_WITH_RC4_128_MD5"),
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
	p := tlstest.New(t)
	props := keystoreProps(p, "listener.name.client.plain.sasl.jaas.config", testJAAS)
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
