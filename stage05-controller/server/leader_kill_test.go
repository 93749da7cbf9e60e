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

// TestLeaderKilledUnderAnIdempotentProducerLosesAndDuplicatesNothing:
// seed §1.3-§1.4 end to end. franz-go's idempotent producer writes with
// acks=all to three partitions (replication factor 3,
// min.insync.replicas=2) while a consumer reads; the process of partition
// 0's leader is killed (kill -9). The controller elects a new leader from
// the ISR, the producer retries there, and later the killed broker comes
// back and catches up. At the end every acknowledged record has been read
// exactly once, in the order produced on its partition.
func TestLeaderKilledUnderAnIdempotentProducerLosesAndDuplicatesNothing(t *testing.T) {
	ens := zktest.StartEnsemble(t, 3)
	c := brokertest.Start(t, ens, 3, map[string]string{"log.segment.bytes": "65536"})
	zk := observer(t, ens)
	const topic, partitions = "payments", 3
	createTopic(t, c, topic, partitions, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	alive := map[int32]bool{0: true, 1: true, 2: true}
	var aliveMu sync.Mutex
	isAlive := func(id int32) bool { aliveMu.Lock(); defer aliveMu.Unlock(); return alive[id] }
	waitLeaders(t, zk, topic, partitions, isAlive)

	// The producer: numbered records per partition, every result kept.
	prod := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(1000))
	var acked atomic.Int64
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
					produceErrs = append(produceErrs, err)
					errMu.Unlock()
					return
				}
				acked.Add(1)
			})
		}
	}()
	// The consumer: reads every partition from the start, all along.
	cons := client(t, c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {
		0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	var readMu sync.Mutex
	read := make([][]string, partitions)
	consuming, stopConsuming := context.WithCancel(context.Background())
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consuming.Err() == nil {
			fs := cons.PollFetches(consuming)
			readMu.Lock()
			fs.EachRecord(func(r *kgo.Record) { read[r.Partition] = append(read[r.Partition], string(r.Value)) })
			readMu.Unlock()
		}
	}()
	progress := func(n int64, what string) {
		from := acked.Load()
		require.Eventually(t, func() bool { return acked.Load() >= from+n }, 60*time.Second, 5*time.Millisecond,
			"the producer goes on %s", what)
	}

	progress(500, "before the kill")
	tp := commitlog.TopicPartition{Topic: topic, Partition: 0}
	before, _, err := zk.PartitionState(tp)
	require.NoError(t, err)
	victim := before.Leader
	killed := time.Now()
	c.Broker(victim).Kill()
	aliveMu.Lock()
	alive[victim] = false
	aliveMu.Unlock()
	leaders := waitLeaders(t, zk, topic, partitions, isAlive)
	t.Logf("kill -9 of broker %d, leader of %s: broker %d leads it after %v", victim, tp, leaders[0],
		time.Since(killed).Round(time.Millisecond))
	require.Contains(t, before.ISR, leaders[0], "the new leader comes from the ISR")
	progress(500, "with the leader killed")

	c.Broker(victim).Start()
	aliveMu.Lock()
	alive[victim] = true
	aliveMu.Unlock()
	require.Eventually(t, func() bool {
		for p := range int32(partitions) {
			s, _, err := zk.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil || !slices.Contains(s.ISR, victim) {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond, "the restarted broker rejoins every ISR")
	progress(500, "after the restart")

	close(stop)
	<-producing
	fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer fcancel()
	require.NoError(t, prod.Flush(fctx))
	errMu.Lock()
	require.Empty(t, produceErrs, "an idempotent producer retries until acknowledged")
	errMu.Unlock()
	total := int(acked.Load())
	require.Eventually(t, func() bool {
		readMu.Lock()
		defer readMu.Unlock()
		n := 0
		for _, r := range read {
			n += len(r)
		}
		return n >= total
	}, 60*time.Second, 10*time.Millisecond, "the consumer reads every acknowledged record")
	stopConsuming()
	<-consumed

	readMu.Lock()
	defer readMu.Unlock()
	dups := 0
	for p := range partitions {
		var order []int
		seen := map[string]bool{}
		for _, v := range read[p] {
			if seen[v] {
				dups++
			}
			seen[v] = true
			n, err := strconv.Atoi(strings.TrimPrefix(v, fmt.Sprintf("%d-", p)))
			require.NoError(t, err)
			order = append(order, n)
		}
		want := make([]int, sent[p])
		for i := range want {
			want[i] = i
		}
		require.True(t, slices.Equal(want, order), "partition %d: every record once, in order (%d sent, %d read)", p, len(want), len(order))
	}
	t.Logf("%d records acknowledged and read, %d duplicates", total, dups)
	require.Zero(t, dups)
}
