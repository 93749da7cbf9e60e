package server_test

import (
	"context"
	"fmt"
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
// controller's third job in seed §1.1, with four broker processes on a
// three-node ZooKeeper ensemble. A partition on {0,1,2} (led by 0) is
// moved to {1,2,3} through kadm (KIP-455) while an idempotent acks=all
// producer writes to it and a consumer reads it from the start, both all
// along: broker 3 copies the partition and joins the ISR, the leadership
// leaves broker 0, the assignment becomes {1,2,3}, and broker 0's replica
// is deleted. A second move, asked for the old way through
// /admin/reassign_partitions, brings broker 0 back as {2,3,0}. After each
// move the consumer has read every record acknowledged so far; at the end
// it has read every acknowledged record exactly once, in order, and the
// producer saw no error.
func TestAReassignmentMovesAPartitionUnderLoadAndDeletesTheOldReplica(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 4, nil)
	zk := observer(t, ens)
	const topic = "moving"
	tp := commitlog.TopicPartition{Topic: topic, Partition: 0}
	createAssigned(t, c, topic, map[int32][]int32{0: {0, 1, 2}}, map[string]string{"min.insync.replicas": "2"})
	waitLeaders(t, zk, topic, 1, func(id int32) bool { return id == 0 })

	// The producer: numbered records, every result kept.
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
			prod.Produce(context.Background(), &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(sent))}, func(r *kgo.Record, err error) {
				if err == nil && r.ProducerID < 0 {
					err = fmt.Errorf("record %s was produced without idempotence", r.Value)
				}
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
	// The consumer: reads the partition from the start while it moves.
	cons := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var readMu sync.Mutex
	var read []string
	consuming, stopConsuming := context.WithCancel(context.Background())
	defer stopConsuming()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consuming.Err() == nil {
			fs := cons.PollFetches(consuming)
			readMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Value)) })
			readMu.Unlock()
		}
	}()
	readCount := func() int { readMu.Lock(); defer readMu.Unlock(); return len(read) }
	progress := func(n int64) {
		from := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= from+n }, 60*time.Second, 5*time.Millisecond)
	}
	// caughtUp waits until the consumer has read every record acknowledged
	// so far (records on one partition are acknowledged in order, so the
	// first n of them).
	caughtUp := func(what string) {
		t.Helper()
		n := int(acked.Load())
		require.Eventually(t, func() bool { return readCount() >= n }, 60*time.Second, 5*time.Millisecond,
			"the consumer reads the %d records acknowledged %s", n, what)
		t.Logf("%s: %d records acknowledged, %d read", what, acked.Load(), readCount())
	}
	progress(2000)
	caughtUp("before the first move")

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
	// The controller writes the new partition state (a leader and an ISR
	// among {1,2,3}) before the assignment (Kafka's order, KIP-455 B3
	// before B6): once the assignment says {1,2,3}, the state must already.
	s, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	require.Contains(t, []int32{1, 2, 3}, s.Leader, "the state was written before the assignment: the leadership left broker 0")
	require.NotContains(t, s.ISR, int32(0), "the state was written before the assignment: the ISR is {1,2,3}")
	t.Logf("reassignment of %s from {0,1,2} to {1,2,3} complete after %v: leader %d, ISR %v", tp,
		time.Since(started).Round(time.Millisecond), s.Leader, s.ISR)
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
	caughtUp("after the first move")

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
	caughtUp("after the second move")

	close(stop)
	<-producing
	require.NoError(t, prod.Flush(ctx))
	mu.Lock()
	require.Empty(t, failures, "an idempotent producer retries until acknowledged")
	mu.Unlock()
	require.Equal(t, sent, int(acked.Load()), "every record acknowledged")
	caughtUp("at the end")
	stopConsuming()
	<-consumed

	readMu.Lock()
	defer readMu.Unlock()
	require.Len(t, read, sent, "every acknowledged record read once")
	for i, v := range read {
		require.Equal(t, strconv.Itoa(i), v, "every record once, in order")
	}
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
