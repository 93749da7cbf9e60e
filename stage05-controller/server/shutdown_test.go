package server_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestControlledShutdownMovesLeadershipsFirst: seed §1.1's controlled
// shutdown, end to end. Three brokers serve a topic of 9 partitions
// (replication factor 3, min.insync.replicas=2) while franz-go's
// idempotent producer writes to all of them with acks=all. The broker
// that leads the most partitions is stopped with SIGTERM: before its
// network goes, it asks the controller to move its leaderships, and the
// controller does (its log says "controlled shutdown succeeded" before
// "network server stopped"); when it has exited, every partition's state
// in ZooKeeper names one of the two others as leader. The producer never
// sees an error (what it meets, NOT_LEADER_OR_FOLLOWER, it retries by
// itself), and every record it produced is read back exactly once, in
// order, on its partition.
func TestControlledShutdownMovesLeadershipsFirst(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	// A lag longer than the test waits: only the controller can take the
	// stopped broker out of the ISRs in time, not its leaders' lag timers.
	c := brokertest.Start(t, ens, 3, map[string]string{"replica.lag.time.max.ms": "30000"})
	zk := observer(t, ens)
	const topic, partitions = "ledger", 9
	createTopic(t, c, topic, partitions, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	all := func(id int32) bool { return id >= 0 && id < 3 }
	ctrl := waitController(t, zk, all)
	leaders := waitLeaders(t, zk, topic, partitions, all)

	// The producer: numbered records, round-robin over the partitions,
	// every result kept.
	prod := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(1000))
	var acked atomic.Int64
	var slowest atomic.Int64 // the longest a record waited for its acknowledgement, in ns
	var errMu sync.Mutex
	var produceErrs []error
	sent := make([]int, partitions)
	stop := make(chan struct{})
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := int32(i % partitions)
			v := fmt.Sprintf("%d-%d", p, sent[p])
			sent[p]++
			prod.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil && r.ProducerID < 0 {
					err = fmt.Errorf("record %s was produced without idempotence", r.Value)
				}
				if err != nil {
					errMu.Lock()
					produceErrs = append(produceErrs, fmt.Errorf("record %s: %w", r.Value, err))
					errMu.Unlock()
					return
				}
				acked.Add(1)
				if d := int64(time.Since(r.Timestamp)); d > slowest.Load() {
					slowest.Store(d) // one callback at a time per partition; a lost race only loses a log figure
				}
			})
		}
	}()
	progress := func(n int64, what string) {
		from := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= from+n }, 60*time.Second, 5*time.Millisecond,
			"the producer goes on %s", what)
	}
	progress(1000, "before the stop")

	// The victim: the broker that leads the most partitions; of those
	// that lead as many, one that is not the controller, so that its
	// ControlledShutdown request goes over the network, as it usually
	// does.
	led := map[int32]int{}
	for _, l := range leaders {
		led[l]++
	}
	victim := int32(-1)
	for id := range int32(3) {
		if victim < 0 || led[id] > led[victim] || (led[id] == led[victim] && victim == ctrl) {
			victim = id
		}
	}
	t.Logf("leaders %v: broker %d leads %d of %d partitions (controller: broker %d)", leaders, victim, led[victim], partitions, ctrl)
	require.Positive(t, led[victim])

	stopped := time.Now()
	c.Broker(victim).Stop(60 * time.Second)
	took := time.Since(stopped)

	// Right after the exit, with nothing waited for: ZooKeeper already
	// names another leader for every partition.
	for p := range int32(partitions) {
		s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
		require.NoError(t, err)
		require.NotEqual(t, victim, s.Leader, "partition %d is still led by the stopped broker: %+v", p, s)
		require.True(t, s.Leader >= 0 && s.Leader < 3, "partition %d has a leader among the others: %+v", p, s)
	}
	// And, soon, the stopped broker is in no ISR: the controller took it
	// out as a follower, and again if a leader put it back while it was
	// exiting (it is not told LeaderAndIsr while it shuts down, but a
	// fetch already in flight may land).
	var lingering []int32
	for p := range int32(partitions) {
		s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
		require.NoError(t, err)
		if slices.Contains(s.ISR, victim) {
			lingering = append(lingering, p)
		}
	}
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || slices.Contains(s.ISR, victim) {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "broker %d leaves every ISR, taken out by the controller (the lag is 30 s)", victim)
	t.Logf("at its exit broker %d was still in the ISR of partitions %v; out of every ISR %v after SIGTERM",
		victim, lingering, time.Since(stopped).Round(time.Millisecond))

	// Its log: the controlled shutdown succeeded before the network
	// server stopped, and the broker shut down cleanly.
	log := c.Broker(victim).Log()
	succeeded := strings.Index(log, `msg="controlled shutdown succeeded"`)
	networkStopped := strings.Index(log, `msg="network server stopped"`)
	require.NotEqual(t, -1, succeeded, "broker %d logs a successful controlled shutdown", victim)
	require.NotEqual(t, -1, networkStopped, "broker %d logs its network server stopping", victim)
	require.Less(t, succeeded, networkStopped, "the leaderships moved before the network stopped")
	require.NotContains(t, log, "controlled shutdown incomplete")
	require.NotContains(t, log, "proceeding with an unclean shutdown")
	require.Contains(t, log, `msg="broker shut down cleanly"`)
	t.Logf("SIGTERM to broker %d (leader of %d partitions%s): controlled shutdown and exit in %v",
		victim, led[victim], map[bool]string{true: ", the controller", false: ""}[victim == ctrl], took.Round(time.Millisecond))

	progress(1000, "after the stop")
	close(stop)
	<-producing
	fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer fcancel()
	require.NoError(t, prod.Flush(fctx))
	errMu.Lock()
	require.Empty(t, produceErrs, "the producer saw no error")
	errMu.Unlock()
	total := 0
	for _, n := range sent {
		total += n
	}
	require.Equal(t, int64(total), acked.Load(), "every record produced was acknowledged")

	// Every record read back once, in order, by a consumer of the two
	// brokers left, reading by partition.
	offsets := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	read := make([][]string, partitions)
	n := 0
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	for n < total {
		fs := cons.PollFetches(rctx)
		require.NoError(t, rctx.Err(), "read %d of %d records", n, total)
		fs.EachRecord(func(r *kgo.Record) {
			read[r.Partition] = append(read[r.Partition], string(r.Value))
			n++
		})
	}
	// Anything more would be a duplicate: one more short poll finds none.
	qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
	defer qcancel()
	cons.PollFetches(qctx).EachRecord(func(r *kgo.Record) {
		read[r.Partition] = append(read[r.Partition], string(r.Value))
	})
	for p := range partitions {
		var order []int
		for _, v := range read[p] {
			i, err := strconv.Atoi(strings.TrimPrefix(v, fmt.Sprintf("%d-", p)))
			require.NoError(t, err, "record %q on partition %d", v, p)
			order = append(order, i)
		}
		want := make([]int, sent[p])
		for i := range want {
			want[i] = i
		}
		require.True(t, slices.Equal(want, order), "partition %d: every record once, in order (%d sent, %d read)", p, len(want), len(order))
	}
	t.Logf("%d records produced with acks=all, none failed, each read back once; the slowest acknowledged after %v",
		total, time.Duration(slowest.Load()).Round(time.Millisecond))
}
