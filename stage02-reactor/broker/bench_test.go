package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
)

// BenchmarkApiVersions is the chapter's small-request figure: ApiVersions
// (v3, the first request of every client) against the broker with Kafka's
// default num.network.threads=3 and num.io.threads=8, on the epoll reactor
// and on the goroutine-per-connection server, at 1, 64 and 1024
// connections, each a closed loop with one request in flight. The clients
// share the machine's two cores with the broker.
//
//	go test -run '^$' -bench ApiVersions -count 3 ./broker
func BenchmarkApiVersions(b *testing.B) {
	for _, conns := range []int{1, 64, 1024} {
		for _, srv := range benchServers {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, srv.name), func(b *testing.B) {
				br := benchBroker(b, srv.factory)
				ctx := context.Background()
				load, err := loadgen.Dial(ctx, loadgen.Config{Addr: br.Addr().String(), Conns: conns,
					Requests: int64(b.N), MakeRequest: apiVersionsFrame})
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
				b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
			})
		}
	}
}

// benchServer is a network server the benchmarks run the broker on.
type benchServer struct {
	name    string
	factory func(network.Config, network.Handler) (*network.Server, error)
}

var apiVersionsFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("loadgen"))

// apiVersionsFrame is an ApiVersions v3 request without its size prefix.
func apiVersionsFrame(corr int32) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "loadgen", "1"
	return apiVersionsFormatter.AppendRequest(nil, req, corr)[4:]
}

// BenchmarkProduceVsKfake is the chapter's produce figure: franz-go
// producing 100-byte records with acks=1 to this broker (which writes to
// disk) and to franz-go's in-memory kfake cluster, with identical client
// settings, interleaved in chunks so both see the same machine. One op is
// one record.
//
//	go test -run '^$' -bench ProduceVsKfake -benchtime 2000000x ./broker
func BenchmarkProduceVsKfake(b *testing.B) {
	for _, partitions := range []int32{1, 6} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			ours := benchBroker(b, nil)
			fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "bench"))
			if err != nil {
				b.Fatal(err)
			}
			defer fake.Close()
			createBenchTopic(b, ours, partitions)

			clients := []*kgo.Client{benchProducer(b, ours.Addr().String()), benchProducer(b, fake.ListenAddrs()...)}
			var elapsed [2]time.Duration
			value := make([]byte, 100)
			const chunk = 20_000
			b.ResetTimer()
			for done := 0; done < b.N; done += chunk {
				n := min(chunk, b.N-done)
				for i, cl := range clients {
					start := time.Now()
					produceN(b, cl, n, value)
					elapsed[i] += time.Since(start)
				}
			}
			b.StopTimer()
			oursRate := float64(b.N) / elapsed[0].Seconds()
			fakeRate := float64(b.N) / elapsed[1].Seconds()
			b.ReportMetric(oursRate, "broker-rec/s")
			b.ReportMetric(fakeRate, "kfake-rec/s")
			b.ReportMetric(oursRate/fakeRate, "broker/kfake")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkMetadata is the chapter's Metadata figure: one request naming
// 100,000 topics that do not exist and one that does, against a broker
// holding 1,000 partitions, on one connection, one request at a time. An
// op is an exchange, from the request's first byte written to the
// response's last byte read; cpu-ms/req counts the CPU time of the whole
// process (broker and benchmark) for it. TestMetadataCostFollowsTheRequest
// bounds the same exchange.
//
//	go test -run '^$' -bench Metadata -count 5 ./broker
func BenchmarkMetadata(b *testing.B) {
	br := benchBroker(b, nil)
	frame := metadataCostSetup(b, br.Store())
	conn, err := net.Dial("tcp", br.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	var resp []byte
	cpu0 := processCPUTime(b)
	for b.Loop() {
		if _, err := conn.Write(frame); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			b.Fatal(err)
		}
		resp = make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, resp); err != nil {
			b.Fatal(err)
		}
	}
	cpu := processCPUTime(b) - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/req")
	b.ReportMetric(float64(len(resp)), "resp-bytes")
}

func benchBroker(b *testing.B, factory func(network.Config, network.Handler) (*network.Server, error)) *Broker {
	cfg, err := ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(b.TempDir(), "kafka-logs"),
	}, quietLogger)
	if err != nil {
		b.Fatal(err)
	}
	br, err := New(cfg, Options{Logger: quietLogger, ServerFactory: factory})
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Shutdown(context.Background()) })
	return br
}

func createBenchTopic(b *testing.B, br *Broker, partitions int32) {
	if _, err := br.Store().CreateTopic("bench", partitions, nil); err != nil {
		b.Fatal(err)
	}
}

// benchProducer is franz-go with acks=1 (which needs idempotence off) and
// otherwise its defaults: linger 0, 16 KiB-ish batches per partition
// (kgo's max batch bytes default is about 1 MB), snappy compression.
func benchProducer(b *testing.B, seeds ...string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("bench"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

func produceN(b *testing.B, cl *kgo.Client, n int, value []byte) {
	ctx := context.Background()
	failed := make(chan error, 1)
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-failed:
		b.Fatal(err)
	default:
	}
}
