package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
)

// startTLSBroker starts a broker with a PLAINTEXT and an SSL listener whose
// TLS configuration is server, on the network server factory.
func startTLSBroker(t *testing.T, server *tls.Config, factory func(network.Config, network.Handler) (*network.Server, error), opts Options) *testBroker {
	t.Helper()
	opts.ServerFactory = factory
	opts.PerListener.TLS = func(l Listener) (*tls.Config, error) {
		require.Equal(t, "SSL", l.Name)
		return server, nil
	}
	return startBrokerWith(t, opts, "listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0")
}

// port is the port of a listener's address.
func port(t *testing.T, a net.Addr) int32 {
	_, p, err := net.SplitHostPort(a.String())
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return int32(n)
}

// metadataBrokers asks cl for metadata and returns the brokers it lists.
func metadataBrokers(t *testing.T, cl *kgo.Client) []kmsg.MetadataResponseBroker {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
	return resp.Brokers
}

// On both network servers (the reactor serves PLAINTEXT and hands SSL to
// the portable transport), franz-go over TLS produces, and consumes what
// it produced: fetch responses' file regions are copied through TLS.
func TestFranzGoProducesAndConsumesOverTLS(t *testing.T) {
	pki := tlstest.New(t)
	for _, srv := range benchServers {
		t.Run(srv.name, func(t *testing.T) {
			tb := startTLSBroker(t, pki.ServerConfig(tls.NoClientCert), srv.factory, Options{})
			sslAddr := tb.ListenerAddr("SSL").String()
			cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(pki.ClientConfig("")),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.AllowAutoTopicCreation())
			require.NoError(t, err)
			defer cl.Close()

			var values []string
			for i := range 200 {
				values = append(values, fmt.Sprintf("secret-%03d", i))
			}
			produceRecords(t, cl, "tls-topic", 0, values...)

			consumer, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(pki.ClientConfig("")),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tls-topic": {0: kgo.NewOffset().AtStart()}}))
			require.NoError(t, err)
			defer consumer.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var got []string
			for len(got) < len(values) {
				fetches := consumer.PollFetches(ctx)
				require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), len(values))
				require.Empty(t, fetches.Errors())
				for _, r := range fetches.Records() {
					got = append(got, string(r.Value))
				}
			}
			require.Equal(t, values, got)

			// The plaintext listener serves the same log.
			plain := consumeAll(t, tb, "tls-topic", 1, len(values))
			require.Equal(t, string(plain[199].Value), "secret-199")
		})
	}
}

// Metadata answers with the address of the listener it was asked on, as
// Kafka does: a client that bootstrapped over TLS stays on TLS.
func TestMetadataAnswersTheListenerItWasAskedOn(t *testing.T) {
	pki := tlstest.New(t)
	tb := startTLSBroker(t, pki.ServerConfig(tls.NoClientCert), network.NewServer, Options{})
	sslPort, plainPort := port(t, tb.ListenerAddr("SSL")), port(t, tb.ListenerAddr("PLAINTEXT"))
	require.NotEqual(t, sslPort, plainPort)

	tlsClient, err := kgo.NewClient(kgo.SeedBrokers(tb.ListenerAddr("SSL").String()), kgo.DialTLSConfig(pki.ClientConfig("")))
	require.NoError(t, err)
	defer tlsClient.Close()
	brokers := metadataBrokers(t, tlsClient)
	require.Len(t, brokers, 1)
	require.Equal(t, "127.0.0.1", brokers[0].Host)
	require.Equal(t, sslPort, brokers[0].Port)

	brokers = metadataBrokers(t, tb.client())
	require.Len(t, brokers, 1)
	require.Equal(t, plainPort, brokers[0].Port)
	require.Equal(t, tb.ListenerAddr("PLAINTEXT"), tb.Addr(), "Addr is the inter-broker listener's, PLAINTEXT")
}

