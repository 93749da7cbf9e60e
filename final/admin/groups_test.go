package admin_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsDescribeResetDeleteLikeKafkaConsumerGroups: a group with
// committed offsets and no members is described with kafka-consumer-
// groups' table, reset (a dry run first, changing nothing; then
// --execute), and deleted; each step checked against the offsets the
// cluster holds.
func TestGroupsDescribeResetDeleteLikeKafkaConsumerGroups(t *testing.T) {
	_, bs := fakeCluster(t)
	adm := observer(t, bs)
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "2", "--replication-factor", "1")
	produce(t, bs, "orders", 2, 10)
	commit(t, adm, "billing", map[int32]int64{0: 4, 1: 10})

	require.Equal(t, "billing\n", ok(t, "groups", "--bootstrap-server", bs, "--list"))

	out := ok(t, "groups", "--bootstrap-server", bs, "--describe", "--group", "billing")
	require.Equal(t, `
Consumer group 'billing' has no active members.

GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID
billing         orders          0          4               10              6               -               -               -
billing         orders          1          10              10              0               -               -               -
`, out)

	// A dry run prints the plan and commits nothing.
	r := run(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest")
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.err, "dry run")
	require.Equal(t, `
GROUP           TOPIC           PARTITION  NEW-OFFSET
billing         orders          0          0
billing         orders          1          0
`, r.out)
	require.Equal(t, map[int32]int64{0: 4, 1: 10}, committed(t, adm, "billing"))

	ok(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders:1", "--to-earliest", "--execute")
	require.Equal(t, map[int32]int64{0: 4, 1: 0}, committed(t, adm, "billing"))

	// --to-offset is kept inside the log, with a warning.
	r = run(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--all-topics", "--to-offset", "25", "--execute")
	require.Equal(t, 0, r.code, r.err)
	require.Contains(t, r.err, "new offset (25) is higher than the latest offset of orders-0: it is set to 10")
	require.Equal(t, map[int32]int64{0: 10, 1: 10}, committed(t, adm, "billing"))

	ok(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders", "--shift-by", "-3", "--execute")
	require.Equal(t, map[int32]int64{0: 7, 1: 7}, committed(t, adm, "billing"))
	ok(t, "groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders:0", "--to-latest", "--execute")
	require.Equal(t, map[int32]int64{0: 10, 1: 7}, committed(t, adm, "billing"))
	fails(t, "partition orders-7 does not exist (UNKNOWN_TOPIC_OR_PARTITION)",
		"groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders:7", "--to-latest")

	require.Equal(t, "Deletion of requested consumer groups ('billing') was successful.\n",
		ok(t, "groups", "--bootstrap-server", bs, "--delete", "--group", "billing"))
	listed, err := adm.ListGroups(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, listed.Groups())
	fails(t, "consumer group billing does not exist (GROUP_ID_NOT_FOUND)", "groups", "--bootstrap-server", bs, "--describe", "--group", "billing")
}

// TestGroupsWithAMemberShowItAndRefuseAReset: a live consumer's member
// id, host and client id fill the table's last columns; its group can
// be neither reset (a member would commit over the reset, so Kafka
// refuses) nor deleted.
func TestGroupsWithAMemberShowItAndRefuseAReset(t *testing.T) {
	c, bs := fakeCluster(t)
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "2", "--replication-factor", "1")
	produce(t, bs, "orders", 2, 5)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bs, ",")...), kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"), kgo.ClientID("billing-1"), kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer consumer.Close()
	go func() {
		for !consumer.PollFetches(ctxT(t)).IsClientClosed() {
		}
	}()
	_, err = c.WaitGroupStable(ctxT(t), "billing", 1)
	require.NoError(t, err)

	out := ok(t, "groups", "--bootstrap-server", bs, "--describe", "--group", "billing")
	rows := regexp.MustCompile(`(?m)^billing +orders +(\d) +- +5 +- +(\S+) +(\S+) +billing-1$`).FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 2, out)
	require.Equal(t, rows[0][2], rows[1][2], "one member holds both partitions")

	out = ok(t, "groups", "--bootstrap-server", bs, "--describe", "--group", "billing", "--state")
	require.Regexp(t, `^\nGROUP +COORDINATOR \(ID\) +ASSIGNMENT-STRATEGY +STATE +#MEMBERS\n`+
		`billing +127\.0\.0\.1:\d+ \(\d\) +\S+ +Stable +1\n$`, out)
	out = ok(t, "groups", "--bootstrap-server", bs, "--describe", "--group", "billing", "--members")
	require.Regexp(t, `^\nGROUP +CONSUMER-ID +HOST +CLIENT-ID +#PARTITIONS\n`+
		`billing +`+regexp.QuoteMeta(rows[0][2])+` +\S+ +billing-1 +2\n$`, out)

	fails(t, "assignments can only be reset if the group 'billing' is inactive, but the current state is Stable",
		"groups", "--bootstrap-server", bs, "--reset-offsets", "--group", "billing", "--topic", "orders", "--to-earliest", "--execute")
	fails(t, "consumer group billing is not empty: it has active members (NON_EMPTY_GROUP)",
		"groups", "--bootstrap-server", bs, "--delete", "--group", "billing")
}

// commit commits offsets for a group without members, as a stopped
// consumer leaves them.
func commit(t testing.TB, adm *kadm.Client, group string, offsets map[int32]int64) {
	t.Helper()
	os := kadm.Offsets{}
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: at, LeaderEpoch: -1})
	}
	require.NoError(t, adm.CommitAllOffsets(ctxT(t), group, os))
}

// committed returns the group's committed offsets of topic orders.
func committed(t testing.TB, adm *kadm.Client, group string) map[int32]int64 {
	t.Helper()
	res, err := adm.FetchOffsets(ctxT(t), group)
	require.NoError(t, err)
	got := map[int32]int64{}
	res.Each(func(o kadm.OffsetResponse) {
		if o.Topic == "orders" {
			got[o.Partition] = o.At
		}
	})
	return got
}
