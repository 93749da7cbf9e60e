package ceiling_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
	"github.com/kafkaworkbook/workbook/stage06-performance/ceiling"
)

// The load of BenchmarkBrokerCeiling: 100-byte records, 1,000 to a batch
// (a 110 KB batch, one per request; Kafka's producer sends up to
// max.request.size = 1 MB), over 4 connections with 8 requests in flight
// on each, to 4 partitions led by one broker; 512 MiB of batches a phase.
const (
	ceilingRecords    = 1000
	ceilingRecordSize = 100
	ceilingConns      = 4
	ceilingInFlight   = 8
	ceilingPartitions = 4
	ceilingVolume     = 512 << 20
)

// BenchmarkBrokerCeiling is the broker's own ceiling (issue 13): how fast
// the stage 06 broker, running as its own process, appends pre-encoded
// Produce requests from a load generator that costs almost nothing,
// against a raw sequential write of the same bytes, in the same run:
//
//	raw   this process write(2)s the batch 512 MiB worth of times to one
//	      file in the temp dir, one write per batch, no fsync (the broker
//	      does not fsync either); then removes it
//	sink  the same load to a server in this process that only reads each
//	      request and write(2)s it to a file (sink_test.go): TCP's cost
//	rf1   acks=1 to 4 partitions of one replica on broker 0
//	rf3   acks=all to 4 partitions with replicas 0, 1, 2 (leader 0): every
//	      byte is written three times, by three processes on two cores
//
// Three broker processes (the stage 06 command) run on one ZooKeeper
// container; the load generator runs in this process and talks to broker 0
// only. After each phase the partitions' end offsets must have moved by
// exactly the records sent. Reported, per phase: MB/s of batch bytes
// (10^6 bytes: what lands in the log), records/s, the ratio to raw, the
// p99 request latency, and CPU-seconds per GB (10^9 batch bytes): of the
// broker processes (from /proc; for rf3 the three together) and of this
// process (the load generator; for raw the write itself, for sink the
// load generator and the sink).
//
//	go test -run '^$' -bench BrokerCeiling -benchtime 1x -count 3 ./ceiling/
func BenchmarkBrokerCeiling(b *testing.B) {
	ens := zktest.StartStandalone(b)
	c := brokertest.Start(b, ens, 3, map[string]string{
		// Kafka's default: a follower sharing two cores with a leader
		// under full load may lag for a while; the phase checks the ISR.
		"replica.lag.time.max.ms": "30000",
	})
	ctx := context.Background()
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	leader, err := protocol.Dial(ctx, c.Broker(0).Addr(), "ceiling-admin")
	if err != nil {
		b.Fatal(err)
	}
	defer leader.Close()
	pids := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = c.Broker(int32(i)).Pid()
		}
		return out
	}

	for range b.N {
		raw := rawPhase(b)
		sink := sinkPhase(b)
		rf1 := brokerPhase(b, admin, leader, c.Broker(0).Addr(), 1, pids(1))
		rf3 := brokerPhase(b, admin, leader, c.Broker(0).Addr(), 3, pids(3))
		b.ReportMetric(raw.mbps(), "raw-MB/s")
		b.ReportMetric(raw.selfCPU, "raw-cpu-s/GB")
		b.ReportMetric(sink.mbps(), "sink-MB/s")
		b.ReportMetric(sink.mbps()/raw.mbps(), "sink/raw")
		b.ReportMetric(sink.selfCPU, "sink-cpu-s/GB")
		for _, p := range []struct {
			name string
			r    phase
		}{{"rf1", rf1}, {"rf3", rf3}} {
			b.ReportMetric(p.r.mbps(), p.name+"-MB/s")
			b.ReportMetric(p.r.records/p.r.elapsed.Seconds(), p.name+"-rec/s")
			b.ReportMetric(p.r.mbps()/raw.mbps(), p.name+"/raw")
			b.ReportMetric(p.r.mbps()/sink.mbps(), p.name+"/sink")
			b.ReportMetric(float64(p.r.p99.Microseconds())/1000, p.name+"-p99-ms")
			b.ReportMetric(p.r.brokerCPU, p.name+"-broker-cpu-s/GB")
			b.ReportMetric(p.r.selfCPU, p.name+"-loadgen-cpu-s/GB")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// phase is what one phase measured.
type phase struct {
	bytes     float64       // batch bytes written
	records   float64       // records written
	elapsed   time.Duration // wall time
	p99       time.Duration // request latency (broker phases)
	brokerCPU float64       // broker processes' CPU-seconds per GB
	selfCPU   float64       // this process's CPU-seconds per GB
}

func (p phase) mbps() float64 { return p.bytes / 1e6 / p.elapsed.Seconds() }

// ceilingLoad is the requests of a phase: a fresh topic each time.
func ceilingLoad(b *testing.B, topic string, acks int16) *ceiling.Produce {
	p, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: topic, Partitions: ceilingPartitions,
		Records: ceilingRecords, RecordSize: ceilingRecordSize, Acks: acks})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// ceilingRequests is the number of requests that make ceilingVolume.
func ceilingRequests(p *ceiling.Produce) int { return ceilingVolume / len(p.Batch()) }

// warmPageCache writes and removes bytes of file, so that the page cache
// the next phase fills comes from memory this VM has just used. The VM
// hands freed memory back to its host (virtio_balloon free page
// reporting, in 2 MiB blocks, a few seconds after it is freed), and the
// first write to such memory costs a fault in the hypervisor: the same
// 512 MiB written to a new file took 0.1 s or 0.85 s depending on it
// (dd, 5.5 GB/s against 0.63 GB/s). Every phase, raw and broker alike,
// is preceded by this, so that they compare CPU, not the host.
func warmPageCache(b *testing.B, bytes int) {
	chunk := make([]byte, 1<<20)
	path := filepath.Join(b.TempDir(), "warm")
	if _, err := ceiling.WriteSequential(path, chunk, bytes>>20); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
}

func rawPhase(b *testing.B) phase {
	p := ceilingLoad(b, "raw", 1)
	n := ceilingRequests(p)
	warmPageCache(b, n*len(p.Batch()))
	path := filepath.Join(b.TempDir(), "raw.log")
	cpu0 := selfCPU(b)
	elapsed, err := ceiling.WriteSequential(path, p.Batch(), n)
	if err != nil {
		b.Fatal(err)
	}
	cpu := selfCPU(b) - cpu0
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
	bytes := float64(n * len(p.Batch()))
	return phase{bytes: bytes, records: float64(n * p.Records()), elapsed: elapsed, selfCPU: cpu.Seconds() / (bytes / 1e9)}
}

// sinkPhase runs the load against a sink in this process: the most any
// broker could take over TCP here. selfCPU is the sink's and the load
// generator's CPU together.
func sinkPhase(b *testing.B) phase {
	s := startSink(b)
	defer s.Close()
	p := ceilingLoad(b, "sink", 1)
	n := ceilingRequests(p)
	ctx := context.Background()
	load, err := loadgen.Dial(ctx, loadgen.Config{Addr: s.ln.Addr().String(), Conns: ceilingConns, InFlight: ceilingInFlight,
		Requests: int64(n), AppendRequest: p.AppendRequest})
	if err != nil {
		b.Fatal(err)
	}
	defer load.Close()
	warmPageCache(b, n*len(p.Batch()))
	self0 := selfCPU(b)
	res, err := load.Run(ctx)
	if err != nil {
		b.Fatal(err)
	}
	self := selfCPU(b) - self0
	gb := float64(n*len(p.Batch())) / 1e9
	return phase{bytes: gb * 1e9, records: float64(n * p.Records()), elapsed: res.Elapsed, p99: res.P99, selfCPU: self.Seconds() / gb}
}

// topics numbers the benchmarks' topics across phases and -count runs.
var topics atomic.Int64

func topicSuffix() string { return strconv.FormatInt(topics.Add(1), 10) }

// brokerPhase creates a topic whose partitions all have replicas 0..rf-1
// (leader 0), runs the load against broker 0 and checks what it appended.
func brokerPhase(b *testing.B, admin *kgo.Client, leader *protocol.Client, addr string, rf int, pids []int) phase {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("ceiling-rf%d-%s", rf, topicSuffix())
	createOnBrokers(ctx, b, admin, leader, topic, rf)
	acks := int16(1)
	if rf > 1 {
		acks = -1
	}
	p := ceilingLoad(b, topic, acks)
	n := ceilingRequests(p)
	load, err := loadgen.Dial(ctx, loadgen.Config{Addr: addr, Conns: ceilingConns, InFlight: ceilingInFlight,
		Requests: int64(n), AppendRequest: p.AppendRequest})
	if err != nil {
		b.Fatal(err)
	}
	defer load.Close()
	before, err := ceiling.EndOffsets(ctx, leader, topic, ceilingPartitions)
	if err != nil {
		b.Fatal(err)
	}
	warmPageCache(b, rf*n*len(p.Batch()))
	brokers0, self0 := brokersCPU(b, pids), selfCPU(b)
	res, err := load.Run(ctx)
	if err != nil {
		b.Fatal(err)
	}
	brokers, self := brokersCPU(b, pids)-brokers0, selfCPU(b)-self0
	after, err := ceiling.EndOffsets(ctx, leader, topic, ceilingPartitions)
	if err != nil {
		b.Fatal(err)
	}
	if got, want := ceiling.Appended(before, after), int64(n*p.Records()); got != want {
		b.Fatalf("%s: %d records appended, %d sent", topic, got, want)
	}
	if rf > 1 {
		requireFullISR(ctx, b, leader, topic, rf)
	}
	gb := float64(n*len(p.Batch())) / 1e9
	return phase{bytes: gb * 1e9, records: float64(n * p.Records()), elapsed: res.Elapsed, p99: res.P99,
		brokerCPU: brokers.Seconds() / gb, selfCPU: self.Seconds() / gb}
}

// createOnBrokers creates topic with every partition on brokers 0..rf-1,
// broker 0 first (the preferred leader), and waits until broker 0 leads
// them all.
func createOnBrokers(ctx context.Context, b *testing.B, admin *kgo.Client, leader *protocol.Client, topic string, rf int) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, -1, -1
	for p := range int32(ceilingPartitions) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = p
		for id := range int32(rf) {
			a.Replicas = append(a.Replicas, id)
		}
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
	for {
		if _, err := ceiling.EndOffsets(ctx, leader, topic, ceilingPartitions); err == nil {
			return
		} else if ctx.Err() != nil {
			b.Fatalf("broker 0 does not lead %s: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireFullISR fails the benchmark if a follower left the ISR during the
// load: the phase would not have been RF3.
func requireFullISR(ctx context.Context, b *testing.B, leader *protocol.Client, topic string, rf int) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := leader.Request(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		for _, p := range t.Partitions {
			if len(p.ISR) != rf {
				b.Fatalf("%s-%d: ISR %v after the load: a follower fell behind", topic, p.Partition, p.ISR)
			}
		}
	}
}

// brokersCPU is the CPU time, user and system, of the processes pids,
// from /proc/<pid>/stat.
func brokersCPU(b *testing.B, pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// After the command name (in parentheses, may hold spaces): utime
		// and stime are the 14th and 15th fields of the line.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return total
}

// selfCPU is this process's CPU time, user and system.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
