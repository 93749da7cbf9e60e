package admin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestConfigsAlterAndDescribeTopicAndBrokerConfigsLikeKafkaConfigs:
// --add-config and --delete-config change exactly the named keys of a
// topic and of a broker (IncrementalAlterConfigs), --describe prints
// them as kafka-configs does, and a key the broker refuses comes back
// with Kafka's code.
func TestConfigsAlterAndDescribeTopicAndBrokerConfigsLikeKafkaConfigs(t *testing.T) {
	_, bs := fakeCluster(t)
	adm := observer(t, bs)
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1")

	require.Equal(t, "Completed updating config for topic orders.\n", ok(t, "configs", "--bootstrap-server", bs, "--alter",
		"--entity-type", "topics", "--entity-name", "orders", "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]"))
	require.Equal(t, map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact,delete"}, topicConfigs(t, bs, "orders"))

	out := ok(t, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics", "--entity-name", "orders")
	require.Equal(t, "Dynamic configs for topic orders are:", strings.Split(out, "\n")[0])
	require.Contains(t, out, "\n  cleanup.policy=compact,delete sensitive=false synonyms={")
	require.Contains(t, out, "\n  retention.ms=3600000 sensitive=false synonyms={")
	require.Regexp(t, `(?m)^Topic: orders\t.*\tConfigs: cleanup.policy=compact,delete,retention.ms=3600000$`,
		ok(t, "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders"))

	ok(t, "configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", "orders",
		"--delete-config", "cleanup.policy")
	require.Equal(t, map[string]string{"retention.ms": "3600000"}, topicConfigs(t, bs, "orders"))
	fails(t, "topic nothere", "configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics",
		"--entity-name", "nothere", "--add-config", "retention.ms=1")

	// A broker's config: set, then seen in --describe with its source.
	require.Equal(t, "Completed updating config for broker 0.\n", ok(t, "configs", "--bootstrap-server", bs, "--alter",
		"--entity-type", "brokers", "--entity-name", "0", "--add-config", "log.retention.ms=7200000"))
	out = ok(t, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-name", "0")
	require.Regexp(t, "^Dynamic configs for broker 0 are:\n  log.retention.ms=7200000 sensitive=false synonyms=\\{.*\\}\n$", out)
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 0)
	require.NoError(t, err)
	var found bool
	for _, c := range rcs[0].Configs {
		if c.Key == "log.retention.ms" {
			found = true
			require.Equal(t, "7200000", *c.Value)
			require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, c.Source)
		}
	}
	require.True(t, found)

	// The cluster-wide default (an empty broker name on the wire).
	require.Equal(t, "Completed updating default config for brokers in the cluster.\n", ok(t, "configs", "--bootstrap-server", bs,
		"--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.bytes=1048576"))
	require.Contains(t, ok(t, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-default"),
		"Default configs for brokers in the cluster are:\n")
	rcs, err = adm.DescribeBrokerConfigs(ctxT(t))
	require.NoError(t, err)
	require.Contains(t, valueOf(rcs[0].Configs, "log.retention.bytes"), "1048576")
	out = ok(t, "configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
	require.Contains(t, out, "All configs for broker 0 are:\n")
	require.Contains(t, out, "\n  broker.id=0 sensitive=false synonyms={")
}

// topicConfigs returns the configs set on the topic itself.
func topicConfigs(t testing.TB, bs, topic string) map[string]string {
	t.Helper()
	rcs, err := observer(t, bs).DescribeTopicConfigs(ctxT(t), topic)
	require.NoError(t, err)
	set := map[string]string{}
	for _, c := range rcs[0].Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			set[c.Key] = *c.Value
		}
	}
	return set
}

// TestConfigsSetsSCRAMUsersWhoCanThenLogIn: an administrator logged in
// with SCRAM creates a user's SCRAM-SHA-512 credential with kafka-
// configs' bracket syntax; the user can then log in with the same
// command's --command-config, and no longer after --delete-config.
func TestConfigsSetsSCRAMUsersWhoCanThenLogIn(t *testing.T) {
	// kfake offers a mechanism once some user has it: root brings SCRAM-SHA-512.
	_, bs := fakeCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "admin-secret"),
		kfake.Superuser("SCRAM-SHA-512", "root", "root-secret"))
	asAdmin := clientConfig(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";`)
	asAlice := clientConfig(t, "security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`)

	fails(t, "SASL", "cluster", "--bootstrap-server", bs, "--command-config", asAlice, "--timeout", "3s")
	require.Equal(t, "Completed updating config for user alice.\n", ok(t, "configs", "--bootstrap-server", bs,
		"--command-config", asAdmin, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-512=[iterations=4096,password=alice-secret]")) // kfake logs in only at 4096
	fails(t, "iterations=100 is not a number from 4096 to 16384", "configs", "--bootstrap-server", bs,
		"--command-config", asAdmin, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-512=[iterations=100,password=alice-secret]")
	require.Equal(t, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n",
		ok(t, "configs", "--bootstrap-server", bs, "--command-config", asAdmin, "--describe", "--entity-type", "users", "--entity-name", "alice"))
	require.Contains(t, ok(t, "cluster", "--bootstrap-server", bs, "--command-config", asAlice), "Brokers:\n")

	ok(t, "configs", "--bootstrap-server", bs, "--command-config", asAdmin, "--alter", "--entity-type", "users",
		"--entity-name", "alice", "--delete-config", "SCRAM-SHA-512")
	fails(t, "SASL", "cluster", "--bootstrap-server", bs, "--command-config", asAlice, "--timeout", "3s")
}

// TestConfigsSaysWhenTheBrokersCannotSetSCRAMUsers: a cluster without
// AlterUserScramCredentials (a ZooKeeper-mode broker before Kafka 2.7,
// or this workbook's) gets an error that names the API and the
// --zookeeper way around it.
func TestConfigsSaysWhenTheBrokersCannotSetSCRAMUsers(t *testing.T) {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(50, -1)
	versions.SetMaxKeyVersion(51, -1)
	_, bs := fakeCluster(t, kfake.MaxVersions(versions))
	r := fails(t, "setting a SCRAM credential needs the AlterUserScramCredentials API (key 51), which these brokers do not serve (UNSUPPORTED_VERSION)",
		"configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-256=[password=alice-secret]")
	require.Contains(t, r.err, "admin configs --zookeeper host:2181")

	// --zookeeper's end to end (a user who then logs in) is in final's
	// compat suite, TestSecurityListeners.
}

// clientConfig writes a --command-config file of the given lines.
func clientConfig(t testing.TB, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// valueOf is the value of key among configs, or "".
func valueOf(configs []kadm.Config, key string) string {
	for _, c := range configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
