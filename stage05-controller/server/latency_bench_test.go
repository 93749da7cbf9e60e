package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkProduceLatencyProcesses: franz-go's acknowledgement latency at
// 10,000 records/s against three stage 05 brokers as processes on
// 127.0.0.1 (one ZooKeeper server in a container, off the data path):
// replication factor 3 with acks=all and min.insync.replicas=2, and the
// RF1 acks=1 baseline on the same brokers. Issue 26 sets it beside stage
// 04's in-process figures (BenchmarkReplicationLatency) and chapter 8's
// cluster in containers; final/compat runs the same against final's
// brokers.
//
//	cd stage05-controller && go test -run '^$' -bench ProduceLatencyProcesses -benchtime 1x -v ./server
func BenchmarkProduceLatencyProcesses(b *testing.B) {
	ens := zktest.StartEnsemble(b, 1)
	c := brokertest.Start(b, ens, 3, map[string]string{"min.insync.replicas": "2", "replica.fetch.wait.max.ms": "500"})
	for _, rf := range []int{3, 1} {
		b.Run(fmt.Sprintf("rf%d", rf), func(b *testing.B) {
			for range b.N {
				lat := brokertest.ProduceLatency(b, c, brokertest.LatencyRun{RF: rf, Partitions: 6, Size: 100,
					Rate: 10_000, Warmup: 3 * time.Second, Window: 10 * time.Second})
				brokertest.ReportLatency(b, fmt.Sprintf("stage 05 brokers as processes, RF%d", rf), lat)
			}
		})
	}
}
