package admin_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTopicsCreateDescribeAlterDeleteLikeKafkaTopics: every action of
// admin topics against kfake, each checked twice: what it prints (kafka-
// topics' words and layout) and what the cluster holds afterwards.
func TestTopicsCreateDescribeAlterDeleteLikeKafkaTopics(t *testing.T) {
	_, bs := fakeCluster(t)
	adm := observer(t, bs)

	out := ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3",
		"--replication-factor", "2", "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
	require.Equal(t, "Created topic orders.\n", out)
	topics, err := observer(t, bs).ListTopics(ctxT(t), "orders")
	require.NoError(t, err)
	require.Len(t, topics["orders"].Partitions, 3)
	require.Equal(t, 2, topics["orders"].Partitions.NumReplicas())
	rcs, err := adm.DescribeTopicConfigs(ctxT(t), "orders")
	require.NoError(t, err)
	set := map[string]string{}
	for _, c := range rcs[0].Configs {
		if c.Value != nil && c.Source == 1 {
			set[c.Key] = *c.Value
		}
	}
	require.Equal(t, map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"}, set)

	// kafka-topics --describe: one topic line, one line per partition.
	out = ok(t, "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 2\t`+
		`Configs: cleanup.policy=compact,retention.ms=3600000$`, lines[0])
	for p, line := range lines[1:] {
		d := topics["orders"].Partitions[int32(p)]
		require.Equal(t, fmt.Sprintf("\tTopic: orders\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s",
			p, d.Leader, ids(d.Replicas), ids(d.ISR)), line)
	}
	require.Contains(t, lines[0], "TopicId: "+urlID(topics["orders"].ID))

	// Kafka's error words and code for a second create; --if-not-exists
	// makes it quiet.
	fails(t, "topic orders already exists (TOPIC_ALREADY_EXISTS)",
		"topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "1")
	require.Empty(t, ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--if-not-exists"))
	fails(t, "create topic wide: ", "topics", "--bootstrap-server", bs, "--create", "--topic", "wide",
		"--partitions", "1", "--replication-factor", "4")
	fails(t, "(INVALID_REPLICATION_FACTOR)", "topics", "--bootstrap-server", bs, "--create", "--topic", "wide",
		"--partitions", "1", "--replication-factor", "4")

	// --list: names, one a line, sorted; the broker defaults fill in
	// what --create leaves out.
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "audit")
	require.Equal(t, "audit\norders\n", ok(t, "topics", "--bootstrap-server", bs, "--list", "--exclude-internal"))

	// --alter --partitions: the new total.
	require.Equal(t, "Topic orders now has 5 partitions.\n",
		ok(t, "topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "5"))
	topics, err = observer(t, bs).ListTopics(ctxT(t), "orders")
	require.NoError(t, err)
	require.Len(t, topics["orders"].Partitions, 5)
	fails(t, "(INVALID_PARTITIONS)", "topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "2")

	// --describe without --topic: every topic, sorted.
	out = ok(t, "topics", "--bootstrap-server", bs, "--describe", "--exclude-internal")
	require.Equal(t, []string{"audit", "orders"}, topicLines(out))

	// --delete, and the words for a topic that is not there.
	require.Equal(t, "Deleted topic orders.\n", ok(t, "topics", "--bootstrap-server", bs, "--delete", "--topic", "orders"))
	topics, err = observer(t, bs).ListTopics(ctxT(t))
	require.NoError(t, err)
	require.False(t, topics.Has("orders"))
	fails(t, "topic orders does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "topics", "--bootstrap-server", bs, "--delete", "--topic", "orders")
	require.Empty(t, ok(t, "topics", "--bootstrap-server", bs, "--delete", "--topic", "orders", "--if-exists"))
	fails(t, "topic orders does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders")
	fails(t, "topic orders does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "9")
}

// topicLines returns the topic names of --describe's topic lines.
func topicLines(out string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^Topic: (\S+)\t`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

func ids(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
