package producer_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// BenchmarkBatching is seed §2.2.1's trade, measured: our producer sends
// 100-byte records without keys (acks=1) to a topic of six partitions on
// one stage 02 broker in a child process, with every batch.size from
// 1 KiB to 1 MiB (16 KiB is Kafka's default) and linger.ms 0, 5 and 20.
//
//   - batch.size=…/linger.ms=…: as fast as the producer takes them (the
//     application blocks on buffer.memory when the broker falls behind).
//   - throughput=…/linger.ms=…: at a fixed rate, as kafka-producer-perf-test
//     --throughput does, with batch.size 16 KiB: what linger.ms buys (fuller
//     batches) and costs (latency) when records come slower than batches
//     fill. The loop sleeps between records it owes; Go wakes it about
//     every millisecond, so records come in small bursts (records/wake).
//
// Reported: records/s and MB/s of values, from the first Produce to the
// last callback; records/batch, the mean over the batches the broker
// stored (read back with Fetch after the run: the producer does not count
// them); the latency of each record from Produce to its callback, mean and
// p99, in ms (as fast as the producer goes, that is mostly the wait for
// buffer.memory: 32 MiB of batches queue ahead of a record). Each run gets
// a topic of its own, so that its batches can be counted.
//
//	cd stage06-performance && go test -run '^$' -bench Batching -count 3 ./producer/ | tee batching.txt
func BenchmarkBatching(b *testing.B) {
	value := []byte(strings.Repeat("v", 100))
	var addr string // one broker for every sub-benchmark
	broker := func() string {
		if addr == "" {
			addrs, _ := startBrokerProcess(b, b.TempDir())
			addr = addrs[0]
		}
		return addr
	}
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, linger := range []int{0, 5, 20} {
			b.Run(fmt.Sprintf("batch.size=%d/linger.ms=%d", size, linger), func(b *testing.B) {
				sweepRun(b, broker(), size, linger, 0, value)
			})
		}
	}
	for _, rate := range []int{5_000, 50_000} {
		for _, linger := range []int{0, 1, 2, 5, 20} {
			b.Run(fmt.Sprintf("throughput=%d/linger.ms=%d", rate, linger), func(b *testing.B) {
				sweepRun(b, broker(), 16<<10, linger, rate, value)
			})
		}
	}
}

// sweepTopics numbers the topics of BenchmarkBatching's runs.
var sweepTopics atomic.Int64

// sweepRun produces b.N records to a new topic with batch.size size and
// linger.ms linger, at rate records a second (0: as fast as it can), and
// reports the rate, the batches' fill and the latencies.
func sweepRun(b *testing.B, addr string, size, linger, rate int, value []byte) {
	topic := fmt.Sprintf("batching-%d", sweepTopics.Add(1))
	const partitions = 6
	createTopic(b, []string{addr}, topic, partitions, 1)
	p := newProducer(b, []string{addr}, "acks", "1", "batch.size", fmt.Sprint(size), "linger.ms", fmt.Sprint(linger))
	ctx := context.Background()
	// The first record waits for metadata and a connection; it goes alone
	// in a batch of its own, left out of records/batch below.
	require.NoError(b, p.Produce(ctx, &producer.Record{Topic: topic, Value: value}, nil))
	require.NoError(b, p.Flush(ctx))

	latencies := make([]time.Duration, b.N) // Produce to callback, one per record
	var acked, failed atomic.Int64
	cb := func(r *producer.Record, err error) {
		if err != nil {
			failed.Add(1)
			return
		}
		latencies[acked.Add(1)-1] = time.Since(r.Timestamp)
	}
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	m := startMeasure()
	start, wakes := m.start, 0
	for i := 0; i < b.N; {
		due := b.N
		if rate > 0 {
			// The records owed by now; none owed: sleep until the next.
			due = min(b.N, 1+int(time.Since(start).Seconds()*float64(rate)))
			if due <= i {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
				continue
			}
			wakes++
		}
		for ; i < due; i++ {
			// Timestamp is the record's CreateTime, which Produce would
			// take from the clock anyway; the callback measures from it.
			if err := p.Produce(ctx, &producer.Record{Topic: topic, Value: value, Timestamp: time.Now()}, cb); err != nil {
				b.Fatal(err)
			}
		}
	}
	require.NoError(b, p.Flush(ctx))
	m.report(b) // stops the timer
	require.Zero(b, failed.Load())

	batches, records := -1, -1 // without the first record's batch
	for part := range int32(partitions) {
		for _, h := range storedBatches(b, addr, topic, part) {
			batches++
			records += int(h.NumRecords)
		}
	}
	require.Equal(b, b.N, records, "records stored")
	b.ReportMetric(float64(records)/float64(batches), "records/batch")
	lat := latencies[:acked.Load()]
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	if rate > 0 {
		b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
		b.ReportMetric(float64(b.N)/float64(wakes), "records/wake")
	}
}
