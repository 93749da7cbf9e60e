package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkRebalance measures how long a group of ten franz-go consumers
// takes to rebalance after its tenth member joins: nine members own the
// 20 partitions of a topic; the timer starts when the tenth client is
// created and stops when all ten own partitions, each partition once.
// Brokers run with group.initial.rebalance.delay.ms=0, on three processes
// and one ZooKeeper server.
//
// The nine members learn that a rebalance began from their next heartbeat
// (REBALANCE_IN_PROGRESS), so the heartbeat interval bounds the figure:
// franz-go's default 3 s, and 100 ms. The eager protocol (range) revokes
// everything and reassigns; the cooperative one (cooperative-sticky) takes
// two rebalances, the second only for the moved partitions.
//
//	go test -run '^$' -bench BenchmarkRebalance -benchtime 5x ./server/
func BenchmarkRebalance(b *testing.B) {
	ens := zktest.StartStandalone(b)
	c := brokertest.Start(b, ens, 3, groupProps)
	createTopic(b, c, "rebalanced", 20, nil)
	for _, heartbeat := range []time.Duration{3 * time.Second, 100 * time.Millisecond} {
		for _, balancer := range []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.CooperativeStickyBalancer()} {
			b.Run(fmt.Sprintf("%s/heartbeat=%v", balancer.ProtocolName(), heartbeat), func(b *testing.B) {
				var total time.Duration
				for i := range b.N {
					b.StopTimer()
					group := fmt.Sprintf("rebalance-%s-%v-%d", balancer.ProtocolName(), heartbeat, i)
					opts := []kgo.Opt{kgo.Balancers(balancer), kgo.HeartbeatInterval(heartbeat)}
					members := startFranzGoMembers(b, c, "rebalanced", group, 9, opts...)
					waitOwners(b, members, 20)
					b.StartTimer()
					start := time.Now()
					members = append(members, startFranzGoMembers(b, c, "rebalanced", group, 1, opts...)...)
					waitOwners(b, members, 20)
					total += time.Since(start)
					b.StopTimer()
					for _, m := range members {
						m.cl.Close() // LeaveGroup: the next iteration's group starts clean
					}
				}
				b.ReportMetric(total.Seconds()/float64(b.N), "s-rebalance")
			})
		}
	}
}

// BenchmarkOffsetCommits measures offset commits per second against the
// baseline of the same run: acks=all produces of one 100-byte record to a
// topic of replication factor 3 (an offset commit is such a produce to
// __consumer_offsets, plus the coordinator's work). One client commits
// one partition's offset at a time (kadm's CommitOffsets: generation -1,
// an Empty group), or 8 clients commit concurrently, each for its own
// group; "produce" does the same with ProduceSync.
//
//	go test -run '^$' -bench BenchmarkOffsetCommits -benchtime 5s ./server/
func BenchmarkOffsetCommits(b *testing.B) {
	ens := zktest.StartStandalone(b)
	c := brokertest.Start(b, ens, 3, groupProps)
	createTopic(b, c, "baseline", 1, nil)
	ctx := context.Background()
	// The first FindCoordinator creates __consumer_offsets: before the timer.
	warm := kadm.NewClient(client(b, c))
	for range 2 {
		var o kadm.Offsets
		o.AddOffset("baseline", 0, 0, -1)
		for {
			if r, err := warm.CommitOffsets(ctx, "warm-up", o); err == nil && r.Ok() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("commit/clients=%d", clients), func(b *testing.B) {
			adms := make([]*kadm.Client, clients)
			for i := range adms {
				adms[i] = kadm.NewClient(client(b, c))
			}
			runConcurrently(b, clients, func(i int, n int64) error {
				var o kadm.Offsets
				o.AddOffset("baseline", 0, n, -1)
				r, err := adms[i].CommitOffsets(ctx, fmt.Sprintf("committer-%d", i), o)
				if err != nil {
					return err
				}
				return r.Error()
			}, "commits/s")
		})
		b.Run(fmt.Sprintf("produce/clients=%d", clients), func(b *testing.B) {
			cls := make([]*kgo.Client, clients)
			for i := range cls {
				cls[i] = client(b, c, kgo.DefaultProduceTopic("baseline"), kgo.RequiredAcks(kgo.AllISRAcks()))
			}
			value := make([]byte, 100)
			runConcurrently(b, clients, func(i int, _ int64) error {
				return cls[i].ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr()
			}, "produces/s")
		})
	}
}

// runConcurrently runs b.N calls of op split over clients goroutines and
// reports their rate under unit.
func runConcurrently(b *testing.B, clients int, op func(client int, n int64) error, unit string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if err := op(i, n); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), unit)
}
