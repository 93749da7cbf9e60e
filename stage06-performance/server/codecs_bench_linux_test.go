package server_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkCodecs is the codec table of seed §2.1.6 on realistic records:
// JSON page-view events of about 300 bytes, from a small vocabulary of
// users, paths, agents and countries, as a clickstream's are. For each
// codec franz-go produces 200,000 of them (batches up to 1 MiB, linger 5
// ms, acks=all, one partition on one broker process, compression.type
// producer: stored as sent), then a consumer reads them back; the last
// row sends them uncompressed to a topic whose compression.type=zstd
// makes the broker compress. Reported:
//
//	ratio          bytes stored / bytes of the records' values
//	produce-MB/s   values produced a second (producer compressing)
//	broker-ms/MB   the broker process's CPU per MB of values produced
//	               (/proc: receiving, validating by decompressing, storing)
//	consume-MB/s   values consumed a second (consumer decompressing)
//
//	go test -run '^$' -bench BenchmarkCodecs -benchtime 1x ./server/
func BenchmarkCodecs(b *testing.B) {
	ens := zktest.StartStandalone(b)
	c := brokertest.Start(b, ens, 1, nil)
	values := clickstream(200_000)
	var raw int64
	for _, v := range values {
		raw += int64(len(v))
	}
	for _, codec := range []struct {
		name  string
		kgo   kgo.CompressionCodec
		topic string // the topic's compression.type
	}{{"none", kgo.NoCompression(), "producer"}, {"gzip", kgo.GzipCompression(), "producer"},
		{"snappy", kgo.SnappyCompression(), "producer"}, {"lz4", kgo.Lz4Compression(), "producer"},
		{"zstd", kgo.ZstdCompression(), "producer"}, {"none-stored-as-zstd", kgo.NoCompression(), "zstd"}} {
		b.Run(codec.name, func(b *testing.B) {
			for range b.N {
				topic := fmt.Sprintf("clicks-%s-%d", codec.name, runs.Add(1))
				ctx := context.Background()
				p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic),
					kgo.ProducerBatchCompression(codec.kgo), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond),
					kgo.MaxBufferedRecords(50_000))
				if err != nil {
					b.Fatal(err)
				}
				created, err := kadm.NewClient(p).CreateTopics(ctx, 1, 1, map[string]*string{"compression.type": &codec.topic}, topic)
				if err == nil {
					err = created[topic].Err
				}
				if err != nil {
					b.Fatal(err)
				}
				pid := c.Broker(0).Pid()
				cpu0, start := cpuOf(b, pid), time.Now()
				var wg sync.WaitGroup
				var failed error
				var mu sync.Mutex
				for _, v := range values {
					wg.Add(1)
					p.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
						if err != nil {
							mu.Lock()
							failed = err
							mu.Unlock()
						}
						wg.Done()
					})
				}
				wg.Wait()
				produceTime, brokerCPU := time.Since(start), cpuOf(b, pid)-cpu0
				p.Close()
				if failed != nil {
					b.Fatal(failed)
				}
				stored := storedBytes(b, c.Broker(0).LogDir(), topic)

				cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))
				if err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				for n := 0; n < len(values); {
					fs := cons.PollFetches(ctx)
					if err := fs.Err0(); err != nil {
						b.Fatal(err)
					}
					n += fs.NumRecords()
				}
				consumeTime := time.Since(start)
				cons.Close()
				mb := float64(raw) / 1e6
				b.ReportMetric(float64(stored)/float64(raw), "ratio")
				b.ReportMetric(mb/produceTime.Seconds(), "produce-MB/s")
				b.ReportMetric(float64(brokerCPU.Milliseconds())/mb, "broker-ms/MB")
				b.ReportMetric(mb/consumeTime.Seconds(), "consume-MB/s")
			}
		})
	}
}

// runs numbers the benchmark's topics across -count runs.
var runs atomic.Int64

// clickstream makes n JSON page-view events from a small vocabulary.
func clickstream(n int) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	paths := []string{"/", "/catalog", "/catalog/items", "/cart", "/checkout", "/account", "/search", "/help"}
	agents := []string{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0"}
	countries := []string{"DE", "FR", "US", "CN", "BR", "IN", "JP", "GB"}
	out := make([][]byte, n)
	ts := int64(1_796_000_000_000)
	for i := range out {
		ts += int64(r.IntN(50))
		out[i] = fmt.Appendf(nil, `{"ts":%d,"user_id":"u-%06d","session":"%08x","event":"page_view","path":"%s/%d","referrer":"%s","user_agent":"%s","country":"%s","price_cents":%d}`,
			ts, r.IntN(20_000), r.Uint32(), paths[r.IntN(len(paths))], r.IntN(500), paths[r.IntN(len(paths))],
			agents[r.IntN(len(agents))], countries[r.IntN(len(countries))], r.IntN(100_000))
	}
	return out
}

// storedBytes is the size of partition 0 of topic's segments.
func storedBytes(b *testing.B, logDir, topic string) int64 {
	segments, err := filepath.Glob(filepath.Join(logDir, topic+"-0", "*.log"))
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, s := range segments {
		st, err := os.Stat(s)
		if err != nil {
			b.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// cpuOf is a process's CPU time, user and system, from /proc/<pid>/stat.
func cpuOf(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces, in parentheses):
	// utime and stime are the 14th and 15th fields of the line.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}
