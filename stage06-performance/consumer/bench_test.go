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
// the start by our consumer and by franz-go's, from an in-process stage
// 02 broker and from kfake. The two clients take turns (ours first on
// even rounds, franz-go first on odd ones), so that both meet the same
// machine: on a shared 2-core box, a run's rates move by a quarter from
// one second to the next, their ratio much less. Reported:
//
//	ours/franz-go          our records/s over franz-go's: the figure to read
//	ours-rec/s, franz-go-rec/s
//	                       records read a second, from creating the client
//	                       to the last record
//	ours-allocs/rec, franz-go-allocs/rec
//	                       heap allocations of the whole process per
//	                       record (the in-process broker's included, the
//	                       same for both)
//	ours-B/rec, franz-go-B/rec
//	                       the bytes they took
//
// Both loops check that each partition's offsets come without a gap, and
// touch every value.
//
//	go test -run '^$' -bench BenchmarkConsume -benchtime 4x -count 3 ./consumer/
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
			b.Run("ours-vs-franz-go", func(b *testing.B) {
				var ours, franz reads
				for i := range b.N {
					readOurs := func() {
						ours.measure(b, n, func(ctx context.Context) (int, int64) { return consumeOurs(b, ctx, addr, partitions, n) })
					}
					readFranz := func() {
						franz.measure(b, n, func(ctx context.Context) (int, int64) { return consumeFranz(b, ctx, addr, partitions, n) })
					}
					if i%2 == 0 {
						readOurs()
						readFranz()
					} else {
						readFranz()
						readOurs()
					}
				}
				b.ReportMetric(ours.rate()/franz.rate(), "ours/franz-go")
				ours.report(b, "ours")
				franz.report(b, "franz-go")
			})
		})
	}
}

// reads adds up one client's reads.
type reads struct {
	records, mallocs, bytesAllocated int64
	elapsed                          time.Duration
}

// measure reads the n records once and adds the figures up.
func (r *reads) measure(b *testing.B, n int, read func(context.Context) (records int, bytes int64)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	records, _ := read(ctx)
	r.elapsed += time.Since(start)
	runtime.ReadMemStats(&after)
	if records < n {
		b.Fatalf("read %d of %d records", records, n)
	}
	r.records += int64(records)
	r.mallocs += int64(after.Mallocs - before.Mallocs)
	r.bytesAllocated += int64(after.TotalAlloc - before.TotalAlloc)
}

func (r *reads) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

func (r *reads) report(b *testing.B, client string) {
	b.ReportMetric(r.rate(), client+"-rec/s")
	b.ReportMetric(float64(r.mallocs)/float64(r.records), client+"-allocs/rec")
	b.ReportMetric(float64(r.bytesAllocated)/float64(r.records), client+"-B/rec")
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