// A client speaking plaintext to the TLS port fails the handshake and is
// closed; nothing it sent reaches a handler, and the broker goes on
// serving both listeners.
func TestPlaintextClientOnTLSListenerIsClosed(t *testing.T) {
	pki := tlstest.New(t)
	var handled sync.Map // listener -> true, for every request a handler saw
	tb := startTLSBroker(t, pki.ServerConfig(tls.NoClientCert), network.NewServer, Options{PerListener: ListenerOptions{
		WrapHandler: func(l Listener, next network.Handler) network.Handler {
			return network.HandlerFunc(func(r *network.Request) {
				handled.Store(r.Listener, true)
				next.Handle(r)
			})
		},
	}})
	c, err := net.Dial("tcp", tb.ListenerAddr("SSL").String())
	require.NoError(t, err)
	defer c.Close()
	raw := &rawConn{t: t, conn: c}
	raw.send(kmsg.NewPtrApiVersionsRequest(), 1)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, c) // at most a TLS alert, then the end
	var ne net.Error
	require.False(t, err != nil && errors.As(err, &ne) && ne.Timeout(), "the broker did not close the connection")
	_, sawSSL := handled.Load("SSL")
	require.False(t, sawSSL, "a plaintext request on the TLS listener reached a handler")

	brokers := metadataBrokers(t, tb.client())
	require.Equal(t, port(t, tb.ListenerAddr("PLAINTEXT")), brokers[0].Port)
	tlsClient, err := kgo.NewClient(kgo.SeedBrokers(tb.ListenerAddr("SSL").String()), kgo.DialTLSConfig(pki.ClientConfig("")))
	require.NoError(t, err)
	defer tlsClient.Close()
	require.Equal(t, port(t, tb.ListenerAddr("SSL")), metadataBrokers(t, tlsClient)[0].Port)
}

// With client authentication required (Kafka's ssl.client.auth=required),
// a client without a certificate is refused; one with a certificate the CA
// signed is served, and its requests carry its certificate and their
// listener to the handler in front of the listener (Options.WrapHandler,
// where final authenticates).
func TestRequiredClientAuthRefusesClientWithoutCertificate(t *testing.T) {
	pki := tlstest.New(t)
	var mu sync.Mutex
	var seen []string // listener, protocol and client CN of each request on SSL
	tb := startTLSBroker(t, pki.ServerConfig(tls.RequireAndVerifyClientCert), network.NewServer, Options{PerListener: ListenerOptions{
		WrapHandler: func(l Listener, next network.Handler) network.Handler {
			if l.Name != "SSL" {
				return next
			}
			return network.HandlerFunc(func(r *network.Request) {
				cn := "none"
				if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
					cn = r.TLS.PeerCertificates[0].Subject.CommonName
				}
				mu.Lock()
				seen = append(seen, r.Listener+"/"+r.SecurityProtocol+"/"+cn)
				mu.Unlock()
				next.Handle(r)
			})
		},
	}})
	sslAddr := tb.ListenerAddr("SSL").String()

	anonymous, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(pki.ClientConfig("")),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	require.NoError(t, err)
	defer anonymous.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, anonymous)
	require.Error(t, err, "a client without a certificate was served")

	alice, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(pki.ClientConfig("alice")))
	require.NoError(t, err)
	defer alice.Close()
	require.Equal(t, port(t, tb.ListenerAddr("SSL")), metadataBrokers(t, alice)[0].Port)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	for _, s := range seen {
		require.Equal(t, "SSL/SSL/alice", s)
	}
}

// kcat (librdkafka, OpenSSL) produces and consumes over the SSL listener,
// verifying the broker's certificate against the test's CA, and is told
// the SSL port in Metadata.
func TestKcatOverTLS(t *testing.T) {
	kcat := kcatPath(t)
	pki := tlstest.New(t)
	tb := startTLSBroker(t, pki.ServerConfig(tls.NoClientCert), network.NewServer, Options{})
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, pki.CAPEM(), 0o644))
	sslAddr := tb.ListenerAddr("SSL").String()
	args := func(more ...string) []string {
		return append([]string{"-b", sslAddr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + ca}, more...)
	}
	var lines []string
	for i := range 100 {
		lines = append(lines, fmt.Sprintf("encrypted line %d", i))
	}
	input := filepath.Join(dir, "lines.txt")
	require.NoError(t, os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	out, err := exec.Command(kcat, args("-P", "-t", "tls-lines", "-l", input)...).CombinedOutput()
	require.NoError(t, err, "kcat -P: %s", out)

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kcat, args("-C", "-t", "tls-lines", "-o", "beginning", "-e", "-f", "%s\n")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat -C: %s", stderr.String())
	require.Equal(t, lines, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"))

	out, err = exec.Command(kcat, args("-L")...).CombinedOutput()
	require.NoError(t, err, "kcat -L: %s", out)
	require.Contains(t, string(out), "broker 0 at "+sslAddr)
}

// An SSL listener without a TLS configuration does not start: the error
// names the listener.
func TestSSLListenerWithoutTLSConfigDoesNotStart(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	_, err = New(cfg, Options{Logger: quietLogger})
	require.ErrorContains(t, err, "listener SSL (SSL): no TLS configuration")
}
