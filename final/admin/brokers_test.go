package admin_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestMain builds the broker the admin command is for: final's.
func TestMain(m *testing.M) {
	brokertest.MainWith(m, "github.com/kafkaworkbook/workbook/final/cmd/broker")
}

// TestTopicsAndGroupsOnTheWorkbooksBrokers: the subset of the admin
// command this workbook's brokers serve (CreateTopics, Metadata,
// DeleteTopics, the group coordinator's APIs), run against three broker
// processes on ZooKeeper, with the same output as against kfake and
// Kafka's error codes from our brokers. Where the brokers lack an API
// (DescribeConfigs for --describe's Configs, CreatePartitions for
// --alter), the command says so by name.
func TestTopicsAndGroupsOnTheWorkbooksBrokers(t *testing.T) {
	ens := zktest.StartEnsemble(t, 1)
	c := brokertest.Start(t, ens, 3, nil)
	bs := strings.Join(c.Addrs(), ",")

	require.Equal(t, "Created topic orders.\n", ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders",
		"--partitions", "3", "--replication-factor", "2", "--config", "min.insync.replicas=2"))
	fails(t, "topic orders already exists (TOPIC_ALREADY_EXISTS)", "topics", "--bootstrap-server", bs,
		"--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1")
	fails(t, "(INVALID_REPLICATION_FACTOR)", "topics", "--bootstrap-server", bs,
		"--create", "--topic", "wide", "--partitions", "1", "--replication-factor", "4")
	fails(t, `create topic odd: unknown topic config "no.such.key" (INVALID_CONFIG)`, "topics", "--bootstrap-server", bs,
		"--create", "--topic", "odd", "--partitions", "1", "--replication-factor", "1", "--config", "no.such.key=1")
	require.Regexp(t, `(?m)^orders$`, ok(t, "topics", "--bootstrap-server", bs, "--list"))

	// --describe: the partitions as the brokers' metadata has them.
	r := run(t, "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders")
	require.Equal(t, 0, r.code, r.err)
	topics, err := observer(t, bs).ListTopics(ctxT(t), "orders")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	require.Len(t, lines, 4, r.out)
	require.Regexp(t, `^Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: `, lines[0])
	require.Contains(t, lines[0], "min.insync.replicas=2")
	require.Empty(t, r.err, "every API --describe needs is served")
	for p, line := range lines[1:] {
		d := topics["orders"].Partitions[int32(p)]
		require.GreaterOrEqual(t, d.Leader, int32(0))
		require.Regexp(t, regexp.MustCompile(`^\tTopic: orders\tPartition: `+strconv.Itoa(p)+`\tLeader: `+strconv.Itoa(int(d.Leader))+
			`\tReplicas: `+ids(d.Replicas)+`\tIsr: \d(,\d)*$`), line)
	}

	ok(t, "topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "4")
	require.Eventually(t, func() bool {
		md, err := observer(t, bs).ListTopics(ctxT(t), "orders")
		return err == nil && len(md["orders"].Partitions) == 4
	}, 30*time.Second, 100*time.Millisecond, "orders grew to 4 partitions")

	// Groups: offsets committed to our coordinator, described, reset
	// and deleted.
	produce(t, bs, "orders", 3, 5)
	adm := observer(t, bs)
	commit(t, adm, "billing", map[int32]int64{0: 1, 1: 2, 2: 5})
	require.Regexp(t, `(?m)^billing$`, ok(t, "groups", "--bootstrap-server", bs, "--list"))
	out := ok(t, "groups", "--bootstrap-server", bs, "--describe", "--group", "billing")
	require.Contains(t, out, "\nConsumer group 'billing' has no active members.\n\n"+
		"GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n"+
		"billing         orders          0          1               5               4               -               -               -\n"+
		"billing         orders          1          2               5               3               -               -               -\n"+
		"billing         orders          2          5               5               0               -               -               -\n")
	ok(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest", "--execute")
	require.Equal(t, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}, committed(t, adm, "billing"), "every partition of the topic, the new one too")
	require.Equal(t, "Deletion of requested consumer groups ('billing') was successful.\n",
		ok(t, "groups", "--bootstrap-server", bs, "--delete", "--group", "billing"))
	fails(t, "consumer group billing does not exist (GROUP_ID_NOT_FOUND)", "groups", "--bootstrap-server", bs,
		"--describe", "--group", "billing")

	require.Equal(t, "Deleted topic orders.\n", ok(t, "topics", "--bootstrap-server", bs, "--delete", "--topic", "orders"))
	require.NotRegexp(t, `(?m)^orders$`, ok(t, "topics", "--bootstrap-server", bs, "--list"))
	fails(t, "topic orders does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders")

	out = ok(t, "cluster", "--bootstrap-server", bs)
	require.Regexp(t, `^Cluster ID: \S+\nController: 127\.0\.0\.1:\d+ \(id: \d rack: null\)\nBrokers:\n`+
		`(  127\.0\.0\.1:\d+ \(id: \d rack: null\)\n){3}$`, out)
}

// TestDescribeUnderReplicatedPartitionsWhileABrokerIsDown: with one of
// three brokers stopped, --describe --under-replicated-partitions prints
// exactly the partitions whose ISR lost it (partition lines only, as
// kafka-topics does), --unavailable-partitions prints nothing since each
// has a leader, and once the broker is back and caught up both print
// nothing: the check a rolling restart waits on.
func TestDescribeUnderReplicatedPartitionsWhileABrokerIsDown(t *testing.T) {
	ens := zktest.StartEnsemble(t, 1)
	c := brokertest.Start(t, ens, 3, nil)
	bs := strings.Join(c.Addrs()[:2], ",")
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "3")
	produce(t, bs, "orders", 3, 5)
	describe := func(flag string) string {
		return ok(t, "topics", "--bootstrap-server", bs, "--describe", "--topic", "orders", flag)
	}
	require.Eventually(t, func() bool { return describe("--under-replicated-partitions") == "" },
		30*time.Second, 200*time.Millisecond, "every replica in sync")

	c.Broker(2).Stop(30 * time.Second)
	want := regexp.MustCompile(`^(\tTopic: orders\tPartition: \d\tLeader: [01]\tReplicas: \d,\d,\d\tIsr: [01],[01](\tOffline: 2)?\n){3}$`)
	var last string
	if !assert.Eventually(t, func() bool {
		last = describe("--under-replicated-partitions")
		return want.MatchString(last)
	}, 30*time.Second, 200*time.Millisecond, "all three partitions lost broker 2 from their ISR") {
		t.Fatalf("last --under-replicated-partitions: %q", last)
	}
	require.Empty(t, describe("--unavailable-partitions"), "every partition still has a leader")

	c.Broker(2).Start()
	require.Eventually(t, func() bool {
		last = describe("--under-replicated-partitions")
		return last == ""
	}, 60*time.Second, 200*time.Millisecond, "broker 2 back in every ISR")
	t.Logf("last --under-replicated-partitions: %q", last)
}
