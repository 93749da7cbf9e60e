// Package tlstest makes the certificates a test of a TLS listener needs: a
// self-signed certificate authority, a server certificate for 127.0.0.1
// and localhost, and client certificates, all made in memory with
// crypto/x509 (ECDSA P-256, valid for a day).
//
//	pki := tlstest.New(t)
//	server := pki.ServerConfig(tls.RequireAndVerifyClientCert) // a listener's *tls.Config
//	client := pki.ClientConfig("alice")                        // kgo.DialTLSConfig(client)
//
// For code that reads its certificates from files, as a broker and
// Kafka's clients do, the same certificates come in PEM: CAPEM (a
// truststore), ServerKeystorePEM and ClientKeystorePEM (a keystore with
// ssl.keystore.type=PEM), ServerCertPEM and ServerKeyPEM (the chain and
// the key apart, as ssl.keystore.certificate.chain and ssl.keystore.key
// hold them). WriteFile puts PEM into a file in a t.TempDir() and
// returns its path:
//
//	ca := pki.WriteFile("ca.pem", pki.CAPEM())                 // ssl.truststore.location
//	ks := pki.WriteFile("broker.pem", pki.ServerKeystorePEM()) // ssl.keystore.location
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a test certificate authority and the server certificate it signed.
type PKI struct {
	t      testing.TB
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	// Pool holds the CA: clients verify the server with it (RootCAs), a
	// server requiring client certificates verifies them with it
	// (ClientCAs).
	Pool *x509.CertPool
	// Server is the server's certificate, for 127.0.0.1, ::1 and localhost.
	Server tls.Certificate
}

// New makes a CA and a server certificate; it fails the test on error.
func New(t testing.TB) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "workbook test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlstest: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlstest: CA certificate: %v", err)
	}
	p := &PKI{t: t, caCert: ca, caKey: key, Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.Server = p.issue("localhost", x509.ExtKeyUsageServerAuth, []string{"localhost"},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	return p
}

// CAPEM is the CA's certificate in PEM, for clients that read it from a
// file (kcat's ssl.ca.location, Kafka's ssl.truststore with type PEM).
func (p *PKI) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.caCert.Raw})
}

// ServerCertPEM is the server's certificate chain in PEM (Kafka's
// ssl.keystore.certificate.chain).
func (p *PKI) ServerCertPEM() []byte {
	var out []byte
	for _, der := range p.Server.Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// ServerKeyPEM is the server's private key, unencrypted PKCS#8 in PEM
// (Kafka's ssl.keystore.key).
func (p *PKI) ServerKeyPEM() []byte {
	p.t.Helper()
	return p.keyPEM(p.Server)
}

// ServerKeystorePEM is the server's certificate chain and private key in
// one PEM file, as Kafka's ssl.keystore.type=PEM reads a keystore
// (KIP-651): for brokers started as processes, which read it from a file.
func (p *PKI) ServerKeystorePEM() []byte {
	p.t.Helper()
	return append(p.ServerCertPEM(), p.ServerKeyPEM()...)
}

// ClientKeystorePEM is a new client certificate for commonName and its
// private key in one PEM file: a client's ssl.keystore.location with
// ssl.keystore.type=PEM, for a listener that asks for certificates.
func (p *PKI) ClientKeystorePEM(commonName string) []byte {
	p.t.Helper()
	c := p.issue(commonName, x509.ExtKeyUsageClientAuth, nil, nil)
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), p.keyPEM(c)...)
}

// WriteFile writes data, one PEM block after another, into a file name
// in a new t.TempDir() and returns the file's path.
func (p *PKI) WriteFile(name string, data ...[]byte) string {
	p.t.Helper()
	path := filepath.Join(p.t.TempDir(), name)
	var all []byte
	for _, d := range data {
		all = append(all, d...)
	}
	if err := os.WriteFile(path, all, 0o600); err != nil {
		p.t.Fatalf("tlstest: %v", err)
	}
	return path
}

// keyPEM is c's private key as unencrypted PKCS#8 in PEM.
func (p *PKI) keyPEM(c tls.Certificate) []byte {
	p.t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		p.t.Fatalf("tlstest: private key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
}

// ServerConfig is a listener's TLS configuration: the server certificate,
// and client certificates verified against the CA as clientAuth says
// (tls.NoClientCert, tls.RequireAndVerifyClientCert, ...; Kafka's
// ssl.client.auth=none, required, requested).
func (p *PKI) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Server}, ClientAuth: clientAuth, ClientCAs: p.Pool,
		MinVersion: tls.VersionTLS12}
}

// ClientConfig is a client's TLS configuration trusting the CA, with a
// client certificate for commonName (its subject, CN=commonName), or none
// when commonName is "".
func (p *PKI) ClientConfig(commonName string) *tls.Config {
	c := &tls.Config{RootCAs: p.Pool, MinVersion: tls.VersionTLS12}
	if commonName != "" {
		c.Certificates = []tls.Certificate{p.issue(commonName, x509.ExtKeyUsageClientAuth, nil, nil)}
	}
	return c
}

// issue signs a certificate for commonName with the CA.
func (p *PKI) issue(commonName string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) tls.Certificate {
	p.t.Helper()
	key := newKey(p.t)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		p.t.Fatalf("tlstest: serial: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatalf("tlstest: certificate for %s: %v", commonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlstest: key: %v", err)
	}
	return key
}
