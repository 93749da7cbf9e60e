package compat_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkProduceLatencyProcesses is stage 05's benchmark of the same
// name against final's brokers as processes on 127.0.0.1 (this package's
// TestMain builds them): franz-go's acknowledgement latency at 10,000
// records/s, RF3 acks=all with min.insync.replicas=2 and the RF1 acks=1
// baseline, with no container and no proxy between the client and the
// brokers. Chapter 8 sets it beside its cluster in containers (issue 26).
//
//	cd final && go test -run '^$' -bench ProduceLatencyProcesses -benchtime 1x -v ./compat
func BenchmarkProduceLatencyProcesses(b *testing.B) {
	ens := zktest.StartEnsemble(b, 1)
	c := brokertest.Start(b, ens, 3, map[string]string{"min.insync.replicas": "2", "replica.fetch.wait.max.ms": "500"})
	for _, rf := range []int{3, 1} {
		b.Run(fmt.Sprintf("rf%d", rf), func(b *testing.B) {
			for range b.N {
				lat := brokertest.ProduceLatency(b, c, brokertest.LatencyRun{RF: rf, Partitions: 6, Size: 100,
					Rate: 10_000, Warmup: 3 * time.Second, Window: 10 * time.Second})
				brokertest.ReportLatency(b, fmt.Sprintf("final brokers as processes, RF%d", rf), lat)
			}
		})
	}
}
