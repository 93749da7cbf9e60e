package security

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// roundTripRecords produces n records with cl and consumes them back with
// a second client of the same mechanism.
func roundTripRecords(t *testing.T, gb *gatedBroker, mech sasl.Mechanism, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	producer := gb.client(t, mech)
	createTopic(t, producer, topic)
	for i := range n {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "record %d", i)}).FirstErr())
	}
	consumer := gb.client(t, mech, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(got), n)
		for _, err := range fs.Errors() {
			require.NoError(t, err.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i := range n {
		require.Equal(t, fmt.Sprintf("record %d", i), got[i])
	}
}

func TestFranzGoProducesAndConsumesThroughTheGateWithEachMechanism(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	for name, mech := range map[string]sasl.Mechanism{
		PLAIN:       plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		ScramSHA256: scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(),
		ScramSHA512: scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
	} {
		t.Run(name, func(t *testing.T) {
			roundTripRecords(t, gb, mech, "orders-"+strings.ToLower(name), 20)
		})
	}
}

func TestFranzGoWithAWrongPasswordGetsSaslAuthenticationFailed(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	for name, mech := range map[string]sasl.Mechanism{
		PLAIN:       plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		ScramSHA256: scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism(),
		ScramSHA512: scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl := gb.client(t, mech, kgo.RequestRetries(0))
			err := cl.Ping(ctx)
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		})
	}
}

func TestAWrongPasswordIsAnsweredWithKafkasMessageThenTheConnectionCloses(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))

	c := gb.dial(t)
	resp := c.plainLogin("alice", "wrong")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.Equal(t, "Authentication failed: Invalid username or password", *resp.ErrorMessage)
	c.expectClosed()

	// SCRAM's failures say nothing about whether the user exists.
	c = gb.dial(t)
	c.handshake(ScramSHA256)
	resp = c.authenticate([]byte("n,,n=mallory,r=abcdef"))
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.Equal(t, "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256", *resp.ErrorMessage)
	c.expectClosed()
}

func TestARequestBeforeAuthenticationClosesTheConnection(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))

	for name, first := range map[string]func(c *rawConn){
		"at once":             func(*rawConn) {},
		"after ApiVersions":   func(c *rawConn) { c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3) },
		"after the handshake": func(c *rawConn) { c.handshake(PLAIN) },
	} {
		t.Run(name, func(t *testing.T) {
			c := gb.dial(t)
			first(c)
			req := kmsg.NewPtrProduceRequest()
			req.Acks = -1
			req.TimeoutMillis = 1000
			req.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}}}
			c.send(req, 7)
			c.expectClosed()
		})
	}
	require.Empty(t, gb.Store().TopicNames(), "nothing reached the broker: not even auto-creation")

	// ApiVersions at a version the broker does not serve is answered with
	// UNSUPPORTED_VERSION, and the client asks again (KIP-511).
	c := gb.dial(t)
	resp := c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	c.send(kmsg.NewPtrApiVersionsRequest(), 99)
	b, err := c.frame()
	require.NoError(t, err)
	v0 := kmsg.NewPtrApiVersionsResponse()
	require.NoError(t, v0.ReadFrom(b[4:]))
	require.Equal(t, kerr.UnsupportedVersion.Code, v0.ErrorCode)
	require.Zero(t, c.plainLogin("alice", "alice-secret").ErrorCode)
}

func TestApiVersionsBeforeAuthenticationAdvertisesTheSASLAPIs(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	resp := gb.dial(t).roundTrip(kmsg.NewPtrApiVersionsRequest(), 3).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	versions := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	require.Equal(t, [2]int16{0, 1}, versions[keySaslHandshake], "SaslHandshake v0-v1, as Kafka 3.9")
	require.Equal(t, [2]int16{0, 2}, versions[keySaslAuthenticate], "SaslAuthenticate v0-v2, as Kafka 3.9")
	require.Contains(t, versions, int16(3), "the broker's own APIs, from its table")
}

func TestAnUnknownMechanismIsRefusedWithTheEnabledOnes(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	c := gb.dial(t)
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = "GSSAPI"
	resp := c.roundTrip(req, 1).(*kmsg.SASLHandshakeResponse)
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode)
	require.Equal(t, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, resp.SupportedMechanisms)
	c.expectClosed()
}

func TestAnAuthenticatedConnectionIsServedAndSaslAgainIsIllegal(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	c := gb.dial(t)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	resp := c.plainLogin("alice", "alice-secret")
	require.Zero(t, resp.ErrorCode)
	require.Zero(t, resp.SessionLifetimeMillis, "connections.max.reauth.ms is 0: no session lifetime")
	require.NotEmpty(t, c.metadata().Brokers)

	// Without a session lifetime there is no re-authentication: the
	// broker answers a handshake ILLEGAL_SASL_STATE, as Kafka's KafkaApis.
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = PLAIN
	require.Equal(t, kerr.IllegalSaslState.Code, c.roundTrip(req, 1).(*kmsg.SASLHandshakeResponse).ErrorCode)
	auth := c.authenticate([]byte("\x00alice\x00alice-secret"))
	require.Equal(t, kerr.IllegalSaslState.Code, auth.ErrorCode)
	require.NotEmpty(t, c.metadata().Brokers, "and the connection still serves")
}

