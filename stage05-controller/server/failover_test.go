package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(memberEnvGroup) != "" { // this binary, run as a group member by a test
		runGroupMember()
	}
	brokertest.Main(m)
}

// observer is a ZooKeeper session of the test's own, to read the znodes.
func observer(t *testing.T, ens *zktest.Ensemble) *kafkazk.Client {
	t.Helper()
	zk, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(zk.Close)
	return zk
}

// client is a franz-go client over the running brokers.
func client(t testing.TB, c *brokertest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with replication factor 3 through franz-go's
// admin client, as a user would, and requires it created.
func createTopic(t testing.TB, c *brokertest.Cluster, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := kadm.NewClient(client(t, c)).CreateTopics(ctx, partitions, 3, configs, topic)
	require.NoError(t, err)
	require.NoError(t, created[topic].Err)
	waitTopicEverywhere(t, c, topic, partitions)
}

// waitTopicEverywhere waits until every running broker's metadata lists
// topic with a leader for each partition. CreateTopics answers once the
// controller wrote the topic; the brokers learn it from UpdateMetadata a
// moment later, and a group coordinator refuses commits for a topic it
// does not know yet (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's does).
func waitTopicEverywhere(t testing.TB, c *brokertest.Cluster, topic string, partitions int32) {
	t.Helper()
	for _, addr := range c.Addrs() {
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			pc, err := protocol.Dial(ctx, addr, "test")
			if err != nil {
				return false
			}
			defer pc.Close()
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := pc.Request(ctx, req)
			if err != nil {
				return false
			}
			m := resp.(*kmsg.MetadataResponse)
			if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != int(partitions) {
				return false
			}
			for _, p := range m.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "broker at %s learns topic %s", addr, topic)
	}
}

// waitController waits until /controller names a broker that ok accepts
// and returns it.
func waitController(t *testing.T, zk *kafkazk.Client, ok func(id int32) bool) int32 {
	t.Helper()
	var id int32
	require.Eventually(t, func() bool {
		var exists bool
		var err error
		id, exists, err = zk.ControllerID()
		return err == nil && exists && ok(id)
	}, 60*time.Second, 5*time.Millisecond, "a controller")
	return id
}

// waitLeaders waits until every partition of topic has a leader that
// live accepts, as the state znodes say, and returns the leaders.
func waitLeaders(t *testing.T, zk *kafkazk.Client, topic string, partitions int, live func(id int32) bool) map[int32]int32 {
	t.Helper()
	leaders := map[int32]int32{}
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || s.Leader < 0 || !live(s.Leader) {
				return false
			}
			leaders[p] = s.Leader
		}
		return true
	}, 60*time.Second, 5*time.Millisecond, "every partition of %s led by a live broker", topic)
	return leaders
}

// roundTrip produces n records to every partition of topic and reads
// them back, checking the values.
func roundTrip(t *testing.T, c *brokertest.Cluster, topic string, partitions int, tag string, n int) {
	t.Helper()
	p := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var want []string
	for part := range int32(partitions) {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", tag, part, i)
			want = append(want, v)
			require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(v)}).FirstErr())
		}
	}
	cons := client(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), len(want))
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), tag+"-") {
				got = append(got, string(r.Value))
			}
		})
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
}

// TestControllerFailoverWithBrokerProcesses: seed §1.1 with three broker
// processes on a three-node ZooKeeper ensemble. One broker is the
// controller and every broker says so in its Metadata answers; a topic
// created through franz-go's admin client gets a leader for every
// partition; the controller's process is killed (kill -9): another broker
// is elected, every partition is led by a live broker again, and records
// go through; that controller is stopped cleanly (SIGTERM): the third
// takes over at once, without waiting for a session to expire (within
// half a session timeout of the SIGTERM, the broker's controlled shutdown
// and exit included).
func TestControllerFailoverWithBrokerProcesses(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, nil)
	zk := observer(t, ens)
	alive := map[int32]bool{0: true, 1: true, 2: true}
	isAlive := func(id int32) bool { return alive[id] }

	first := waitController(t, zk, isAlive)
	clusterID, err := zk.ClusterID()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, addr := range c.Addrs() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				return false
			}
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
			cl.Close()
			if err != nil || resp.ControllerID != first || len(resp.Brokers) != 3 || resp.ClusterID == nil || *resp.ClusterID != clusterID {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every broker names controller %d, knows the three brokers and reports /cluster/id", first)

	const topic, partitions = "orders", 6
	createTopic(t, c, topic, partitions, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	waitLeaders(t, zk, topic, partitions, isAlive)
	roundTrip(t, c, topic, partitions, "before", 20)

	killed := time.Now()
	c.Broker(first).Kill()
	alive[first] = false
	second := waitController(t, zk, isAlive)
	elected := time.Since(killed)
	waitLeaders(t, zk, topic, partitions, isAlive)
	// The dead controller was a follower too: its successor, which never
	// saw it die, takes it out of every ISR at failover (a leader never
	// drops a follower whose log end matched its own).
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || slices.Contains(s.ISR, first) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "the dead controller leaves every ISR")
	t.Logf("kill -9 of controller %d: broker %d elected after %v, every partition led after %v (session timeout %v)",
		first, second, elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), zktest.SessionTimeout)
	roundTrip(t, c, topic, partitions, "after-kill", 20)

	stopped := time.Now()
	c.Broker(second).Stop(60 * time.Second)
	alive[second] = false
	third := waitController(t, zk, isAlive)
	handover := time.Since(stopped)
	waitLeaders(t, zk, topic, partitions, isAlive)
	t.Logf("clean stop of controller %d: broker %d elected %v after SIGTERM", second, third, handover.Round(time.Millisecond))
	// A stopping controller resigns and closes its ZooKeeper session
	// (Server.Shutdown), so /controller goes at once; a handover that
	// waited for the session to expire would take a session timeout.
	require.Less(t, handover, zktest.SessionTimeout/2, "a clean stop hands the controller over without waiting for its session to expire")
	e, err := zk.ControllerEpochValue()
	require.NoError(t, err)
	require.Equal(t, int32(3), e.Epoch, "three controllers, one epoch each")
}
