package producer_test

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// BenchmarkSenders measures the choice the package comment explains: one
// sender goroutine per broker (per-broker, the default) against Kafka's
// single Sender loop (single-loop, Options.SingleSender), in the same run
// against the same brokers: three stage 04 brokers in this process, a
// topic of six partitions with RF1 (two led by each broker), 100-byte
// records without keys, acks=1, the other keys at their defaults.
//
//   - direct: the producer talks to the brokers;
//   - proxied: through a brokerProxy in front of each broker, none slowed
//     (the baseline of the next);
//   - one-slow: the same, with the answers of one broker (two partitions
//     of six) delayed by slowBrokerDelay.
//
// records/request (proxied cases: the proxies count the Produce
// requests) says how well each mode batches. records/s is b.N over the time from the first Produce to the last
// callback; cpu-ns/record is this process's CPU time (user + system:
// the producer, and the brokers and proxies too, which both modes share)
// per record.
//
//	cd stage06-performance && go test -run '^$' -bench Senders -benchtime 1000000x ./producer
func BenchmarkSenders(b *testing.B) {
	const topic, partitions = "senders", 6
	value := []byte(strings.Repeat("v", 100))
	c := startCluster(b, 3, topic, partitions, 1, nil)
	ps := proxyCluster(b, c)
	slow := ps.byBroker[leaderOf(b, c, commitlog.TopicPartition{Topic: topic, Partition: 0})]
	setups := []struct {
		name  string
		addrs []string
		delay time.Duration
	}{{"direct", c.Addrs(), 0}, {"proxied", ps.addrs(), 0}, {"one-slow", ps.addrs(), slowBrokerDelay}}
	for _, mode := range senderModes { // fresh brokers and heap: not measured
		warmUp(b, c.Addrs(), topic, mode.single, value)
	}
	// go test -count runs a sub-benchmark its times back to back: the
	// rounds are here instead, so that the modes alternate (the second
	// round's names end in #01, the third's in #02, and so on).
	for range senderRounds {
		for _, setup := range setups {
			for _, mode := range senderModes {
				b.Run(setup.name+"/"+mode.name, func(b *testing.B) {
					slow.SetDelay(setup.delay)
					defer slow.SetDelay(0)
					before := ps.produces()
					sendersRun(b, setup.addrs, topic, mode.single, value)
					if setup.name != "direct" {
						b.ReportMetric(float64(b.N)/float64(ps.produces()-before), "records/request")
					}
				})
			}
		}
	}
}

// senderRounds is how many times each case runs, the modes alternating.
const senderRounds = 5

// warmUp produces some records with a mode, unmeasured.
func warmUp(b *testing.B, addrs []string, topic string, single bool, value []byte) {
	cfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(addrs, ","), "acks": "1"})
	require.NoError(b, err)
	p, err := producer.New(cfg, producer.Options{Logger: testLogger(), SingleSender: single})
	require.NoError(b, err)
	defer p.Close(context.Background())
	for range 300_000 {
		require.NoError(b, p.Produce(context.Background(), &producer.Record{Topic: topic, Value: value}, nil))
	}
	require.NoError(b, p.Flush(context.Background()))
}

// slowBrokerDelay is what the slow broker adds to each answer: a broker a
// few milliseconds away, or one busy with a disk.
const slowBrokerDelay = 5 * time.Millisecond

// sendersRun produces b.N records with the sender mode asked for.
func sendersRun(b *testing.B, addrs []string, topic string, single bool, value []byte) {
	cfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(addrs, ","), "acks": "1"})
	require.NoError(b, err)
	p, err := producer.New(cfg, producer.Options{Logger: testLogger(), SingleSender: single})
	require.NoError(b, err)
	defer p.Close(context.Background())
	var failed atomic.Int64
	cb := func(r *producer.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	ctx := context.Background()
	for range 6 { // metadata, and a connection to each broker (sticky: each record may open a batch elsewhere)
		require.NoError(b, p.Produce(ctx, &producer.Record{Topic: topic, Value: value}, cb))
		require.NoError(b, p.Flush(ctx))
	}
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeasure()
	cpu := processCPU()
	for range b.N {
		if err := p.Produce(ctx, &producer.Record{Topic: topic, Value: value}, cb); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, p.Flush(ctx))
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/record")
	m.report(b)
	require.Zero(b, failed.Load())
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
