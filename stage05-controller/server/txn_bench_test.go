package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkTransactionalThroughput measures a transactional producer
// against the baseline of the same run, an idempotent one: franz-go
// writes records of 100 bytes to a topic of 3 partitions, replication
// factor 3, acks=all, as fast as it can; the transactional one commits
// every 100 records (the aim: at least 0.8 of idempotent) and
// every 1,000. Each commit's latency (Flush and EndTransaction: the
// transaction's records still in flight, then the EndTxn round trip, as
// Java's commitTransaction) is reported at p50 and p99. Three broker processes, one ZooKeeper server.
//
//	go test -run '^$' -bench BenchmarkTransactionalThroughput -benchtime 20000x ./server/
func BenchmarkTransactionalThroughput(b *testing.B) {
	ens := zktest.StartStandalone(b)
	c := brokertest.Start(b, ens, 3, txnProps)
	createTopic(b, c, "txn-bench", 3, nil)
	value := make([]byte, 100)
	ctx := context.Background()
	b.Run("idempotent", func(b *testing.B) {
		cl := client(b, c, kgo.DefaultProduceTopic("txn-bench"), kgo.RequiredAcks(kgo.AllISRAcks()))
		b.SetBytes(int64(len(value)))
		b.ResetTimer()
		for range b.N {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	for _, perTxn := range []int{100, 1000} {
		b.Run(fmt.Sprintf("transactional/records-per-txn=%d", perTxn), func(b *testing.B) {
			cl := client(b, c, kgo.DefaultProduceTopic("txn-bench"), kgo.TransactionalID(fmt.Sprintf("bench-%d-%d", perTxn, b.N)))
			var commits []time.Duration
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				if err := cl.BeginTransaction(); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < perTxn && sent < b.N; i, sent = i+1, sent+1 {
					cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				start := time.Now()
				if err := cl.Flush(ctx); err != nil { // franz-go's EndTransaction wants its records flushed
					b.Fatal(err)
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					b.Fatal(err)
				}
				commits = append(commits, time.Since(start))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			slices.Sort(commits)
			q := func(f float64) float64 {
				return float64(commits[min(len(commits)-1, int(f*float64(len(commits))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "ms-commit-p50")
			b.ReportMetric(q(0.99), "ms-commit-p99")
		})
	}
}
