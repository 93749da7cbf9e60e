package replica

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// BenchmarkLeaderAndIsr10000Partitions measures what a controlled shutdown
// asks of a surviving broker at 10,000 partitions (chapter 5's Speed, where
// applying it took 2.4-5.3 s): one LeaderAndIsr that makes this broker
// leader, at a new leader epoch, of 10,000 partitions it followed, which
// stops their fetches and records the new epoch in each leader epoch cache.
// Each op is that one request; making the partitions followers again
// between ops is not timed. Meanwhile a goroutine looks a partition up
// (Manager.Partition, as every Produce and Fetch does) in a loop:
// max-lookup-ms is the longest one waited, what a client's request to any
// partition of the broker waits behind the LeaderAndIsr; durable-ms is
// the time from the request until every new epoch is in its checkpoint
// file (written in the background, epochFlushLoop).
//
// The logs are in a temporary directory: set TMPDIR to a directory on a
// real disk (fsync is free on tmpfs).
func BenchmarkLeaderAndIsr10000Partitions(b *testing.B) {
	const n = 10_000
	st, err := store.Open(b.TempDir(), 0, commitlog.DefaultManagerConfig(), store.Options{Logger: quiet, MaxPartitions: n})
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	m, err := NewManager(Config{BrokerID: 0, FetchBackoff: time.Second, HighWatermarkCheckpointInterval: time.Hour},
		st, Options{Logger: quiet})
	require.NoError(b, err)
	b.Cleanup(func() { m.Close() })

	tps := make([]commitlog.TopicPartition, n)
	for i := range tps {
		tps[i] = commitlog.TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)}
	}
	// Broker 1 leads at an address nobody listens on: its fetcher only
	// dials and backs off, so what is measured is the Manager's own work.
	leaders := map[int32]string{1: "127.0.0.1:1"}
	epoch := int32(-1)
	become := func(leader int32) {
		epoch++
		states := make(map[commitlog.TopicPartition]LeaderAndIsrState, n)
		for _, tp := range tps {
			states[tp] = LeaderAndIsrState{Leader: leader, LeaderEpoch: epoch, Replicas: []int32{0, 1}, ISR: []int32{0, 1}}
		}
		results, err := m.LeaderAndIsr(0, states, leaders)
		require.NoError(b, err)
		for tp, err := range results {
			require.NoError(b, err, tp)
		}
	}
	become(1) // creates the 10,000 logs: followers of broker 1

	var maxLookup atomic.Int64 // nanoseconds
	stop := make(chan struct{})
	var looking sync.WaitGroup
	looking.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			m.Partition(tps[i%n].Topic, tps[i%n].Partition)
			if d := int64(time.Since(start)); d > maxLookup.Load() {
				maxLookup.Store(d)
			}
			time.Sleep(200 * time.Microsecond) // a request now and then, not a core spinning
		}
	})
	// durable is the time until every new epoch is in its checkpoint
	// file, which LeaderAndIsr leaves to the background.
	var durable time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		become(0)
		b.StopTimer()
		for _, tp := range tps {
			p, _ := m.Partition(tp.Topic, tp.Partition)
			for !p.Epochs.Flushed() {
				time.Sleep(time.Millisecond)
			}
		}
		durable += time.Since(start)
		become(1)
		b.StartTimer()
	}
	b.StopTimer()
	close(stop)
	looking.Wait()
	b.ReportMetric(float64(maxLookup.Load())/1e6, "max-lookup-ms")
	b.ReportMetric(float64(durable.Milliseconds())/float64(b.N), "durable-ms")
}
