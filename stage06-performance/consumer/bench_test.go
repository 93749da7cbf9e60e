package consumer_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

// BenchmarkConsume is the consumer half of seed §2.3.1's claim, measured
// as Kreps measured Kafka's in 2014 (one consumer, 100-byte records, six
// partitions): 1,000,000 records pre-produced by franz-go, then read from
// the start by our consumer and by franz-go's, in the same run, from an
// in-process stage 02 broker and from kfake. Reported per client:
//
//	records/s     records read a second, from the first Poll to the last record
//	MB/s          values read a second (MiB)
//	allocs/record heap allocations of the whole process per record, and
//	B/record      the bytes they took: the in-process broker's are counted
//	              too, the same for both clients
//
// Both loops check that each partition's offsets come without a gap, and
// touch every value.
//
//	go test -run '^$' -bench BenchmarkConsume -benchtime 1x -count 3 ./consumer/
func BenchmarkConsume(b *testing.B) {
	const partitions, n, size = 6, 1_000_000, 100
	for _, cluster := range []struct {
		name  string
		start func(testing.TB) string
	}{{"stage02", startBroker}, {"kfake", func(t testing.TB) string { return startFake(t, 1) }}} {
		b.Run(cluster.name, func(b *testing.B) {
			addr := cluster.start(b)
			createTopic(b, addr, "bench", partitions)
			preProduce(b, addr, "bench", n, size)
			// One read first, unmeasured, so that neither client pays for
			// what the produce left behind (garbage, cold caches).
			consumeFranz(b, context.Background(), addr, partitions, n)
			b.Run("ours", func(b *testing.B) {
				measure(b, n, func(ctx context.Context) (int, int64) { return consumeOurs(b, ctx, addr, partitions, n) })
			})
			b.Run("franz-go", func(b *testing.B) {
				measure(b, n, func(ctx context.Context) (int, int64) { return consumeFranz(b, ctx, addr, partitions, n) })
			})
		})
	}
}

// measure reads the n records b.N times and reports the rates over all
// the reads.
func measure(b *testing.B, n int, read func(context.Context) (records int, bytes int64)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	records, bytes := 0, int64(0)
	for range b.N {
		r, by := read(ctx)
		if r < n {
			b.Fatalf("read %d of %d records", r, n)
		}
		records, bytes = records+r, bytes+by
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(bytes)/(1<<20)/elapsed.Seconds(), "MB/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(records), "allocs/record")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(records), "B/record")
}

func consumeOurs(b *testing.B, ctx context.Context, addr string, partitions int32, n int) (int, int64) {
	cfg, err := consumer.ParseConfig(map[string]string{"bootstrap.servers": addr, "auto.offset.reset": "earliest"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := consumer.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	var parts []consumer.TopicPartition
	for p := range partitions {
		parts = append(parts, consumer.TopicPartition{Topic: "bench", Partition: p})
	}
	if err := c.Assign(ctx, parts...); err != nil {
		b.Fatal(err)
	}
	records, bytes := 0, int64(0)
	next := make([]int64, partitions)
	for records < n {
		recs, err := c.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for i := range recs {
			r := &recs[i]
			if r.Offset != next[r.Partition] {
				b.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			bytes += int64(len(r.Value))
		}
		records += len(recs)
	}
	return records, bytes
}

func consumeFranz(b *testing.B, ctx context.Context, addr string, partitions int32, n int) (int, int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("bench"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	records, bytes := 0, int64(0)
	next := make([]int64, partitions)
	for records < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				b.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			bytes += int64(len(r.Value))
			records++
		})
	}
	return records, bytes
}

// preProduce writes n records of size random bytes (null keys)
// round-robin, uncompressed, in batches of up to 1 MiB, acks=1.
func preProduce(b *testing.B, addr, topic string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	values := make([]byte, 1<<20+size) // records take windows of it: no two alike, nothing to compress
	rand.NewChaCha8([32]byte{3, 4}).Read(values)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	ctx := context.Background()
	for i := range n {
		wg.Add(1)
		at := i * 7919 % (1 << 20)
		cl.Produce(ctx, &kgo.Record{Value: values[at : at+size]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}
