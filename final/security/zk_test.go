package security

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// connectZK opens a kafkazk session on a real ZooKeeper, with Kafka's
// persistent paths, as a starting broker does.
func connectZK(t *testing.T, ens *zktest.Ensemble) *kafkazk.Client {
	t.Helper()
	z, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout, Logger: quietLogger})
	require.NoError(t, err)
	t.Cleanup(z.Close)
	require.NoError(t, z.CreateTopLevelPaths())
	return z
}

// ping authenticates a fresh franz-go client and asks for metadata.
func ping(gb *gatedBroker, mech sasl.Mechanism) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(gb.addr()), kgo.SASL(mech), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Ping(ctx)
}

// A SCRAM user written into ZooKeeper, as kafka-configs.sh writes it, logs
// in without the broker restarting; a user there before the broker
// started logs in too, and a deleted credential stops working.
func TestAScramUserAddedInZooKeeperLogsInWithoutARestart(t *testing.T) {
	ens := zktest.StartStandalone(t)
	admin := connectZK(t, ens)
	require.NoError(t, AddScramCredential(admin, "alice", ScramSHA512, "alice-secret", 8192))

	creds, err := WatchZKCredentials(connectZK(t, ens), quietLogger)
	require.NoError(t, err)
	t.Cleanup(creds.Stop)
	cfg, err := ParseSASLConfig(map[string]string{KeySASLEnabledMechanisms: "SCRAM-SHA-256,SCRAM-SHA-512"}, "SASL_PLAINTEXT", creds)
	require.NoError(t, err)
	cfg.Logger = quietLogger
	gb := startGatedBroker(t, cfg)

	require.NoError(t, ping(gb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()), "a user from before the start")
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()
	require.ErrorIs(t, ping(gb, bob), kerr.SaslAuthenticationFailed)

	require.NoError(t, AddScramCredential(admin, "bob", ScramSHA256, "bob-secret", 0))
	raw, _, err := admin.Conn().Get(kafkazk.ConfigUserPath("bob"))
	require.NoError(t, err)
	require.Regexp(t, `^\{"version":1,"config":\{"SCRAM-SHA-256":"salt=[^,]+,stored_key=[^,]+,server_key=[^,]+,iterations=4096"\}\}$`, string(raw),
		"the znode kafka-configs.sh writes")
	require.Eventually(t, func() bool { return ping(gb, bob) == nil }, 20*time.Second, 50*time.Millisecond,
		"bob's credential reaches the broker through /config/changes")

	require.NoError(t, DeleteScramCredential(admin, "bob", ScramSHA256))
	require.Eventually(t, func() bool { return ping(gb, bob) != nil }, 20*time.Second, 50*time.Millisecond,
		"a deleted credential stops working")
	require.NoError(t, ping(gb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()), "alice is untouched")
}
