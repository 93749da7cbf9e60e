package cluster

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// The benchmarks of seed §1.3 and §1.4 on three brokers in this process:
// what acks=all and min.insync.replicas cost against acks=1, and what a
// follower that stops copying costs acks=all before and after it leaves the
// ISR. The client is franz-go with its default batching (10 ms linger, one
// request in flight per broker, snappy) and idempotence off, producing
// 100-byte records to "orders", one partition on all three brokers led by
// broker 0. One op is one pass of a fixed workload; the figures are
// b.ReportMetric's, ns/op is left at zero.
//
//	cd stage04-isr-acks && go test -run '^$' -bench 'Acks|SlowFollower' -benchtime 1x ./cluster

const (
	benchValueSize = 100
	// benchRecords is the records of one throughput pass, produced in
	// chunks of benchChunk.
	benchRecords = 2_000_000
	benchChunk   = 100_000
	// benchBuffered bounds the records between Produce and their promises
	// (kgo.MaxBufferedRecords): Produce blocks beyond it, so a throughput
	// pass goes at the rate the cluster acknowledges.
	benchBuffered = 20_000
	// benchRate and benchPaced: a latency pass produces at a steady rate
	// far below every setting's throughput, so that what it measures is
	// the produce path and not a queue in the client.
	benchRate  = 5_000 // records per second
	benchPaced = 2 * time.Second
)

// benchTP is the partition the benchmarks produce to.
var benchTP = commitlog.TopicPartition{Topic: "orders", Partition: 0}