// SaslHandshake v0: the mechanism's tokens follow as bare frames, with no
// request header (Kafka before KIP-152, still served by Kafka 3.9).
func TestHandshakeV0CarriesBareTokens(t *testing.T) {
	gb := startGatedBroker(t, testSASLConfig(t))
	c := gb.dial(t)
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = PLAIN
	require.Zero(t, c.roundTrip(req, 0).(*kmsg.SASLHandshakeResponse).ErrorCode)
	token := []byte("\x00alice\x00alice-secret")
	_, err := c.nc.Write(append([]byte{0, 0, 0, byte(len(token))}, token...))
	require.NoError(t, err)
	answer, err := c.frame()
	require.NoError(t, err)
	require.Empty(t, answer, "PLAIN's answer is an empty token")
	require.NotEmpty(t, c.metadata().Brokers)

	// A wrong password: no way to say why, the connection just closes.
	c = gb.dial(t)
	require.Zero(t, c.roundTrip(req, 0).(*kmsg.SASLHandshakeResponse).ErrorCode)
	token = []byte("\x00alice\x00wrong")
	_, err = c.nc.Write(append([]byte{0, 0, 0, byte(len(token))}, token...))
	require.NoError(t, err)
	c.expectClosed()
}

// connections.max.reauth.ms (KIP-368): the client learns its session's
// lifetime, re-authenticates on the connection before it ends, and a
// connection that does not is closed at its next request.
func TestASessionEndsAfterConnectionsMaxReauthMs(t *testing.T) {
	cfg := testSASLConfig(t)
	cfg.MaxReauth[PLAIN] = time.Minute
	var clock atomic.Int64 // nanoseconds since start; the gate's clock
	start := time.Now()
	gb := startGatedBroker(t, cfg, func(g *Gate) {
		g.now = func() time.Time { return start.Add(time.Duration(clock.Load())) }
	})

	c := gb.dial(t)
	resp := c.plainLogin("alice", "alice-secret")
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, int64(60000), resp.SessionLifetimeMillis)
	require.NotEmpty(t, c.metadata().Brokers)

	// Re-authentication on the connection, as the same user.
	clock.Add(int64(59 * time.Second))
	resp = c.plainLogin("alice", "alice-secret")
	require.Zero(t, resp.ErrorCode)
	clock.Add(int64(59 * time.Second))
	require.NotEmpty(t, c.metadata().Brokers, "the new session runs from the re-authentication")

	// Another user may not take the connection over.
	clock.Add(int64(2 * time.Second))
	resp = c.plainLogin("admin", "admin-secret")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
	require.Equal(t, "Cannot change principals during re-authentication from User.alice: User.admin", *resp.ErrorMessage)
	c.expectClosed()

	// A session that ran out is closed at its next request.
	c = gb.dial(t)
	require.Zero(t, c.plainLogin("alice", "alice-secret").ErrorCode)
	clock.Add(int64(61 * time.Second))
	c.send(kmsg.NewPtrMetadataRequest(), 9)
	c.expectClosed()
}

func TestFranzGoReauthenticatesWhenTheSessionEnds(t *testing.T) {
	cfg := testSASLConfig(t)
	cfg.MaxReauth[ScramSHA512] = 1500 * time.Millisecond
	log := newLogRecorder()
	cfg.Logger = slog.New(log)
	gb := startGatedBroker(t, cfg)
	cl := gb.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	createTopic(t, cl, "reauth")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// franz-go re-authenticates before a request once its session is
	// close to its end; requests spread over three lifetimes all succeed.
	deadline := time.Now().Add(4500 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("x")}).FirstErr())
		n++
	}
	require.Greater(t, n, 3)
	require.Positive(t, log.count("authenticated", "reauthentication=true"), "franz-go re-authenticated on its connection")
	require.Zero(t, log.count("session expired"), "no connection outlived its session")
}

func TestUserReportsTheAuthenticatedUser(t *testing.T) {
	users := make(chan string, 10)
	gb := startGatedBroker(t, testSASLConfig(t), func(g *Gate) {
		inner := g.next
		g.next = network.HandlerFunc(func(r *network.Request) {
			u, _ := User(r)
			users <- u
			inner.Handle(r)
		})
	})
	c := gb.dial(t)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 3)
	require.Equal(t, "", <-users, "ApiVersions before authentication: nobody")
	require.Zero(t, c.plainLogin("alice", "alice-secret").ErrorCode)
	c.metadata()
	require.Equal(t, "alice", <-users)
}
