package security

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

var quietLogger = slog.New(slog.DiscardHandler)

// The users of the tests' JAAS config and credential cache.
const (
	testJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret"
		user_admin="admin-secret" user_alice="alice-secret";`
)

// gatedBroker is a stage 02 broker whose only listener is behind a SASL
// gate: every connection a client makes to it, the seed's and those to
// the addresses Metadata advertises, goes through the gate.
type gatedBroker struct {
	*broker.Broker
	gate *Gate
}

// testSASLConfig is a listener enabling the three mechanisms, with alice
// as a PLAIN user and as a SCRAM user of both hashes.
func testSASLConfig(t *testing.T) *SASLConfig {
	t.Helper()
	cfg, err := ParseSASLConfig(map[string]string{
		KeySASLEnabledMechanisms:                              "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": testJAAS,
	}, "SASL_PLAINTEXT", NewCredentialCache())
	require.NoError(t, err)
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		cred, err := NewScramCredential(mech, "alice-secret", 4096)
		require.NoError(t, err)
		cfg.Scram.(*CredentialCache).Set(mech, "alice", cred)
	}
	cfg.Logger = quietLogger
	return cfg
}

// startGatedBroker starts a broker on 127.0.0.1 with the SASL APIs
// registered and its network handler wrapped by a gate; setup, if given,
// adjusts the gate before the broker starts.
func startGatedBroker(t *testing.T, cfg *SASLConfig, setup ...func(g *Gate)) *gatedBroker {
	t.Helper()
	return startGatedBrokerWith(t, cfg, nil, setup...)
}

// startGatedBrokerWith is startGatedBroker with more broker properties.
func startGatedBrokerWith(t *testing.T, cfg *SASLConfig, props map[string]string, setup ...func(g *Gate)) *gatedBroker {
	t.Helper()
	all := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "kafka-logs"),
	}
	maps.Copy(all, props)
	bcfg, err := broker.ParseConfig(all, quietLogger)
	require.NoError(t, err)
	gb := &gatedBroker{}
	b, err := broker.New(bcfg, broker.Options{Logger: quietLogger,
		ServerFactory: func(nc network.Config, h network.Handler) (*network.Server, error) {
			gb.gate = NewSASLGate(cfg, h)
			for _, f := range setup {
				f(gb.gate)
			}
			return network.NewServer(nc, gb.gate)
		}})
	require.NoError(t, err)
	for _, api := range APIs() {
		b.Register(api)
	}
	require.NoError(t, b.Start())
	gb.Broker = b
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Shutdown(ctx))
	})
	return gb
}

func (gb *gatedBroker) addr() string { return gb.Addr().String() }

// client is a franz-go client authenticating with mech.
func (gb *gatedBroker) client(t *testing.T, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(gb.addr()), kgo.SASL(mech)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a one-partition topic through cl, an authenticated
// client: CreateTopics is gated like any other request.
func createTopic(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
}

// rawConn speaks the protocol by hand, one request at a time, so that a
// test can send what no well-behaved client sends.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
}

func (gb *gatedBroker) dial(t *testing.T) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", gb.addr(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// send writes req at version v.
func (c *rawConn) send(req kmsg.Request, v int16) {
	c.t.Helper()
	req.SetVersion(v)
	c.corr++
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.nc.Write(c.fmt.AppendRequest(nil, req, c.corr))
	require.NoError(c.t, err)
}

// frame reads one size-prefixed frame.
func (c *rawConn) frame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.r, b)
	return b, err
}

// roundTrip sends req at version v and reads its response.
func (c *rawConn) roundTrip(req kmsg.Request, v int16) kmsg.Response {
	c.t.Helper()
	c.send(req, v)
	b, err := c.frame()
	require.NoError(c.t, err, "%s v%d: no response", kmsg.NameForKey(req.Key()), v)
	require.Equal(c.t, c.corr, int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	if req.IsFlexible() && req.Key() != keyApiVersions {
		b = b[1:] // an empty tag section
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	require.NoError(c.t, resp.ReadFrom(b))
	return resp
}

// expectClosed checks that the broker closed the connection, without
// answering anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	b, err := c.frame()
	require.Error(c.t, err, "the connection is still open: got a %d-byte frame", len(b))
	var ne net.Error
	if errors.As(err, &ne) {
		require.False(c.t, ne.Timeout(), "the connection is still open after 10 s")
	}
}

// handshake sends SaslHandshake v1 for mech and requires NONE.
func (c *rawConn) handshake(mech string) {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mech
	resp := c.roundTrip(req, 1).(*kmsg.SASLHandshakeResponse)
	require.Zero(c.t, resp.ErrorCode)
}

// authenticate sends one SaslAuthenticate v2.
func (c *rawConn) authenticate(token []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = token
	return c.roundTrip(req, 2).(*kmsg.SASLAuthenticateResponse)
}

// plainLogin authenticates with PLAIN over SaslHandshake v1.
func (c *rawConn) plainLogin(user, password string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	c.handshake(PLAIN)
	return c.authenticate([]byte("\x00" + user + "\x00" + password))
}

// metadata asks for the broker list: a request only an authenticated
// connection may make.
func (c *rawConn) metadata() *kmsg.MetadataResponse {
	c.t.Helper()
	return c.roundTrip(kmsg.NewPtrMetadataRequest(), 9).(*kmsg.MetadataResponse)
}

// logRecorder is a slog handler that keeps every record's message and
// attributes, for tests that check what the gate logged.
type logRecorder struct {
	mu    *sync.Mutex
	lines *[]string
}

func newLogRecorder() logRecorder { return logRecorder{mu: new(sync.Mutex), lines: new([]string)} }

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, line)
	h.mu.Unlock()
	return nil
}
func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecorder) WithGroup(string) slog.Handler      { return h }

// count is how many lines contain all of words.
func (h logRecorder) count(words ...string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range *h.lines {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			n++
		}
	}
	return n
}
