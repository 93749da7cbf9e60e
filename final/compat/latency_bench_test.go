package compat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// BenchmarkProduceLatencyProcesses is stage 05's benchmark of the same
// name against final's brokers as processes on 127.0.0.1 (this package's
// TestMain builds them), with two producers: franz-go and ours, the
// course's (stage06-performance/producer, Kafka's defaults: linger.ms 0,
// five requests in flight, idempotent with acks=all). Each produces
// 100-byte records at 10,000 a second to six partitions, RF3 acks=all
// with min.insync.replicas=2 and the RF1 acks=1 baseline, with no
// container and no proxy between the client and the brokers. Chapter 8
// sets it beside its cluster in containers (issue 26).
//
//	cd final && go test -run '^$' -bench ProduceLatencyProcesses -benchtime 1x -v ./compat
func BenchmarkProduceLatencyProcesses(b *testing.B) {
	brokertest.BenchmarkProduceLatency(b, "final brokers as processes",
		brokertest.NamedClient{Name: "franz-go"}, brokertest.NamedClient{Name: "ours", New: newOurs})
}

// ours is the course's producer as a brokertest.LatencyClient.
type ours struct{ p *producer.Producer }

func newOurs(addrs []string, rf int) (brokertest.LatencyClient, error) {
	acks := "all"
	if rf == 1 {
		acks = "1"
	}
	cfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(addrs, ","), "acks": acks})
	if err != nil {
		return nil, err
	}
	p, err := producer.New(cfg, producer.Options{})
	return ours{p}, err
}

func (o ours) Produce(ctx context.Context, topic string, value []byte, done func(error)) {
	if err := o.p.Produce(ctx, &producer.Record{Topic: topic, Value: value}, func(_ *producer.Record, err error) { done(err) }); err != nil {
		done(err)
	}
}

func (o ours) Flush(ctx context.Context) error { return o.p.Flush(ctx) }

func (o ours) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.p.Close(ctx)
}
