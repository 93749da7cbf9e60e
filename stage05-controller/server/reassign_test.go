package server_test

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// createAssigned creates a topic with an explicit assignment.
func createAssigned(t *testing.T, c *brokertest.Cluster, topic string, assignment map[int32][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: replicas})
	}
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), client(t, c))
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode, "create %s", topic)
}

// TestAReassignmentMovesAPartitionUnderLoadAndDeletesTheOldReplica: the
// controller's third job in seed §1.1. With four brokers, a partition on
// {0,1,2} (led by 0) is moved to {1,2,3} while an idempotent acks=all
// producer and a consumer run: broker 3 copies the partition and joins the
// ISR, the leadership leaves broker 0, the assignment becomes {1,2,3},
// broker 0's replica is deleted, and every acknowledged record is read
// once, in order. A second move, asked for the old way through
// /admin/reassign_partitions, brings broker 0 back.
func TestAReassignmentMovesAPartitionUnderLoadAndDeletesTheOldReplica(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 4, nil)
	zk := observer(t, ens)
	const topic = "moving"
	tp := commitlog.TopicPartition{Topic: topic, Partition: 0}
	createAssigned(t, c, topic, map[int32][]int32{0: {0, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	waitLeaders(t, zk, topic, 1, func(id int32) bool { return id == 0 })

	prod := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(500))
	var acked atomic.Int64
	var mu sync.Mutex
	var failures []error
	sent := 0
	stop, producing := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(producing)
		for ; ; sent++ {
			select {
			case <-stop:
				return
			default:
			}
			prod.Produce(context.Background(), &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(sent))}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				acked.Add(1)
			})
		}
	}()
	progress := func(n int64) {
		from := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= from+n }, 60*time.Second, 5*time.Millisecond)
	}
	progress(2000)

	adm := kadm.NewClient(client(t, c))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{1, 2, 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started := time.Now()
	res, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	require.NoError(t, res.Error())

	require.Eventually(t, func() bool {
		data, _, err := zk.Conn().Get(kafkazk.TopicPath(topic))
		if err != nil {
			return false
		}
		a, err := kafkazk.DecodeTopicAssignment(topic, data)
		return err == nil && slices.Equal(a.Replicas[0], []int32{1, 2, 3}) && len(a.Adding) == 0 && len(a.Removing) == 0
	}, 60*time.Second, 10*time.Millisecond, "the assignment becomes {1,2,3}")
	s, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	t.Logf("reassignment of %s from {0,1,2} to {1,2,3} complete after %v: leader %d, ISR %v", tp,
		time.Since(started).Round(time.Millisecond), s.Leader, s.ISR)
	require.Contains(t, []int32{1, 2, 3}, s.Leader, "the leadership left broker 0")
	require.ElementsMatch(t, []int32{1, 2, 3}, s.ISR)
	require.Eventually(t, func() bool {
		matches, _ := filepath.Glob(filepath.Join(c.Broker(0).LogDir(), topic+"-0*"))
		for _, m := range matches {
			if !regexp.MustCompile(`-delete$`).MatchString(m) {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "broker 0's replica is deleted")
	listed, err := adm.ListPartitionReassignments(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, listed, "nothing in progress")
	progress(2000)

	// The old way, before KIP-455: kafka-reassign-partitions.sh wrote
	// /admin/reassign_partitions; the controller deletes it when done.
	require.NoError(t, zk.RequestReassignments([]kafkazk.Reassignment{{Topic: topic, Partition: 0, Replicas: []int32{2, 3, 0}}}))
	require.Eventually(t, func() bool {
		exists, _, err := zk.Conn().Exists(kafkazk.ReassignPartitionsPath)
		if err != nil || exists {
			return false
		}
		data, _, err := zk.Conn().Get(kafkazk.TopicPath(topic))
		if err != nil {
			return false
		}
		a, err := kafkazk.DecodeTopicAssignment(topic, data)
		return err == nil && slices.Equal(a.Replicas[0], []int32{2, 3, 0})
	}, 60*time.Second, 10*time.Millisecond, "the znode's move done and the znode deleted")
	progress(2000)

	close(stop)
	<-producing
	require.NoError(t, prod.Flush(ctx))
	mu.Lock()
	require.Empty(t, failures)
	mu.Unlock()
	cons := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < sent {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), sent)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		require.Equal(t, strconv.Itoa(i), v, "every record once, in order")
	}
	require.Equal(t, int(acked.Load()), len(got))
}

// TestLeadershipsGoBackToPreferredReplicas: after a broker is killed and
// comes back, it leads nothing; the controller's preferred leader election
// (auto.leader.rebalance.enable, checked every second here) gives it back
// the partitions whose first replica it is.
func TestLeadershipsGoBackToPreferredReplicas(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, map[string]string{"leader.imbalance.check.interval.seconds": "1"})
	zk := observer(t, ens)
	const topic, partitions = "balanced", 6
	assignment := map[int32][]int32{}
	for p := range int32(partitions) {
		assignment[p] = []int32{p % 3, (p + 1) % 3, (p + 2) % 3}
	}
	createAssigned(t, c, topic, assignment, nil)
	preferred := func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || s.Leader != assignment[p][0] || len(s.ISR) != 3 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, preferred, 30*time.Second, 10*time.Millisecond)

	c.Broker(0).Kill()
	waitLeaders(t, zk, topic, partitions, func(id int32) bool { return id != 0 })
	c.Broker(0).Start()
	restarted := time.Now()
	require.Eventually(t, preferred, 60*time.Second, 10*time.Millisecond, "every partition led by its preferred replica again")
	t.Logf("leaderships back on broker 0 %v after its restart", time.Since(restarted).Round(time.Millisecond))
	roundTrip(t, c, topic, partitions, "balanced", 5)
}