// BenchmarkAcks: acks 0, 1 and all, each with min.insync.replicas 1 and 2,
// replication factor 3. A sub-benchmark makes a throughput pass of
// benchRecords records produced asynchronously (rec/s: from the first
// Produce to the last promise) and a latency pass at benchRate records per
// second for benchPaced (p50-ms, p99-ms: from each Produce call to its
// promise). With acks=0 the promise fires when the request is written to
// the socket: its latency is the client's linger and write, no broker's.
// acks=all also reports vs-acks1, its records per second over those of an
// acks=1 client whose chunks take turns with its own on the same cluster:
// a baseline measured at the same moments, since two passes a second apart
// on two cores shared by three brokers and the client differ by up to a fifth
// (the aim is >= 0.8 with min.insync.replicas=2). One cluster per
// min.insync.replicas value serves its three acks values.
func BenchmarkAcks(b *testing.B) {
	settings := []struct {
		name string
		acks kgo.Acks
	}{{"0", kgo.NoAck()}, {"1", kgo.LeaderAck()}, {"all", kgo.AllISRAcks()}}
	for _, minISR := range []int{1, 2} {
		dir := b.TempDir()
		var c *Cluster // started by the first sub-benchmark that runs
		for _, s := range settings {
			b.Run(fmt.Sprintf("acks=%s/min.isr=%d", s.name, minISR), func(b *testing.B) {
				if c == nil {
					c = benchCluster(b, dir, map[string]string{server.KeyMinInsyncReplicas: fmt.Sprint(minISR)})
				}
				clients := []*kgo.Client{benchClient(b, c, s.acks)}
				if s.name == "all" {
					clients = append(clients, benchClient(b, c, kgo.LeaderAck()))
				}
				elapsed := make([]time.Duration, len(clients))
				var lat []time.Duration
				for range b.N {
					for i, d := range throughput(b, clients...) {
						elapsed[i] += d
					}
					lat = append(lat, producePaced(b, clients[0], benchRate, forDuration(benchPaced))...)
				}
				// Had a follower left the ISR, acks=all would have been
				// measured with two replicas.
				if got, _, err := c.ISR(benchTP); err != nil || !slices.Equal(got, []int32{0, 1, 2}) {
					b.Fatalf("the ISR is %v (%v) after the run, want [0 1 2]", got, err)
				}
				sum := summarize(lat)
				b.ReportMetric(float64(b.N*benchRecords)/elapsed[0].Seconds(), "rec/s")
				b.ReportMetric(ms(sum.p50), "p50-ms")
				b.ReportMetric(ms(sum.p99), "p99-ms")
				if len(elapsed) > 1 {
					b.ReportMetric(float64(b.N*benchRecords)/elapsed[1].Seconds(), "acks1-rec/s")
					// The same records in each: the ratio of rates is the
					// inverse ratio of times.
					b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "vs-acks1")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
		// One cluster at a time: two would share the two cores.
		if c != nil {
			c.Close()
		}
	}
}

// BenchmarkIdempotence: franz-go's idempotent producer (its default)
// against the same producer with idempotence off, acks=all, replication
// factor 3, taking turns chunk by chunk on one cluster; the aim is >= 0.95.
// With idempotence franz-go may keep up to five requests in flight per
// broker (without it, one); the broker checks each batch's sequence under
// the partition's producer-state lock.
//
//	cd stage04-isr-acks && go test -run '^$' -bench Idempotence -benchtime 1x ./cluster
func BenchmarkIdempotence(b *testing.B) {
	c := benchCluster(b, b.TempDir(), nil)
	defer c.Close()
	idempotent := benchClient(b, c, kgo.AllISRAcks(), kgo.ProducerLinger(10*time.Millisecond)) // an option that keeps idempotence on
	plain := benchClient(b, c, kgo.AllISRAcks())
	var elapsed [2]time.Duration
	for range b.N {
		for i, d := range throughput(b, idempotent, plain) {
			elapsed[i] += d
		}
	}
	b.ReportMetric(float64(b.N*benchRecords)/elapsed[0].Seconds(), "idempotent-rec/s")
	b.ReportMetric(float64(b.N*benchRecords)/elapsed[1].Seconds(), "plain-rec/s")
	b.ReportMetric(float64(elapsed[1])/float64(elapsed[0]), "idempotent/plain")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSlowFollower: acks=all latency at benchRate records per second
// (min.insync.replicas=2, replica.lag.time.max.ms=1000) in three phases:
//
//	healthy   benchPaced with all three replicas copying
//	stalled   from the moment broker 2's fetcher is paused, while it is
//	          still in the ISR, until the leader has dropped it: every
//	          batch waits for a copy that will not come, until the lag
//	          expires (seed §1.3)
//	shrunk    benchPaced with the ISR [0 1]
//
// It reports each phase's p99 (and the stalled phase's max), shrunk over
// healthy (the aim is <= 2), and how long after the pause the ISR shrank:
// between one and one and a half lags, since the leader looks for laggards
// every replica.lag.time.max.ms / 2, as Kafka's isr-expiration task does.
// Then broker 2 copies again and rejoins, so that b.N > 1 repeats the story.
func BenchmarkSlowFollower(b *testing.B) {
	const lag = time.Second
	c := benchCluster(b, b.TempDir(), map[string]string{server.KeyLagTimeMax: fmt.Sprint(lag.Milliseconds()),
		server.KeyMinInsyncReplicas: "2"})
	defer c.Close()
	cl := benchClient(b, c, kgo.AllISRAcks())
	follower, ok := c.Server(2)
	if !ok {
		b.Fatal("broker 2 is not running")
	}
	var healthy, stalled, shrunk []time.Duration
	var left time.Duration
	for range b.N {
		healthy = append(healthy, producePaced(b, cl, benchRate, forDuration(benchPaced))...)

		follower.Replicas.PauseFetching(true)
		paused := time.Now()
		stalled = append(stalled, producePaced(b, cl, benchRate, func() bool {
			isr, _, err := c.ISR(benchTP)
			// Bounded: awaitISR below fails if it never left.
			return err == nil && !slices.Contains(isr, 2) || time.Since(paused) > 30*lag
		})...)
		left += time.Since(paused)
		awaitISR(b, c, 0, 1)

		shrunk = append(shrunk, producePaced(b, cl, benchRate, forDuration(benchPaced))...)

		follower.Replicas.PauseFetching(false)
		awaitISR(b, c, 0, 1, 2)
	}
	h, st, sh := summarize(healthy), summarize(stalled), summarize(shrunk)
	b.ReportMetric(ms(h.p99), "healthy-p99-ms")
	b.ReportMetric(ms(st.p99), "stalled-p99-ms")
	b.ReportMetric(ms(st.max), "stalled-max-ms")
	b.ReportMetric(ms(sh.p99), "shrunk-p99-ms")
	b.ReportMetric(float64(sh.p99)/float64(h.p99), "shrunk/healthy")
	b.ReportMetric(ms(left)/float64(b.N), "left-isr-ms")
	b.ReportMetric(0, "ns/op")
}

// benchCluster is startCluster for benchmarks: three brokers with props in
// dir, and benchTP on all three, led by broker 0, with all three in its
// ISR. The caller closes it.
func benchCluster(b *testing.B, dir string, props map[string]string) *Cluster {
	b.Helper()
	c, err := Start(3, Options{Dir: dir, Props: props, Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Controller.CreateTopic(benchTP.Topic, 1, 3); err != nil {
		c.Close()
		b.Fatal(err)
	}
	awaitISR(b, c, 0, 1, 2)
	return c
}

// awaitISR polls until benchTP's stored ISR is want, in that order.
func awaitISR(b *testing.B, c *Cluster, want ...int32) {
	b.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, err := c.ISR(benchTP)
		if err == nil && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("ISR %v (%v), want %v", got, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchClient is a franz-go producer to benchTP with acks, idempotence off
// and at most benchBuffered records buffered, whose connection and
// metadata are ready: one record has gone through it.
func benchClient(b *testing.B, c *Cluster, acks kgo.Acks, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	if len(opts) == 0 {
		opts = []kgo.Opt{kgo.DisableIdempotentWrite()}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.RequiredAcks(acks),
		kgo.DefaultProduceTopic(benchTP.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(benchBuffered)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, benchValueSize)}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return cl
}

// throughput produces benchRecords records with each client, the clients
// taking turns a chunk at a time so that each sees the machine as the
// others do, and returns each client's time.
func throughput(b *testing.B, clients ...*kgo.Client) []time.Duration {
	b.Helper()
	elapsed := make([]time.Duration, len(clients))
	for done := 0; done < benchRecords; done += benchChunk {
		for i, cl := range clients {
			elapsed[i] += produceAsync(b, cl, min(benchChunk, benchRecords-done))
		}
	}
	return elapsed
}

// produceAsync produces n records as fast as cl takes them and returns the
// time from the first Produce until every promise has fired.
func produceAsync(b *testing.B, cl *kgo.Client, n int) time.Duration {
	b.Helper()
	var f failures
	value := make([]byte, benchValueSize)
	start := time.Now()
	for range n {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) { f.add(err) })
	}
	flush(b, cl)
	elapsed := time.Since(start)
	f.check(b, n)
	return elapsed
}

// producePaced produces rate records per second, a millisecond's share at
// a time, until done reports true (asked once a millisecond), and returns
// each record's latency from its Produce call to its promise.
func producePaced(b *testing.B, cl *kgo.Client, rate int, done func() bool) []time.Duration {
	b.Helper()
	const tick = time.Millisecond
	perTick := max(1, rate/int(time.Second/tick))
	var (
		f   failures
		mu  sync.Mutex
		lat []time.Duration // guarded by mu: promises run on the client's goroutines
	)
	value := make([]byte, benchValueSize)
	n := 0
	for next := time.Now(); !done(); next = next.Add(tick) {
		time.Sleep(time.Until(next))
		for range perTick {
			start := time.Now()
			cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				d := time.Since(start)
				f.add(err)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			})
		}
		n += perTick
	}
	flush(b, cl)
	f.check(b, n)
	mu.Lock()
	defer mu.Unlock()
	return lat
}

// forDuration is a done function for producePaced that reports true once d
// has passed since it was made.
func forDuration(d time.Duration) func() bool {
	deadline := time.Now().Add(d)
	return func() bool { return !time.Now().Before(deadline) }
}

// flush waits until every record cl holds has its promise fired.
func flush(b *testing.B, cl *kgo.Client) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// failures counts the records whose promise got an error; promises add to
// it from the client's goroutines.
type failures struct {
	mu    sync.Mutex
	n     int   // guarded by mu
	first error // guarded by mu
}

func (f *failures) add(err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n++; f.first == nil {
		f.first = err
	}
}

// check fails the benchmark if any of the n records failed: a figure over
// records that were not all written is no figure.
func (f *failures) check(b *testing.B, n int) {
	b.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n > 0 {
		b.Fatalf("%d of %d records failed, the first with: %v", f.n, n, f.first)
	}
}

// latencySummary is what the benchmarks report of a set of latencies.
type latencySummary struct{ p50, p99, max time.Duration }

// summarize sorts lat and returns its median, 99th percentile and maximum.
func summarize(lat []time.Duration) latencySummary {
	slices.Sort(lat)
	return latencySummary{p50: quantile(lat, 0.50), p99: quantile(lat, 0.99), max: quantile(lat, 1)}
}

// quantile is the nearest-rank q-quantile of sorted: the smallest latency
// that at least a fraction q of them do not exceed. Zero if there are none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms is d in milliseconds, for b.ReportMetric.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
