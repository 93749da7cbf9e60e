package producer_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// The Speed aims of issue 13 for the producer: ours against franz-go's
// kgo producer, 100-byte records without keys, in the same run against
// the same brokers:
//
//   - rf1-acks1: one stage 02 broker, a topic of six partitions (Kreps's
//     2014 benchmark used six), acks=1;
//   - rf3-acksall: three stage 04 brokers (cmd/cluster), a topic of one
//     partition on all three, acks=all (our producer idempotent, as is
//     franz-go's by default).
//
// The brokers run in a child process, so that allocs/op is the client's
// alone: one op is one record (Produce, then a share of Flush). The
// -reuse variants take their records from a free list and put them back
// in the callback, so that what is left is the producer's own allocations. Each
// client has its defaults but for compression (none for both; franz-go
// would otherwise snappy) and acks. records/s is b.N over the time from
// the first Produce to the last callback.
//
//	cd stage06-performance && go test -run '^$' -bench Producer -benchmem -count 3 ./producer
func BenchmarkProducer(b *testing.B) {
	value := []byte(strings.Repeat("v", 100))
	bin := b.TempDir()
	for _, setup := range []struct {
		name  string
		start func(b *testing.B, bin string) ([]string, string)
		acks  string
	}{{"rf1-acks1", startBrokerProcess, "1"}, {"rf3-acksall", startClusterProcess, "all"}} {
		var addrs []string
		var topic string
		for _, client := range []string{"ours", "ours-1MB", "ours-reuse", "ours-1MB-reuse", "franz-go", "franz-go-reuse"} {
			outer := b // the brokers outlive each sub-benchmark's runs
			b.Run(setup.name+"/"+client, func(b *testing.B) {
				if addrs == nil {
					addrs, topic = setup.start(outer, bin)
				}
				switch client {
				case "ours":
					ourProducer(b, addrs, topic, setup.acks, "16384", false, value)
				case "ours-1MB":
					ourProducer(b, addrs, topic, setup.acks, "1048576", false, value)
				case "ours-reuse":
					ourProducer(b, addrs, topic, setup.acks, "16384", true, value)
				case "ours-1MB-reuse":
					ourProducer(b, addrs, topic, setup.acks, "1048576", true, value)
				case "franz-go":
					franzProducer(b, addrs, topic, setup.acks, false, value)
				case "franz-go-reuse":
					franzProducer(b, addrs, topic, setup.acks, true, value)
				}
			})
		}
	}
}

// ourProducer produces b.N records with our producer and reports the rate.
// With reuse, each record comes from a sync.Pool and goes back in its
// callback, so that allocs/record is the producer's own.
func ourProducer(b *testing.B, addrs []string, topic, acks, batchSize string, reuse bool, value []byte) {
	cfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(addrs, ","), "acks": acks, "batch.size": batchSize})
	require.NoError(b, err)
	p, err := producer.New(cfg, producer.Options{Logger: testLogger()})
	require.NoError(b, err)
	defer p.Close(context.Background())
	var failed atomic.Int64
	var records freeList[producer.Record]
	if reuse {
		records.fill(inFlightRecords)
	}
	cb := func(r *producer.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
		if reuse {
			records.put(r)
		}
	}
	ctx := context.Background()
	require.NoError(b, p.Produce(ctx, &producer.Record{Topic: topic, Value: value}, cb)) // metadata, connection
	require.NoError(b, p.Flush(ctx))
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeasure()
	for range b.N {
		var r *producer.Record
		if reuse {
			r = records.get()
		}
		if r == nil {
			r = new(producer.Record)
		}
		*r = producer.Record{Topic: topic, Value: value}
		if err := p.Produce(ctx, r, cb); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, p.Flush(ctx))
	m.report(b)
	require.Zero(b, failed.Load())
}

