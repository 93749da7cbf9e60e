package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// soakDuration is how long TestSoak churns: SOAK_DURATION (a Go duration;
// make soak sets 10m), else a short run that make test affords.
func soakDuration(t *testing.T) time.Duration {
	d := 15 * time.Second
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err, "SOAK_DURATION")
	}
	return d
}

// TestSoak runs, for a bounded time, everything that takes this broker's
// locks at once, and checks that nothing deadlocks, stalls or loses a
// record:
//
//   - franz-go's idempotent producer writes with acks=all to six partitions
//     (min.insync.replicas=2, small segments, so that logs roll and producer
//     snapshots are written), so acks=all produces wait in the Produce
//     purgatory and every leader keeps producer state;
//   - two consumers read every partition with long polls, so fetches park
//     in the Fetch purgatory and wake on appends and high watermarks;
//   - the followers' fetchers append what they copy (the listener builds
//     their producer state) and park at their leaders;
//   - a churner moves a random partition's leadership to another ISR member
//     every few tens of milliseconds: LeaderAndIsr on every replica, which
//     stops and restarts fetchers while they apply answers;
//   - a pauser stops one broker's fetching for longer than
//     replica.lag.time.max.ms now and then, so ISRs shrink and grow again
//     (ISR writes to the state store, on the shrink timer and on the
//     fetch path).
//
// A watchdog fails the test with every goroutine's stack if the producer
// makes no progress for 30 s (a deadlock shows there). At the end, every
// record is acknowledged and read back exactly once, in the order
// produced; the consumers saw each partition as one gapless sequence.
// SOAK_DURATION sets the length (make soak: 10 minutes), SOAK_SEED replays
// a logged run's random choices.
func TestSoak(t *testing.T) {
	const topic, partitions = "soak", 6
	duration := soakDuration(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SOAK_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "SOAK_SEED")
	}
	t.Logf("soak for %s, seed %d (replay: SOAK_SEED=%d)", duration, seed, seed)

	tc := startCluster(t, map[string]string{"min.insync.replicas": "2", "log.segment.bytes": "65536"})
	require.NoError(t, tc.Controller.CreateTopic(topic, partitions, 3))
	tps := make([]commitlog.TopicPartition, partitions)
	for i := range tps {
		tps[i] = commitlog.TopicPartition{Topic: topic, Partition: int32(i)}
	}
	waitAllISRs := func(within time.Duration) {
		t.Helper()
		whole := func() bool {
			for _, tp := range tps {
				if isr, _, err := tc.ISR(tp); err != nil || len(isr) != 3 {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(within); !whole(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("an ISR is not whole after %s; partitions:\n%s", within, describePartitions(tc, tps))
			}
		}
	}
	waitAllISRs(30 * time.Second)

	var (
		acked, moves, pauses atomic.Int64
		mu                   sync.Mutex // guards failed and the consumers' problems
		failed               []error
		problems             []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}

	// The producer, whose last log lines a stall prints.
	plog := &ringLog{max: 300}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tc.Addrs()...), kgo.DefaultProduceTopic(topic),
		kgo.WithLogger(kgo.BasicLogger(plog, kgo.LogLevelInfo, nil)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(2000), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	require.NoError(t, err)
	defer cl.Close()
	sent := make([]int, partitions) // records produced to each partition, numbered from 0
	stop := make(chan struct{})
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
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

	// Two consumers, long-polling every partition; each checks that a
	// partition reads as 0, 1, 2, ... with no gap and no repeat.
	ctx, cancelConsumers := context.WithCancel(context.Background())
	defer cancelConsumers()
	var consumers sync.WaitGroup // apart from workers: they read until the end
	for c := range 2 {
		consumer, err := kgo.NewClient(kgo.SeedBrokers(tc.Addrs()...), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.MetadataMinAge(50*time.Millisecond),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsetsAtStart(partitions)}))
		require.NoError(t, err)
		defer consumer.Close()
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			next := make([]int, partitions)
			for ctx.Err() == nil {
				fs := consumer.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					want := fmt.Sprintf("%d-%d", r.Partition, next[r.Partition])
					if string(r.Value) != want {
						fail("consumer %d: %s-%d at offset %d holds %q, want %q", c, r.Topic, r.Partition, r.Offset, r.Value, want)
					}
					next[r.Partition]++
				})
			}
		}()
	}

	// The churner: leadership moves, cleanly, to another ISR member.
	rng := rand.New(rand.NewPCG(seed, 0))
	var rngMu sync.Mutex // the churner and the pauser share rng
	intN := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }
	workers.Add(1)
	go func() {
		defer workers.Done()
		for {
			t := time.NewTimer(time.Duration(20+intN(80)) * time.Millisecond)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			tp := tps[intN(partitions)]
			leader, err := tc.Controller.MoveLeader(tp, func(c []int32) int32 { return c[intN(len(c))] })
			if err != nil {
				fail("move %s's leader: %v", tp, err)
				continue
			}
			if leader >= 0 {
				moves.Add(1)
			}
		}
	}()

	// The pauser: one broker at a time stops fetching for twice
	// replica.lag.time.max.ms, so its replicas leave the ISRs and then
	// come back.
	workers.Add(1)
	go func() {
		defer workers.Done()
		for {
			t := time.NewTimer(time.Duration(1000+intN(2000)) * time.Millisecond)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			s, ok := tc.Server(int32(intN(3)))
			if !ok {
				continue
			}
			s.Replicas.PauseFetching(true)
			pauses.Add(1)
			t = time.NewTimer(2 * lagMax)
			select {
			case <-stop:
			case <-t.C:
			}
			t.Stop()
			s.Replicas.PauseFetching(false)
		}
	}()

	// The watchdog and the progress line.
	start := time.Now()
	last, lastAt := acked.Load(), time.Now()
	tick := time.NewTicker(time.Second)
	for time.Since(start) < duration {
		<-tick.C
		if n := acked.Load(); n > last {
			last, lastAt = n, time.Now()
		}
		if time.Since(lastAt) > 30*time.Second {
			tick.Stop()
			close(stop)
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			t.Fatalf("no record acknowledged for 30 s after %d (moves %d, pauses %d): a deadlock or a stuck state\n"+
				"partitions:\n%s\nthe producer's last log lines:\n%s\ngoroutines:\n%s",
				last, moves.Load(), pauses.Load(), describePartitions(tc, tps), plog.String(), stacks.String())
		}
		if sec := int(time.Since(start).Seconds()); sec%10 == 0 {
			t.Logf("%3ds: %d acknowledged, %d leader moves, %d fetch pauses", sec, acked.Load(), moves.Load(), pauses.Load())
		}
	}
	tick.Stop()
	close(stop)
	workers.Wait() // the producer, churner and pauser; the consumers go on
	waitAllISRs(60 * time.Second)
	flushCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.Flush(flushCtx), "every record acknowledged")
	mu.Lock()
	require.Empty(t, failed, "an idempotent producer retries until acknowledged")
	mu.Unlock()

	total := 0
	for _, tp := range tps {
		read := tc.readPartition(tp)
		total += len(read)
		for n, v := range read {
			require.Equal(t, fmt.Sprintf("%d-%d", tp.Partition, n), v, "%s at offset %d: every record once, in order", tp, n)
		}
		require.Len(t, read, sent[tp.Partition], "%s: every record sent is acknowledged and read", tp)
	}
	cancelConsumers()
	consumers.Wait()
	mu.Lock()
	require.Empty(t, problems, "the consumers read every partition as one gapless sequence")
	mu.Unlock()
	require.Equal(t, int(acked.Load()), total)
	t.Logf("soaked %s: %d records acknowledged and read back, %d leader moves, %d fetch pauses",
		duration, total, moves.Load(), pauses.Load())
}

