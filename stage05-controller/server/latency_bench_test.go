package server

import (
	"testing"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
)

// BenchmarkProduceLatencyProcesses: franz-go's acknowledgement latency at
// 10,000 records/s against three stage 05 brokers as processes on
// 127.0.0.1 (one ZooKeeper server in a container, off the data path):
// replication factor 3 with acks=all and min.insync.replicas=2, and the
// RF1 acks=1 baseline on the same brokers (brokertest.BenchmarkProduceLatency).
// Issue 26 sets it beside stage 04's in-process figures
// (BenchmarkReplicationLatency) and chapter 8's cluster in containers;
// final/compat runs the same against final's brokers.
//
//	cd stage05-controller && go test -run '^$' -bench ProduceLatencyProcesses -benchtime 1x -v ./server
func BenchmarkProduceLatencyProcesses(b *testing.B) {
	brokertest.BenchmarkProduceLatency(b, "stage 05 brokers as processes", brokertest.NamedClient{Name: "franz-go"})
}
