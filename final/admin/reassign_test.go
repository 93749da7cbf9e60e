package admin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestReassignMovesReplicasOnTheWorkbooksBrokers: admin reassign
// --execute moves a topic's partitions from brokers {0,1} and {1,2} to
// {2,3} and {3,0} on four broker processes (broker 3 held nothing, as
// after a scale-out). --verify says "still in progress" until each move
// ends and "complete" after; Metadata then shows the new replicas with
// all of them in sync and a leader among them; every record written before
// the move is read back, from the new replicas since the old are gone;
// and --list has nothing left to show.
func TestReassignMovesReplicasOnTheWorkbooksBrokers(t *testing.T) {
	ens := zktest.StartEnsemble(t, 1)
	c := brokertest.Start(t, ens, 4, nil)
	bs := strings.Join(c.Addrs(), ",")

	// An assignment chosen by hand, on brokers 0-2 only (CreateTopics
	// with a replica assignment, which admin topics does not send).
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{0, 1}}, {Partition: 1, Replicas: []int32{1, 2}}}
	req.Topics = append(req.Topics, rt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := req.RequestWith(ctxT(t), cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	require.Eventually(t, func() bool {
		topics, err := observer(t, bs).ListTopics(ctxT(t), "orders")
		return err == nil && len(topics["orders"].Partitions) == 2 && topics["orders"].Partitions.NumReplicas() == 2
	}, 30*time.Second, 100*time.Millisecond, "orders has its two partitions")
	before := assignment(t, bs, "orders")
	require.Equal(t, map[int32][]int32{0: {0, 1}, 1: {1, 2}}, before)

	produce(t, bs, "orders", 2, 50)

	plan := []string{"--topic", "orders", "--replicas", "0=2,3", "--replicas", "1=3,0"}
	out := ok(t, append([]string{"reassign", "--bootstrap-server", bs, "--execute"}, plan...)...)
	require.Equal(t, "Current partition replica assignment\n\n"+
		`{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[0,1]},{"topic":"orders","partition":1,"replicas":[1,2]}]}`+"\n\n"+
		"Save this to use as the --reassignment-json-file option during rollback\n"+
		"Successfully started partition reassignments for orders-0,orders-1\n", out)
	// Until the moves end, --verify says which are still in progress
	// (or, where a broker's metadata lags the controller's, which replica
	// set it still sees) and fails.
	waitForMove(t, bs, plan...)
	require.Equal(t, "Status of partition reassignment:\n"+
		"Reassignment of partition orders-0 is complete.\n"+
		"Reassignment of partition orders-1 is complete.\n",
		ok(t, append([]string{"reassign", "--bootstrap-server", bs, "--verify"}, plan...)...))
	require.Equal(t, "No partition reassignments found.\n", ok(t, "reassign", "--bootstrap-server", bs, "--list"))

	// What Metadata says, as a client sees it.
	require.Eventually(t, func() bool {
		topics, err := observer(t, bs).ListTopics(ctxT(t), "orders")
		if err != nil {
			return false
		}
		p0, p1 := topics["orders"].Partitions[0], topics["orders"].Partitions[1]
		return slices.Equal(p0.Replicas, []int32{2, 3}) && slices.Equal(p1.Replicas, []int32{3, 0}) &&
			len(p0.ISR) == 2 && len(p1.ISR) == 2 &&
			slices.Contains(p0.Replicas, p0.Leader) && slices.Contains(p1.Replicas, p1.Leader)
	}, 30*time.Second, 200*time.Millisecond, "Metadata shows orders-0 on 2,3 and orders-1 on 3,0, both in sync")

	// Every record written before the move, read from the new replicas.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	perPartition := map[int32]int{}
	ctx := ctxT(t)
	for perPartition[0]+perPartition[1] < 100 {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %v of 50 a partition", perPartition)
		fs.EachRecord(func(r *kgo.Record) { perPartition[r.Partition]++ })
	}
	require.Equal(t, map[int32]int{0: 50, 1: 50}, perPartition)

	// The way back, from the plan --execute printed, as a JSON file.
	rollback := filepath.Join(t.TempDir(), "rollback.json")
	require.NoError(t, os.WriteFile(rollback, []byte(strings.Split(out, "\n")[2]), 0o644))
	ok(t, "reassign", "--bootstrap-server", bs, "--execute", "--reassignment-json-file", rollback)
	waitForMove(t, bs, "--reassignment-json-file", rollback)
	require.Equal(t, before, assignment(t, bs, "orders"))
}

// waitForMove runs admin reassign --verify with the plan until it says
// every partition's move is complete.
func waitForMove(t *testing.T, bs string, plan ...string) {
	t.Helper()
	var last result
	require.Eventually(t, func() bool {
		last = run(t, append([]string{"reassign", "--bootstrap-server", bs, "--verify"}, plan...)...)
		if last.code != 0 && !strings.Contains(last.out, "is still in progress.") &&
			!strings.Contains(last.out, "There is no active reassignment of partition") {
			return true // and fail below, on the words
		}
		return last.code == 0
	}, 60*time.Second, 200*time.Millisecond, "the move ends: %+v", &last)
	require.Equal(t, 0, last.code, "--verify said neither complete nor in progress:\n%s%s", last.out, last.err)
}

// assignment is the topic's replicas by partition, as Metadata has them.
func assignment(t *testing.T, bs, topic string) map[int32][]int32 {
	t.Helper()
	topics, err := observer(t, bs).ListTopics(ctxT(t), topic)
	require.NoError(t, err)
	out := map[int32][]int32{}
	for p, d := range topics[topic].Partitions {
		out[p] = d.Replicas
	}
	return out
}

// TestReassignWordsWhatTheClusterSays: against kfake, which accepts a
// move and makes none, --verify names the replica set it finds instead
// and fails, a cancel of a move that is not running comes back with
// Kafka's code, a partition that does not exist is named, and a plan read
// from a JSON file is the same plan as the flags'.
func TestReassignWordsWhatTheClusterSays(t *testing.T) {
	_, bs := fakeCluster(t)
	ok(t, "topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1")
	now := assignment(t, bs, "orders")[0]
	other := (now[0] + 1) % 3
	target := fmt.Sprintf("0=%d", other)

	out := ok(t, "reassign", "--bootstrap-server", bs, "--execute", "--topic", "orders", "--replicas", target)
	require.Contains(t, out, fmt.Sprintf(`{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[%d]}]}`, now[0]))
	require.Equal(t, "No partition reassignments found.\n", ok(t, "reassign", "--bootstrap-server", bs, "--list"))
	r := fails(t, "the reassignment of orders-0 is not complete", "reassign", "--bootstrap-server", bs, "--verify",
		"--topic", "orders", "--replicas", target)
	require.Equal(t, fmt.Sprintf("Status of partition reassignment:\n"+
		"There is no active reassignment of partition orders-0, but replica set is %d rather than %d.\n", now[0], other), r.out)

	plan := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(fmt.Sprintf(
		`{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[%d]}]}`, other)), 0o644))
	r2 := run(t, "reassign", "--bootstrap-server", bs, "--verify", "--reassignment-json-file", plan)
	require.Equal(t, r, r2, "the JSON plan and the flags' plan are the same plan")

	fails(t, "cancel the reassignment of partition orders-0: ", "reassign", "--bootstrap-server", bs, "--cancel",
		"--topic", "orders", "--replicas", target)
	fails(t, "(NO_REASSIGNMENT_IN_PROGRESS)", "reassign", "--bootstrap-server", bs, "--cancel",
		"--topic", "orders", "--replicas", target)
	fails(t, "partition orders-7 does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "reassign", "--bootstrap-server", bs,
		"--execute", "--topic", "orders", "--replicas", "7=0")
	fails(t, "topic nothere does not exist (UNKNOWN_TOPIC_OR_PARTITION)", "reassign", "--bootstrap-server", bs,
		"--execute", "--topic", "nothere", "--replicas", "0=0")
}
