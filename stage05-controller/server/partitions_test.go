package server_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// readTagged reads topic from the start until it has n records whose
// values begin with tag and returns those values, sorted.
func readTagged(t *testing.T, c *brokertest.Cluster, topic, tag string, n int) []string {
	t.Helper()
	cons := client(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), n)
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), tag+"-") {
				got = append(got, string(r.Value))
			}
		})
	}
	slices.Sort(got)
	return got
}

// createPartitions sends one raw CreatePartitions request and returns
// its answer for topic.
func createPartitions(t *testing.T, c *brokertest.Cluster, topic string, count int32, assignment [][]int32) kmsg.CreatePartitionsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	for _, replicas := range assignment {
		rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: replicas})
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, client(t, c))
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	return resp.Topics[0]
}

// assignmentOf reads a topic's assignment znode.
func assignmentOf(t *testing.T, zk *kafkazk.Client, topic string) kafkazk.TopicAssignment {
	t.Helper()
	as, err := zk.TopicAssignments(topic)
	require.NoError(t, err)
	a, ok := as[topic]
	require.True(t, ok, "topic %s exists", topic)
	return a.TopicAssignment
}

// TestCreatePartitionsGrowsATopicOnEveryBroker: a topic of three
// partitions (replication factor 2) on three broker processes grows to
// six through kadm: the answer comes once the new partitions have
// leaders, every broker's metadata lists six led partitions, the
// assignment znode keeps the topic id and the old partitions and places
// the new ones as Kafka's rack-unaware assignment continues, records
// produced to every partition are read back, and those written before
// are still there. An explicit assignment is taken as given; Sarama's
// ClusterAdmin grows the topic too; what cannot be done gets Kafka's
// error codes and messages and changes nothing; validate_only writes
// nothing.
func TestCreatePartitionsGrowsATopicOnEveryBroker(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	adm := kadm.NewClient(client(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	created, err := adm.CreateTopics(ctx, 3, 2, nil, "grow")
	require.NoError(t, err)
	require.NoError(t, created["grow"].Err)
	waitTopicEverywhere(t, c, "grow", 3)
	roundTrip(t, c, "grow", 3, "before", 5)
	before := assignmentOf(t, zk, "grow")

	grown, err := adm.UpdatePartitions(ctx, 6, "grow")
	require.NoError(t, err)
	require.NoError(t, grown["grow"].Err)
	waitTopicEverywhere(t, c, "grow", 6)
	after := assignmentOf(t, zk, "grow")
	require.Equal(t, before.ID, after.ID, "the topic id is kept")
	require.Len(t, after.Replicas, 6)
	want, err := controller.AssignNewPartitions(3, 3, 2, []int32{0, 1, 2}, before.Replicas[0][0])
	require.NoError(t, err)
	maps.Copy(want, before.Replicas)
	require.Equal(t, want, after.Replicas, "old partitions kept, new ones where Kafka puts them")
	leaders := waitLeaders(t, zk, "grow", 6, func(int32) bool { return true })
	for p := int32(3); p < 6; p++ {
		require.Equal(t, after.Replicas[p][0], leaders[p], "partition %d is led by its first replica", p)
	}
	roundTrip(t, c, "grow", 6, "after", 5)
	var wantBefore []string
	for p := range 3 {
		for i := range 5 {
			wantBefore = append(wantBefore, fmt.Sprintf("before-%d-%d", p, i))
		}
	}
	require.Equal(t, wantBefore, readTagged(t, c, "grow", "before", 15), "the old partitions keep their records")

	// An explicit assignment for two more.
	require.Zero(t, createPartitions(t, c, "grow", 8, [][]int32{{2, 0}, {1, 2}}).ErrorCode)
	waitTopicEverywhere(t, c, "grow", 8)
	after = assignmentOf(t, zk, "grow")
	require.Equal(t, []int32{2, 0}, after.Replicas[6])
	require.Equal(t, []int32{1, 2}, after.Replicas[7])
	leaders = waitLeaders(t, zk, "grow", 8, func(int32) bool { return true })
	require.Equal(t, int32(2), leaders[6])
	require.Equal(t, int32(1), leaders[7])

	// Sarama's admin client, to the controller.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	sa, err := sarama.NewClusterAdmin(c.Addrs(), cfg)
	require.NoError(t, err)
	defer sa.Close()
	require.NoError(t, sa.CreatePartitions("grow", 9, nil, false))
	waitTopicEverywhere(t, c, "grow", 9)

	// validate_only: a good request is answered as done, and nothing is.
	validated, err := adm.ValidateUpdatePartitions(ctx, 12, "grow")
	require.NoError(t, err)
	require.NoError(t, validated["grow"].Err)
	require.NoError(t, sa.CreatePartitions("grow", 12, nil, true))

	// Kafka's refusals.
	for _, tt := range []struct {
		name       string
		topic      string
		count      int32
		assignment [][]int32
		want       *kerr.Error
		message    string
	}{
		{"the same count", "grow", 9, nil, kerr.InvalidPartitions, "Topic already has 9 partitions."},
		{"fewer", "grow", 4, nil, kerr.InvalidPartitions, "Topic currently has 9 partitions, which is higher than the requested 4."},
		{"no such topic", "nope", 4, nil, kerr.UnknownTopicOrPartition, "The topic 'nope' does not exist."},
		{"an unknown broker", "grow", 10, [][]int32{{5, 0}}, kerr.InvalidReplicaAssignment, "Unknown broker(s) in replica assignment: 5."},
		{"too few assignments", "grow", 11, [][]int32{{0, 1}}, kerr.InvalidReplicaAssignment,
			"Increasing the number of partitions by 2 but 1 assignments provided."},
		{"a broker twice", "grow", 10, [][]int32{{1, 1}}, kerr.InvalidReplicaAssignment,
			"Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 9."},
		{"another replication factor", "grow", 11, [][]int32{{0, 1}, {2}}, kerr.InvalidReplicaAssignment,
			"Inconsistent replication factor between partitions, partition 0 has 2 while partitions [10] have replication factors [1], respectively."},
	} {
		got := createPartitions(t, c, tt.topic, tt.count, tt.assignment)
		require.Equal(t, tt.want.Code, got.ErrorCode, "%s: %v", tt.name, kerr.ErrorForCode(got.ErrorCode))
		require.NotNil(t, got.ErrorMessage, tt.name)
		require.Equal(t, tt.message, *got.ErrorMessage, tt.name)
	}
	res, err := adm.UpdatePartitions(ctx, 3, "grow")
	require.NoError(t, err)
	require.ErrorIs(t, res["grow"].Err, kerr.InvalidPartitions)
	err = sa.CreatePartitions("grow", 9, nil, false)
	require.ErrorContains(t, err, "Topic already has 9 partitions.")

	req := kmsg.NewPtrCreatePartitionsRequest()
	for range 2 {
		req.Topics = append(req.Topics, kmsg.CreatePartitionsRequestTopic{Topic: "grow", Count: 20})
	}
	resp, err := req.RequestWith(ctx, client(t, c))
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1, "a topic named twice is answered once")
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode)

	require.Len(t, assignmentOf(t, zk, "grow").Replicas, 9, "nothing refused or validated only was written")
}
