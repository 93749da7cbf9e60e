package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkaworkbook/workbook/stage02-reactor/tlstest"
)

// startTLSTerminator listens with cfg on 127.0.0.1 and relays each
// connection's plaintext to the address backend returns: a SASL_SSL
// listener made of TLSConfig's config in front of a gated broker, until
// stage 02's network server serves TLS itself.
func startTLSTerminator(t *testing.T, cfg *tls.Config) (addr string, setBackend func(string)) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var mu sync.Mutex
	var backend string
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			to := backend
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				b, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer b.Close()
				wg.Go(func() { io.Copy(b, c); b.Close() })
				io.Copy(c, b)
			})
		}
	})
	return ln.Addr().String(), func(s string) { mu.Lock(); backend = s; mu.Unlock() }
}

// SASL_SSL: TLS from TLSConfig, SCRAM inside it. The broker advertises the
// TLS address, so every connection of franz-go and of kcat is encrypted
// and authenticated.
func TestFranzGoAndKcatOverSASLSSL(t *testing.T) {
	p := tlstest.New(t)
	tlsCfg, err := TLSConfig(keystoreProps(p), "SASL_SSL")
	require.NoError(t, err)
	addr, setBackend := startTLSTerminator(t, tlsCfg)
	_, port, _ := net.SplitHostPort(addr)
	gb := startGatedBrokerWith(t, testSASLConfig(t), map[string]string{"advertised.listeners": "PLAINTEXT://127.0.0.1:" + port})
	setBackend(gb.addr())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(p.ClientConfig("")),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	require.NoError(t, err)
	defer cl.Close()
	createTopic(t, cl, "secure")
	for i := range 10 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: fmt.Appendf(nil, "secret %d", i)}).FirstErr())
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kcatPath(t), "-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+p.WriteFile("kcat-ca.pem", p.CAPEM()),
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
		"-C", "-t", "secure", "-o", "beginning", "-e", "-f", "%s\n")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat -C: %s", stderr.String())
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	require.Len(t, lines, 10)
	require.Equal(t, "secret 9", lines[9])
}