// franzProducer does the same with franz-go's client (a record may be
// reused once its promise has run).
func franzProducer(b *testing.B, addrs []string, topic, acks string, reuse bool, value []byte) {
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	if acks == "1" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(b, err)
	defer cl.Close()
	var failed atomic.Int64
	var records freeList[kgo.Record]
	if reuse {
		records.fill(inFlightRecords)
	}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
		if reuse {
			records.put(r)
		}
	}
	ctx := context.Background()
	require.NoError(b, cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeasure()
	for range b.N {
		var r *kgo.Record
		if reuse {
			r = records.get()
		}
		if r == nil {
			r = new(kgo.Record)
		}
		*r = kgo.Record{Value: value}
		cl.Produce(ctx, r, promise)
	}
	require.NoError(b, cl.Flush(ctx))
	m.report(b)
	require.Zero(b, failed.Load())
}

// freeList keeps records whose callbacks have run, for the -reuse
// variants. Not a sync.Pool: a garbage collection empties a sync.Pool, and
// a producer may hold some 300,000 records of 100 bytes in buffer.memory.
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
}

// inFlightRecords is more records than either producer holds unanswered
// (ours: buffer.memory / ~110 bytes ≈ 300,000; franz-go: 50,000), made
// before the clock starts so that the -reuse variants allocate none.
const inFlightRecords = 400_000

func (l *freeList[T]) fill(n int) {
	l.free = make([]*T, n)
	for i := range l.free {
		l.free[i] = new(T)
	}
}

func (l *freeList[T]) get() *T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) == 0 {
		return nil
	}
	r := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	return r
}

func (l *freeList[T]) put(r *T) {
	l.mu.Lock()
	l.free = append(l.free, r)
	l.mu.Unlock()
}

// A measure is the time and heap allocations of one run; allocs/record
// keeps the decimals that -benchmem's allocs/op rounds away.
type measure struct {
	start   time.Time
	mallocs uint64
}

func startMeasure() measure {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return measure{time.Now(), ms.Mallocs}
}

func (m measure) report(b *testing.B) {
	elapsed := time.Since(m.start)
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(ms.Mallocs-m.mallocs)/float64(b.N), "allocs/record")
}

// buildCommand builds a workbook command into dir.
func buildCommand(b *testing.B, dir, pkg string) string {
	out := filepath.Join(dir, filepath.Base(pkg))
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Run(), "go build %s", pkg)
	return out
}

// startBrokerProcess runs a stage 02 broker in a child process and
// creates a topic of six partitions.
func startBrokerProcess(b *testing.B, bin string) ([]string, string) {
	exe := buildCommand(b, bin, "github.com/kafkaworkbook/workbook/stage02-reactor/cmd/broker")
	cmd := exec.Command(exe, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
		"--override", "log.dirs="+filepath.Join(b.TempDir(), "logs"))
	addr := startProcess(b, cmd, `listener=(127\.0\.0\.1:\d+)`, true)
	createTopic(b, []string{addr}, "bench", 6, 1)
	return []string{addr}, "bench"
}

// startClusterProcess runs three stage 04 brokers (cmd/cluster, which
// creates the topic: one partition on all three).
func startClusterProcess(b *testing.B, bin string) ([]string, string) {
	exe := buildCommand(b, bin, "github.com/kafkaworkbook/workbook/stage04-isr-acks/cmd/cluster")
	cmd := exec.Command(exe, "-port", "0", "-dir", b.TempDir(), "-topic", "bench", "-rf", "3")
	line := startProcess(b, cmd, `3 brokers on ([0-9.: ]+), logs`, false)
	return strings.Fields(line), "bench"
}

// startProcess starts cmd and returns the first submatch of pattern in
// its stderr (fromStderr) or stdout; the process is stopped at cleanup.
func startProcess(b *testing.B, cmd *exec.Cmd, pattern string, fromStderr bool) string {
	stdin, err := cmd.StdinPipe() // cmd/cluster reads commands until stdin closes
	require.NoError(b, err)
	var r io.Reader
	if fromStderr {
		r, err = cmd.StderrPipe()
	} else {
		r, err = cmd.StdoutPipe()
	}
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	})
	re := regexp.MustCompile(pattern)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case s := <-found:
		return strings.TrimSpace(s)
	case <-time.After(60 * time.Second):
		b.Fatalf("%s did not start", cmd.Path)
		return ""
	}
}
