package compat_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkaworkbook/workbook/final/security"
	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// securedCluster is two final brokers with four listeners each: PLAINTEXT
// (between brokers), SSL, SASL_SSL and SASL_PLAINTEXT, from PEM files
// and JAAS lines as an operator writes them in server.properties.
type securedCluster struct {
	*brokertest.Cluster
	zk    *kafkazk.Client
	caPEM string // the CA's file, for kcat
	ca    *tls.Config
}

// addrs are the brokers' addresses on a listener, from their registrations.
func (c *securedCluster) addrs(t *testing.T, listener string) []string {
	t.Helper()
	brokers, err := c.zk.Brokers()
	require.NoError(t, err)
	var out []string
	for _, b := range brokers {
		for _, e := range b.Endpoints {
			if e.Listener == listener {
				out = append(out, fmt.Sprintf("%s:%d", e.Host, e.Port))
			}
		}
	}
	require.Len(t, out, len(brokers), "every broker registered %s", listener)
	slices.Sort(out)
	return out
}

func startSecuredCluster(t *testing.T) *securedCluster {
	t.Helper()
	dir := t.TempDir()
	pki := tlstest.New(t)
	keystore, ca := filepath.Join(dir, "broker.pem"), filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(keystore, pki.ServerKeystorePEM(), 0o600))
	require.NoError(t, os.WriteFile(ca, pki.CAPEM(), 0o644))
	ens := zktest.StartStandalone(t)
	zk, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(zk.Close)
	require.NoError(t, zk.CreateTopLevelPaths())
	// bob exists before the brokers start; carol is added while they run.
	require.NoError(t, security.AddScramCredential(zk, "bob", security.ScramSHA512, "bob-secret", 4096))
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`
	c := brokertest.Start(t, ens, 2, map[string]string{
		"listeners":                                           "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name":                          "PLAINTEXT",
		"ssl.keystore.type":                                   "PEM",
		"ssl.keystore.location":                               keystore,
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":       jaas,
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
		"offsets.topic.replication.factor":                    "2",
	})
	return &securedCluster{Cluster: c, zk: zk, caPEM: ca, ca: pki.ClientConfig("")}
}

// roundTrip creates a topic through a client with opts, produces three
// records acks=all and reads them back, all on the client's listener.
func roundTrip(t *testing.T, topic string, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The topic is created first, by a client that does not consume: a
	// consumer's Metadata request would have the broker create it with
	// its defaults (auto.create.topics.enable, as Kafka), and this
	// CreateTopics would find it there.
	admin, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 2
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 30000
	resp, err := req.RequestWith(ctx, admin)
	admin.Close()
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	want := []string{topic + " one", topic + " two", topic + " three"}
	for _, v := range want {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr())
	}
	var got []string
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), len(want))
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.Equal(t, want, got)
}

// requireClosedSoon writes b to a new connection to addr and requires the
// broker to close it within five seconds without answering.
func requireClosedSoon(t *testing.T, addr string, b []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write(b)
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := io.Copy(io.Discard, nc) // until the broker closes
	require.NoError(t, err, "the broker closed the connection (not our deadline)")
	require.LessOrEqual(t, n, int64(7), "no answer, at most a TLS alert")
}

// metadataAddrs are the broker addresses a client on seeds is told.
func metadataAddrs(t *testing.T, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	var out []string
	for _, b := range m.Brokers {
		out = append(out, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	slices.Sort(out)
	return out
}

// TestSecurityListeners: TLS and SASL on the final broker as issue 14
// asks: each listener serves clients with the right credentials and is
// told its own listener's addresses, refuses the wrong ones
// (SASL_AUTHENTICATION_FAILED, a closed connection), closes a plaintext
// client on a TLS port, and lets in a SCRAM user added to ZooKeeper while
// the brokers run.
func TestSecurityListeners(t *testing.T) {
	c := startSecuredCluster(t)
	ssl, saslSSL, saslPlain := c.addrs(t, "SSL"), c.addrs(t, "SASL_SSL"), c.addrs(t, "SASL_PLAINTEXT")
	alice := plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()

	t.Run("SSL", func(t *testing.T) {
		opts := []kgo.Opt{kgo.SeedBrokers(ssl[0]), kgo.DialTLSConfig(c.ca.Clone())}
		require.Equal(t, ssl, metadataAddrs(t, opts...), "a client on SSL is told the SSL addresses")
		roundTrip(t, "over-ssl", opts...)
	})
	t.Run("SASL_SSL with PLAIN", func(t *testing.T) {
		opts := []kgo.Opt{kgo.SeedBrokers(saslSSL[0]), kgo.DialTLSConfig(c.ca.Clone()), kgo.SASL(alice)}
		require.Equal(t, saslSSL, metadataAddrs(t, opts...))
		roundTrip(t, "over-sasl-ssl", opts...)
	})
	t.Run("SASL_PLAINTEXT with SCRAM-SHA-512 from ZooKeeper", func(t *testing.T) {
		roundTrip(t, "over-sasl-plaintext", kgo.SeedBrokers(saslPlain[0]), kgo.SASL(bob))
	})
	t.Run("wrong password is SASL_AUTHENTICATION_FAILED", func(t *testing.T) {
		for name, mech := range map[string]kgo.Opt{
			"PLAIN": kgo.SASL(plain.Auth{User: "alice", Pass: "guess"}.AsMechanism()),
			"SCRAM": kgo.SASL(scram.Auth{User: "bob", Pass: "guess"}.AsSha512Mechanism()),
		} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(saslPlain[0]), mech, kgo.RequestRetries(0))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			cancel()
			cl.Close()
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, name)
		}
	})
	t.Run("plaintext on a TLS port is closed, others are served", func(t *testing.T) {
		// An ApiVersions v0 request, in plaintext: the TLS server reads it
		// as a broken record and closes, long before its 10 s handshake
		// timeout would.
		requireClosedSoon(t, ssl[0], []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0})
		require.Equal(t, ssl, metadataAddrs(t, kgo.SeedBrokers(ssl[0]), kgo.DialTLSConfig(c.ca.Clone())))
	})
	t.Run("before authentication a large request closes the connection", func(t *testing.T) {
		// sasl.server.max.receive.size (524288): a size prefix of 1 MiB
		// from a client that has not authenticated is refused at once,
		// before the broker reserves memory for it.
		requireClosedSoon(t, saslPlain[0], []byte{0, 16, 0, 0, 0, 18})
		roundTrip(t, "after-a-large-request", kgo.SeedBrokers(saslPlain[0]), kgo.SASL(bob))
	})
	t.Run("a SCRAM user added in ZooKeeper logs in without a restart", func(t *testing.T) {
		require.NoError(t, security.AddScramCredential(c.zk, "carol", security.ScramSHA256, "carol-secret", 8192))
		carol := kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism())
		require.Eventually(t, func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(saslSSL...), kgo.DialTLSConfig(c.ca.Clone()), carol, kgo.RequestRetries(0))
			if err != nil {
				return false
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			return err == nil
		}, 30*time.Second, 200*time.Millisecond, "carol never got in")
	})
	t.Run("kcat over SASL_SSL with SCRAM", func(t *testing.T) {
		cmd := exec.Command(kcat(t), "-b", strings.Join(saslSSL, ","), "-C", "-t", "over-sasl-ssl", "-o", "beginning", "-e",
			"-f", "%s\n", "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+c.caPEM,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s", stderr.String())
		require.Equal(t, "over-sasl-ssl one\nover-sasl-ssl two\nover-sasl-ssl three\n", string(out))
		out, err = exec.Command(kcat(t), "-b", saslSSL[0], "-L", "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+c.caPEM,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=bob", "-X", "sasl.password=wrong", "-m", "10").CombinedOutput()
		require.Error(t, err, "kcat with a wrong password lists nothing: %s", out)
		require.Contains(t, string(out), "Authentication failed")
	})
}
