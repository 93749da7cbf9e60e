package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// TestFaultsUnderAnIdempotentProducerLoseAndDuplicateNothing is issue
// 10's fault run: franz-go's idempotent producer writes with acks=all to
// three partitions (min.insync.replicas=2, small segments so that producer
// snapshots are written at rolls) while, one after the other, a leader
// moves, a broker restarts cleanly, and a broker is killed (its disk as
// kill -9 leaves it) and restarts. Each fault comes once the producer has
// made progress since the last and every ISR is whole again. At the end
// every record is acknowledged, and read back exactly once, in the order
// produced, on every partition. The same run without idempotence (a
// producer with no producer id, so the brokers cannot tell a retry) is the
// baseline: it loses nothing either, and its duplicates are logged.
func TestFaultsUnderAnIdempotentProducerLoseAndDuplicateNothing(t *testing.T) {
	t.Run("idempotent", func(t *testing.T) { faultRun(t, true) })
	t.Run("not idempotent", func(t *testing.T) { faultRun(t, false) })
}

func faultRun(t *testing.T, idempotent bool) {
	const topic, partitions, faults = "faults", 3, 9
	tc := startCluster(t, map[string]string{"min.insync.replicas": "2", "log.segment.bytes": "16384"})
	require.NoError(t, tc.Controller.CreateTopic(topic, partitions, 3))
	tps := make([]commitlog.TopicPartition, partitions)
	for i := range tps {
		tps[i] = commitlog.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	waitAllISRs := func() {
		require.Eventually(t, func() bool {
			for _, tp := range tps {
				if isr, _, err := tc.ISR(tp); err != nil || len(isr) != 3 {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "every ISR whole again")
	}
	waitAllISRs()

	opts := []kgo.Opt{kgo.SeedBrokers(tc.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()

	var acked atomic.Int64
	var mu sync.Mutex
	var failed []error
	sent := make([]int, partitions) // records produced to each partition, numbered from 0
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
			value := fmt.Sprintf("%d-%d", p, sent[p])
			sent[p]++
			cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(value)}, func(r *kgo.Record, err error) {
				if err == nil && idempotent && r.ProducerID < 0 {
					err = fmt.Errorf("record %s was produced without idempotence", r.Value)
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					return
				}
				acked.Add(1)
			})
		}
	}()
	progress := func(n int64, what string) {
		from := acked.Load()
		if assert.Eventually(t, func() bool { return acked.Load() >= from+n }, 30*time.Second, 5*time.Millisecond,
			"the producer goes on %s", what) {
			return
		}
		// What the cluster looked like when the producer stalled.
		for _, tp := range tps {
			isr, version, err := tc.ISR(tp)
			t.Logf("%s: ISR %v at version %d, err %v", tp, isr, version, err)
			for _, id := range []int32{0, 1, 2} {
				s, ok := tc.Server(id)
				if !ok {
					continue
				}
				if p, ok := s.Replicas.Partition(tp.Topic, tp.Partition); ok {
					if v, ok := p.LeaderView(); ok {
						t.Logf("  broker %d leads: %+v", id, v)
					}
				}
			}
		}
		mctx, mcancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, cl)
		mcancel()
		if err != nil {
			t.Logf("client's metadata request: %v", err)
		} else {
			for _, b := range resp.Brokers {
				t.Logf("metadata broker %d %s:%d", b.NodeID, b.Host, b.Port)
			}
			for _, tt := range resp.Topics {
				for _, p := range tt.Partitions {
					t.Logf("metadata %s-%d leader %d epoch %d isr %v err %d", *tt.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, p.ErrorCode)
				}
			}
		}
		mu.Lock()
		t.Logf("acknowledged %d (from %d), buffered %d, errors %v", acked.Load(), from, cl.BufferedProduceRecords(), failed)
		mu.Unlock()
		t.FailNow()
	}

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAULTS_SEED"); s != "" { // replay a logged run
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "FAULTS_SEED")
	}
	t.Logf("seed %d (replay: FAULTS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range faults {
		progress(500, "before the fault")
		victim := int32(rng.IntN(3))
		switch round % 3 {
		case 0:
			tp := tps[rng.IntN(partitions)]
			s, ok := tc.Controller.State(tp)
			require.True(t, ok)
			leader := (s.Leader + 1 + int32(rng.IntN(2))) % 3
			t.Logf("fault %d: %s's leader moves from %d to %d", round, tp, s.Leader, leader)
			require.NoError(t, tc.Controller.ElectLeader(tp, leader))
		case 1:
			t.Logf("fault %d: broker %d restarts cleanly", round, victim)
			require.NoError(t, tc.StopBroker(victim))
			require.NoError(t, tc.Controller.BrokerStopped(victim))
			progress(200, "with a broker stopped")
			require.NoError(t, tc.StartBroker(victim))
			require.NoError(t, tc.Controller.BrokerStarted(victim))
		case 2:
			t.Logf("fault %d: broker %d is killed and restarts", round, victim)
			tc.kill(victim, append(tps, tc.tp)...)
			progress(200, "with a broker killed")
			require.NoError(t, tc.StartBroker(victim))
			require.NoError(t, tc.Controller.BrokerStarted(victim))
		}
		waitAllISRs()
	}
	close(stop)
	<-producing
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.Flush(ctx))
	mu.Lock()
	require.Empty(t, failed, "an idempotent producer retries until acknowledged")
	mu.Unlock()

	total, dups, reordered := 0, 0, 0
	for _, tp := range tps {
		read := tc.readPartition(tp)
		total += len(read)
		seen := make([]int, sent[tp.Partition])
		last := -1
		for _, v := range read {
			n, err := strconv.Atoi(strings.TrimPrefix(v, fmt.Sprintf("%d-", tp.Partition)))
			require.NoError(t, err, "record %q", v)
			require.Less(t, n, len(seen), "record %q was never sent", v)
			if seen[n]++; seen[n] > 1 {
				dups++
			} else if n < last {
				reordered++
			}
			last = max(last, n)
		}
		for n, c := range seen {
			require.NotZero(t, c, "%s: record %d-%d was acknowledged and is lost", tp, tp.Partition, n)
		}
	}
	t.Logf("%d faults: %d records acknowledged, %d read, %d duplicates, %d out of order", faults, acked.Load(), total, dups, reordered)
	if idempotent {
		require.Zero(t, dups, "no record appended twice")
		require.Zero(t, reordered, "in the order produced")
		require.Equal(t, int(acked.Load()), total)
	}
}
