package cluster_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
)

func benchCluster(b *testing.B, n int) *cluster.Cluster {
	c, err := cluster.Start(n, cluster.Options{Dir: b.TempDir(), Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkReplicationThroughput: franz-go producing 100-byte records with
// acks=all to a partition with three replicas and to one with a single
// replica on the same three brokers, alternating chunks so both see the
// same machine. A record counts when its acks=all answer arrives, which is
// when it is below the high watermark. One op is one record.
//
//	go test -run '^$' -bench ReplicationThroughput -benchtime 500000x ./cluster
func BenchmarkReplicationThroughput(b *testing.B) {
	c := benchCluster(b, 3)
	if err := c.Controller.CreateTopic("rf3", 1, 3); err != nil {
		b.Fatal(err)
	}
	if err := c.Controller.CreateTopic("rf1", 1, 1); err != nil {
		b.Fatal(err)
	}
	topics := []string{"rf3", "rf1"}
	var clients []*kgo.Client
	for _, topic := range topics {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients = append(clients, cl)
	}
	value := make([]byte, 100)
	var elapsed [2]time.Duration
	const chunk = 20_000
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		n := min(chunk, b.N-done)
		for i, cl := range clients {
			start := time.Now()
			for range n {
				cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			elapsed[i] += time.Since(start)
		}
	}
	b.StopTimer()
	rf3, rf1 := float64(b.N)/elapsed[0].Seconds(), float64(b.N)/elapsed[1].Seconds()
	b.ReportMetric(rf3, "rf3-rec/s")
	b.ReportMetric(rf1, "rf1-rec/s")
	b.ReportMetric(rf3/rf1, "rf3/rf1")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReplicationLatency: batches of 10 records appended straight to
// the leader's partition at 10,000 records per second; each latency is from
// the append's return to the moment the high watermark passes the batch,
// that is, until both followers fetched it and the leader learned so from
// their next fetch. One op is one batch.
//
//	go test -run '^$' -bench ReplicationLatency -benchtime 3000x ./cluster
func BenchmarkReplicationLatency(b *testing.B) {
	c := benchCluster(b, 3)
	if err := c.Controller.CreateTopic("latency", 1, 3); err != nil {
		b.Fatal(err)
	}
	leader, _ := c.Broker(0)
	p, ok := leader.Replicas.Partition("latency", 0)
	if !ok {
		b.Fatal("no leader replica")
	}
	recs := make([]record.Record, 10)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: make([]byte, 100)}
	}
	wake := make(chan struct{}, 1)
	p.HWAdvanced.Watch(wake)
	defer p.HWAdvanced.Unwatch(wake)

	const interval = time.Millisecond // 10 records per ms: 10,000 records/s
	latencies := make([]time.Duration, 0, b.N)
	next := time.Now()
	b.ResetTimer()
	for range b.N {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		data, err := record.AppendBatch(nil, record.NewBatch(time.Now().UnixMilli(), recs...))
		if err != nil {
			b.Fatal(err)
		}
		_, last, err := p.AppendAsLeader(data)
		if err != nil {
			b.Fatal(err)
		}
		appended := time.Now()
		for p.HighWatermark() <= last {
			select {
			case <-wake:
			case <-time.After(10 * time.Second):
				b.Fatal("the high watermark did not advance")
			}
		}
		latencies = append(latencies, time.Since(appended))
	}
	b.StopTimer()
	slices.Sort(latencies)
	q := func(f float64) float64 {
		return float64(latencies[int(math.Ceil(f*float64(len(latencies))))-1].Microseconds())
	}
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds()), "max-µs")
}