// offsetsAtStart is every partition from its start.
func offsetsAtStart(partitions int) map[int32]kgo.Offset {
	out := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		out[int32(p)] = kgo.NewOffset().AtStart()
	}
	return out
}

// describePartitions is what each broker holds of each partition, and the
// state store's leader and ISR: what a stall is read from.
func describePartitions(tc *testCluster, tps []commitlog.TopicPartition) string {
	var b strings.Builder
	for _, tp := range tps {
		isr, version, err := tc.ISR(tp)
		fmt.Fprintf(&b, "%s: stored ISR %v (version %d, err %v)\n", tp, isr, version, err)
		for id := int32(0); id < 3; id++ {
			s, ok := tc.Server(id)
			if !ok {
				fmt.Fprintf(&b, "  broker %d: not running\n", id)
				continue
			}
			p, ok := s.Replicas.Partition(tp.Topic, tp.Partition)
			if !ok {
				fmt.Fprintf(&b, "  broker %d: no partition\n", id)
				continue
			}
			leader, epoch := p.Leader()
			_, inISR := p.Replicas()
			fmt.Fprintf(&b, "  broker %d: %v, leader %d epoch %d, isr %v, log end %d, high watermark %d", id, p.Role(), leader, epoch, inISR, p.Log.EndOffset(), p.HighWatermark())
			for _, r := range []int32{0, 1, 2} {
				if st, ok := p.Remote(r); ok {
					fmt.Fprintf(&b, "; follower %d at %d, caught up %s ago", r, st.LogEndOffset, time.Since(st.LastCaughtUpTime).Round(time.Millisecond))
				}
			}
			fmt.Fprintf(&b, "; epochs %v\n", p.Epochs.Entries())
		}
	}
	return b.String()
}

// ringLog keeps the last max lines written to it.
type ringLog struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (r *ringLog) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, strings.TrimRight(string(p), "\n"))
	if len(r.lines) > r.max {
		r.lines = r.lines[len(r.lines)-r.max:]
	}
	return len(p), nil
}

func (r *ringLog) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}
