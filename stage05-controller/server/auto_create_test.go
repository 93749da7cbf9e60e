package server_test

import (
	"context"
	"fmt"
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
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// metadataFor sends one Metadata request for names at the client's
// highest version (or up to maxVersion, if not -1), with
// allow_auto_topic_creation as given, and returns each topic's answer by
// name.
func metadataFor(t *testing.T, c *brokertest.Cluster, maxVersion int16, allow bool, names ...string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	var opts []kgo.Opt
	if maxVersion >= 0 {
		versions := kversion.Stable()
		versions.SetMaxKeyVersion(3, maxVersion)
		opts = append(opts, kgo.MaxVersions(versions))
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = allow
	for _, name := range names {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client(t, c, opts...))
	require.NoError(t, err)
	if maxVersion >= 0 {
		require.Equal(t, maxVersion, resp.GetVersion())
	}
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, mt := range resp.Topics {
		out[*mt.Topic] = mt
	}
	return out
}

// requireAssigned requires that topic exists in ZooKeeper with partitions
// partitions of rf replicas each.
func requireAssigned(t *testing.T, zk *kafkazk.Client, topic string, partitions, rf int) {
	t.Helper()
	a := assignmentOf(t, zk, topic)
	require.Len(t, a.Replicas, partitions, "%s's partitions", topic)
	for p, replicas := range a.Replicas {
		require.Len(t, replicas, rf, "%s-%d's replicas", topic, p)
	}
}

// TestMetadataCreatesUnknownTopicsForKcatAndFranzGo: with
// auto.create.topics.enable (Kafka's default), kcat produces to a topic
// nobody created and reads back what it wrote, and franz-go does the same
// with AllowAutoTopicCreation: the topics get num.partitions partitions of
// default.replication.factor replicas. A raw Metadata naming an unknown
// topic is first answered LEADER_NOT_AVAILABLE, then with the led
// partitions; v2, which has no allow_auto_topic_creation, creates too; a
// request that does not allow creation, or names an illegal topic
// (INVALID_TOPIC_EXCEPTION), creates nothing; and with fewer live brokers
// than default.replication.factor the answer is INVALID_REPLICATION_FACTOR.
// Two broker processes on one ZooKeeper server.
func TestMetadataCreatesUnknownTopicsForKcatAndFranzGo(t *testing.T) {
	kcat := kcatBinary(t)
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 2, map[string]string{"num.partitions": "3", "default.replication.factor": "2"})
	zk := observer(t, ens)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	brokers := strings.Join(c.Addrs(), ",")

	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("kcat record %02d", i))
	}
	input := filepath.Join(t.TempDir(), "in.txt")
	require.NoError(t, os.WriteFile(input, []byte(strings.Join(want, "\n")+"\n"), 0o644))
	// A bounded message timeout: without the topic, kcat would wait for
	// it for five minutes, its queue full.
	out, err := exec.CommandContext(ctx, kcat, "-b", brokers, "-P", "-t", "kcat-new", "-X", "message.timeout.ms=30000", "-l", input).CombinedOutput()
	require.NoError(t, err, "kcat -P: %s", out)
	out, err = exec.CommandContext(ctx, kcat, "-b", brokers, "-C", "-t", "kcat-new", "-o", "beginning", "-e", "-q", "-f", `%s\n`).Output()
	require.NoError(t, err, "kcat -C")
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	require.Equal(t, want, got, "kcat reads back what it wrote")
	requireAssigned(t, zk, "kcat-new", 3, 2)

	producer := client(t, c, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("franz-new"))
	require.NoError(t, producer.ProduceSync(ctx, kgo.StringRecord("franz")).FirstErr())
	requireAssigned(t, zk, "franz-new", 3, 2)

	first := metadataFor(t, c, -1, true, "raw-new")["raw-new"]
	require.Equal(t, kerr.LeaderNotAvailable.Code, first.ErrorCode, "a topic just created has no leader yet")
	require.Empty(t, first.Partitions)
	require.Eventually(t, func() bool {
		mt := metadataFor(t, c, -1, true, "raw-new")["raw-new"]
		return mt.ErrorCode == 0 && len(mt.Partitions) == 3
	}, 30*time.Second, 50*time.Millisecond, "then it is answered with its partitions")

	require.Equal(t, kerr.LeaderNotAvailable.Code, metadataFor(t, c, 2, false, "v2-new")["v2-new"].ErrorCode,
		"before v4 every Metadata may create")
	requireAssigned(t, zk, "v2-new", 3, 2)

	refused := metadataFor(t, c, -1, false, "not-allowed")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, refused["not-allowed"].ErrorCode)
	requireNoTopic(t, zk, "not-allowed")
	illegal := metadataFor(t, c, -1, true, "bad/name", "bad name", strings.Repeat("x", 250))
	require.Len(t, illegal, 3)
	for name, mt := range illegal {
		require.Equal(t, kerr.InvalidTopicException.Code, mt.ErrorCode, name)
	}
	topics, err := zk.Topics()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"kcat-new", "franz-new", "raw-new", "v2-new"}, topics, "nothing else was created")

	c.Broker(1).Stop(30 * time.Second)
	require.Eventually(t, func() bool {
		live, err := zk.Brokers()
		return err == nil && len(live) == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, kerr.InvalidReplicationFactor.Code, metadataFor(t, c, -1, true, "too-few")["too-few"].ErrorCode)
	requireNoTopic(t, zk, "too-few")
}
