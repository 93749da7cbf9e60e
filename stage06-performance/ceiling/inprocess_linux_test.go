package ceiling_test

import (
	"context"
	"testing"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage06-performance/ceiling"
)

// BenchmarkStage02Ceiling is BenchmarkBrokerCeiling's rf1 phase against
// the stage 02 broker in this process, with the raw write next to it: the
// same load, no ZooKeeper, no replication layer, and one process to
// profile, broker and load generator together:
//
//	go test -run '^$' -bench Stage02Ceiling -benchtime 1x -count 3 ./ceiling/
//	go test -run '^$' -bench Stage02Ceiling -benchtime 1x -cpuprofile cpu.out ./ceiling/
//	go tool pprof -top ceiling.test cpu.out
//
// cpu-s/GB is this process's CPU (broker and load generator) per GB of
// batch bytes.
func BenchmarkStage02Ceiling(b *testing.B) {
	br := startStage02(b, nil)
	addr := br.Addr().String()
	ctx := context.Background()
	c, err := protocol.Dial(ctx, addr, "ceiling-admin")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for range b.N {
		raw := rawPhase(b)
		topic := "stage02-" + topicSuffix()
		if _, err := br.Store().CreateTopic(topic, ceilingPartitions, nil); err != nil {
			b.Fatal(err)
		}
		p := ceilingLoad(b, topic, 1)
		n := ceilingRequests(p)
		load, err := loadgen.Dial(ctx, loadgen.Config{Addr: addr, Conns: ceilingConns, InFlight: ceilingInFlight,
			Requests: int64(n), AppendRequest: p.AppendRequest})
		if err != nil {
			b.Fatal(err)
		}
		before, err := ceiling.EndOffsets(ctx, c, topic, ceilingPartitions)
		if err != nil {
			b.Fatal(err)
		}
		warmPageCache(b, n*len(p.Batch()))
		cpu0 := selfCPU(b)
		res, err := load.Run(ctx)
		cpu := selfCPU(b) - cpu0
		load.Close()
		if err != nil {
			b.Fatal(err)
		}
		after, err := ceiling.EndOffsets(ctx, c, topic, ceilingPartitions)
		if err != nil {
			b.Fatal(err)
		}
		if got, want := ceiling.Appended(before, after), int64(n*p.Records()); got != want {
			b.Fatalf("%s: %d records appended, %d sent", topic, got, want)
		}
		bytes := float64(n * len(p.Batch()))
		mbps := bytes / 1e6 / res.Elapsed.Seconds()
		b.ReportMetric(raw.mbps(), "raw-MB/s")
		b.ReportMetric(mbps, "MB/s")
		b.ReportMetric(float64(n*p.Records())/res.Elapsed.Seconds(), "rec/s")
		b.ReportMetric(mbps/raw.mbps(), "broker/raw")
		b.ReportMetric(float64(res.P99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(cpu.Seconds()/(bytes/1e9), "cpu-s/GB")
	}
	b.ReportMetric(0, "ns/op")
}
