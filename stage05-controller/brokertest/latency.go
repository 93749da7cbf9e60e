package brokertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// LatencyRun is one produce-latency measurement against a cluster of
// broker processes: franz-go producing Size-byte records at Rate records
// per second to a new topic of Partitions partitions and replication
// factor RF (RF 3: acks=all and idempotence, as franz-go's defaults; RF 1:
// acks=1 without idempotence, the baseline), linger 0 and no compression,
// as chapter 8's cluster benchmark sets franz-go.
type LatencyRun struct {
	RF, Partitions, Size int
	Rate                 int // records per second
	Warmup, Window       time.Duration
	// Client, if set, makes the producer under test instead of franz-go
	// (a later stage's own producer: final measures the course's).
	Client func(addrs []string, rf int) (LatencyClient, error)
}

// A LatencyClient is a producer under test, reduced to what ProduceLatency
// needs: Produce hands value over for topic and calls done once the record
// is acknowledged or has failed (on any goroutine).
type LatencyClient interface {
	Produce(ctx context.Context, topic string, value []byte, done func(error))
	Flush(ctx context.Context) error
	Close()
}

// kgoClient is franz-go as a LatencyClient.
type kgoClient struct{ cl *kgo.Client }

func (k kgoClient) Produce(ctx context.Context, topic string, value []byte, done func(error)) {
	k.cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) { done(err) })
}
func (k kgoClient) Flush(ctx context.Context) error { return k.cl.Flush(ctx) }
func (k kgoClient) Close()                          { k.cl.Close() }

// newKgo is the default client: franz-go with chapter 8's settings.
func newKgo(addrs []string, rf int) (LatencyClient, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if rf == 1 {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	return kgoClient{cl}, err
}

// ProduceLatency runs r against c and returns each record's time from its
// Produce call to its acknowledgement, measured in the window after the
// warm-up, sorted. It fails tb if a record is not acknowledged. Issue 26
// runs it against brokers as processes on 127.0.0.1, with no container and
// no proxy between the client and the brokers (stage 05's brokers, and
// final's through MainWith), to set them apart from chapter 8's cluster
// in containers.
func ProduceLatency(tb testing.TB, c *Cluster, r LatencyRun) []time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), r.Warmup+r.Window+2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("latency-rf%d-%d", r.RF, time.Now().UnixNano())
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, int32(r.Partitions), int16(r.RF), nil, topic); err != nil {
		tb.Fatalf("CreateTopic %s: %v", topic, err)
	}
	newClient := r.Client
	if newClient == nil {
		newClient = newKgo
	}
	p, err := newClient(c.Addrs(), r.RF)
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close()
	// The topic is ready once a record goes through: its leaders known,
	// its ISRs whole enough for acks=all.
	for {
		ready := make(chan error, 1)
		p.Produce(ctx, topic, []byte("ready"), func(err error) { ready <- err })
		err := <-ready
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			tb.Fatalf("the first record to %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed error
	)
	value := make([]byte, r.Size)
	const tick = time.Millisecond
	perTick := max(1, r.Rate/int(time.Second/tick))
	start := time.Now()
	for next := start; time.Since(start) < r.Warmup+r.Window; next = next.Add(tick) {
		time.Sleep(time.Until(next))
		measured := time.Since(start) >= r.Warmup
		for range perTick {
			sent := time.Now()
			p.Produce(ctx, topic, value, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && failed == nil {
					failed = err
				}
				if measured {
					lat = append(lat, time.Since(sent))
				}
			})
		}
	}
	if err := p.Flush(ctx); err != nil {
		tb.Fatalf("flush: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		tb.Fatalf("a record to %s was not acknowledged: %v", topic, failed)
	}
	slices.Sort(lat)
	return lat
}

// ReportLatency reports sorted latencies' median, 99th percentile and
// maximum on b (ack-p50-ms, ack-p99-ms, ack-max-ms) and in its log.
func ReportLatency(b *testing.B, what string, sorted []time.Duration) {
	b.Helper()
	if len(sorted) == 0 {
		b.Fatalf("%s: no latency measured", what)
	}
	q := func(f float64) float64 {
		i := min(max(int(f*float64(len(sorted)))-1, 0), len(sorted)-1)
		return float64(sorted[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "ack-p50-ms")
	b.ReportMetric(q(0.99), "ack-p99-ms")
	b.ReportMetric(q(1), "ack-max-ms")
	b.Logf("%s: %d records, ack p50 %.2f ms, p90 %.2f, p99 %.2f, max %.2f", what, len(sorted), q(0.5), q(0.9), q(0.99), q(1))
}

// A NamedClient is a producer BenchmarkProduceLatency compares; a nil New
// is franz-go's (kgo, linger 0, no compression).
type NamedClient struct {
	Name string
	New  func(addrs []string, rf int) (LatencyClient, error)
}

// BenchmarkProduceLatency is the processes' latency benchmark of issue 26,
// for a stage's broker as this package builds it: one ZooKeeper server in
// a container (off the data path) and three brokers as processes on
// 127.0.0.1, then, for each client, ProduceLatency at chapter 8's settings
// (100-byte records, 10,000 a second, six partitions, 3 s of warm-up and
// a 10 s window), RF3 acks=all with min.insync.replicas=2 and the RF1
// acks=1 baseline, each a sub-benchmark client/rfN reported with
// ReportLatency; brokers names them in the log.
func BenchmarkProduceLatency(b *testing.B, brokers string, clients ...NamedClient) {
	ens := zktest.StartEnsemble(b, 1)
	c := Start(b, ens, 3, map[string]string{"min.insync.replicas": "2", "replica.fetch.wait.max.ms": "500"})
	for _, client := range clients {
		for _, rf := range []int{3, 1} {
			b.Run(fmt.Sprintf("%s/rf%d", client.Name, rf), func(b *testing.B) {
				run := LatencyRun{RF: rf, Partitions: 6, Size: 100, Rate: 10_000,
					Warmup: 3 * time.Second, Window: 10 * time.Second, Client: client.New}
				for range b.N {
					ReportLatency(b, fmt.Sprintf("%s, %s, RF%d", brokers, client.Name, rf), ProduceLatency(b, c, run))
				}
			})
		}
	}
}
