package ceiling_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
	"github.com/kafkaworkbook/workbook/stage06-performance/ceiling"
)

// BenchmarkThreads is seed §3.1's table on this machine: requests/s and
// p99 latency of small Produce requests (acks=1, one batch of 5 records
// of 100 bytes, about 650 bytes a request, to 8 partitions in turn) from
// 64 closed-loop connections (one request in flight each), against the
// stage 02 broker in this process with num.network.threads × num.io.threads
// from {1, 2, 3} × {1, 2, 4, 8}. The thread model is stage 02's
// (Processors and a RequestHandlerPool of goroutines), and the later
// stages do not change it. The load generator shares the two cores.
//
// req/s/io-thread divides the rate by num.io.threads: the seed's "each
// RequestHandler thread handles 2,000 QPS" (so 8 handle 16,000) is that
// number.
//
//	go test -run '^$' -bench Threads -benchtime 50000x -count 3 ./ceiling/
func BenchmarkThreads(b *testing.B) {
	for _, network := range []int{1, 2, 3} {
		for _, io := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("net=%d/io=%d", network, io), func(b *testing.B) {
				br := startStage02(b, map[string]string{
					"num.network.threads": strconv.Itoa(network),
					"num.io.threads":      strconv.Itoa(io),
				})
				const partitions = 8
				if _, err := br.Store().CreateTopic("threads", partitions, nil); err != nil {
					b.Fatal(err)
				}
				p, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: "threads", Partitions: partitions,
					Records: 5, RecordSize: 100, Acks: 1})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				load, err := loadgen.Dial(ctx, loadgen.Config{Addr: br.Addr().String(), Conns: 64,
					Requests: int64(b.N), AppendRequest: p.AppendRequest})
				if err != nil {
					b.Fatal(err)
				}
				defer load.Close()
				b.ResetTimer()
				res, err := load.Run(ctx)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.Rate(), "req/s")
				b.ReportMetric(res.Rate()/float64(io), "req/s/io-thread")
				b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
			})
		}
	}
}
