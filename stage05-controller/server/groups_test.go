package server_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// groupProps are the keys of the group tests' brokers: a group's first
// rebalance does not wait the default 3 s for more members.
var groupProps = map[string]string{"group.initial.rebalance.delay.ms": "0"}

// produceValues writes n records to each partition of topic and returns
// their values.
func produceValues(t *testing.T, c *brokertest.Cluster, topic string, partitions int32, n int) map[string]bool {
	t.Helper()
	p := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]bool{}
	var recs []*kgo.Record
	for part := range partitions {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", topic, part, i)
			want[v] = true
			recs = append(recs, &kgo.Record{Partition: part, Value: []byte(v)})
		}
	}
	require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
	return want
}

// TestFranzGoGroupsShareEveryPartitionOnce: three franz-go consumers in
// one group, with the eager range assignor and then with the cooperative
// sticky one, split a 6-partition topic: each partition has exactly one
// owner, and together they read every record exactly once.
func TestFranzGoGroupsShareEveryPartitionOnce(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, groupProps)
	for _, balancer := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
		t.Run(balancer.ProtocolName(), func(t *testing.T) {
			topic := "events-" + balancer.ProtocolName()
			createTopic(t, c, topic, 6, nil)
			members := startFranzGoMembers(t, c, topic, "g-"+balancer.ProtocolName(), 3, kgo.Balancers(balancer))
			waitOwners(t, members, 6)
			// Only now the records: a partition that moved while records
			// were read would be read again from its last commit, and
			// nothing was committed yet (at-least-once, as in Kafka).
			want := produceValues(t, c, topic, 6, 50)
			requireReadOnce(t, members, want)
		})
	}
}

// groupMember is one franz-go consumer of a group: what it read, and the
// partitions it owns now.
type groupMember struct {
	cl       *kgo.Client
	mu       sync.Mutex
	values   []string
	assigned map[int32]bool
}

func (m *groupMember) read() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.values)
}

func (m *groupMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.assigned))
}

// startFranzGoMembers starts n consumers of topic in group, each polling
// until the test ends.
func startFranzGoMembers(t testing.TB, c *brokertest.Cluster, topic, group string, n int, opts ...kgo.Opt) []*groupMember {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	members := make([]*groupMember, n)
	for i := range members {
		m := &groupMember{assigned: map[int32]bool{}}
		members[i] = m
		m.cl = client(t, c, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range a[topic] {
					m.assigned[p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, r map[string][]int32) {
				m.mu.Lock()
				for _, p := range r[topic] {
					delete(m.assigned, p)
				}
				m.mu.Unlock()
				_ = cl.CommitMarkedOffsets(context.Background()) // as kgo does by default, before giving them up
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
				m.mu.Lock()
				defer m.mu.Unlock()
				for _, p := range l[topic] {
					delete(m.assigned, p)
				}
			})}, opts...)...)
		wg.Go(func() {
			for ctx.Err() == nil {
				fs := m.cl.PollFetches(ctx)
				if fs.IsClientClosed() { // the test closed it: LeaveGroup
					return
				}
				fs.EachRecord(func(rec *kgo.Record) {
					m.mu.Lock()
					m.values = append(m.values, string(rec.Value))
					m.mu.Unlock()
				})
			}
		})
	}
	return members
}

// waitOwners waits until every one of partitions has exactly one owner
// among members, and every member owns at least one.
func waitOwners(t testing.TB, members []*groupMember, partitions int) {
	t.Helper()
	require.Eventually(t, func() bool {
		owners := map[int32]int{}
		for _, m := range members {
			owned := m.owned()
			if len(owned) == 0 {
				return false
			}
			for _, p := range owned {
				owners[p]++
			}
		}
		if len(owners) != partitions {
			return false
		}
		for _, n := range owners {
			if n != 1 {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond, "%d partitions, one owner each, %d members each owning some", partitions, len(members))
}

// requireReadOnce waits until members have read every value of want, and
// requires that none was read twice or was never produced.
func requireReadOnce(t *testing.T, members []*groupMember, want map[string]bool) {
	t.Helper()
	count := func() map[string]int {
		seen := map[string]int{}
		for _, m := range members {
			for _, v := range m.read() {
				seen[v]++
			}
		}
		return seen
	}
	require.Eventually(t, func() bool { return len(count()) >= len(want) }, 60*time.Second, 10*time.Millisecond,
		"every record read")
	for v, n := range count() {
		require.True(t, want[v], "a record never produced: %s", v)
		require.Equal(t, 1, n, "%s read %d times", v, n)
	}
}

// TestOffsetsTopicIsCreatedOnFirstUseAndIsInternal: with fewer live
// brokers than offsets.topic.replication.factor (3 by default),
// FindCoordinator answers COORDINATOR_NOT_AVAILABLE and creates nothing,
// as Kafka does; a one-broker setup that sets the factor to 1 gets
// __consumer_offsets on its first FindCoordinator: 50 partitions,
// cleanup.policy=compact in ZooKeeper, marked internal in Metadata, and
// closed to clients' produce requests (INVALID_TOPIC_EXCEPTION).
func TestOffsetsTopicIsCreatedOnFirstUseAndIsInternal(t *testing.T) {
	ens := zktest.StartStandalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lone := brokertest.Start(t, ens, 1, groupProps)
	resp := kadm.NewClient(client(t, lone)).FindGroupCoordinators(ctx, "solo")
	require.ErrorIs(t, resp["solo"].Err, kerr.CoordinatorNotAvailable)
	zk := observer(t, ens)
	exists, _, err := zk.Conn().Exists(kafkazk.TopicPath(group.Topic))
	require.NoError(t, err)
	require.False(t, exists, "no %s with fewer brokers than its replication factor", group.Topic)
	lone.Broker(0).Stop(30 * time.Second)

	dev := brokertest.Start(t, ens, 1, map[string]string{"offsets.topic.replication.factor": "1"})
	adm := kadm.NewClient(client(t, dev))
	require.Eventually(t, func() bool {
		r := adm.FindGroupCoordinators(ctx, "solo")
		return r.Error() == nil && r["solo"].NodeID == 0
	}, 30*time.Second, 20*time.Millisecond, "broker 0 coordinates the group")
	topics, err := adm.ListTopicsWithInternal(ctx, group.Topic)
	require.NoError(t, err)
	require.True(t, topics[group.Topic].IsInternal, "Metadata marks %s internal", group.Topic)
	require.Len(t, topics[group.Topic].Partitions, 50)
	config, err := zk.TopicConfig(group.Topic)
	require.NoError(t, err)
	require.Equal(t, "compact", config["cleanup.policy"])
	p := client(t, dev, kgo.DefaultProduceTopic(group.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	err = p.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("forged")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidTopicException)
}
