package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// BenchmarkReplicationLatency: where an acks=all record's milliseconds go
// (issue 26), on three brokers in this process, so that every broker's
// clock is the same and a hop can be timed from one broker's request to
// another's. franz-go produces 100-byte records at latencyRate records per
// second (linger 0, no compression, its default five requests in flight,
// idempotent at acks=all) to six partitions, two led by each broker, as chapter 8's
// cluster benchmark does; after latencyWarmup, latencyWindow is measured.
// Each broker's request timings (broker.RequestTiming, Kafka's
// RequestMetrics) give the hops:
//
//	ack                  the client's Produce call to its promise
//	produce.queue        a Produce from its last byte read to a handler (RequestQueueTimeMs)
//	produce.local        its append (LocalTimeMs)
//	produce.remote       its wait in the purgatory for the high watermark (RemoteTimeMs):
//	                     the replication wait, the hops below
//	produce.send         its answer queued and written (ResponseQueue + ResponseSend)
//	follower.wake        a Produce handler's start (its append, then the parked fetches
//	                     it completes) to the answer of a follower fetch parked in the
//	                     Fetch purgatory that it completed
//	follower.send        that answer written
//	follower.turnaround  a follower fetch's answer written, to the follower's next fetch
//	                     read whole: the answer's way, the follower's append, the way back
//	follower.queue       that fetch to a handler
//	follower.local       its handling: the follower's new position, the high watermark,
//	                     the waiting Produces it completes
//
// Reported as p50 and p99 of each, in ms; the whole table goes to the log
// (-v). The rf1-acks-1 run is the baseline on the same brokers: no
// follower hop.
//
//	cd stage04-isr-acks && go test -run '^$' -bench ReplicationLatency -benchtime 1x -v ./cluster
func BenchmarkReplicationLatency(b *testing.B) {
	for _, setup := range []struct {
		name string
		rf   int
		acks kgo.Acks
	}{{"rf3-acks-all", 3, kgo.AllISRAcks()}, {"rf1-acks-1", 1, kgo.LeaderAck()}} {
		b.Run(setup.name, func(b *testing.B) {
			for range b.N {
				hops := measureHops(b, setup.rf, setup.acks)
				for _, h := range []string{"ack", "produce.remote", "follower.wake", "follower.turnaround"} {
					if lat := hops.get(h); len(lat) > 0 {
						b.ReportMetric(ms(quantile(lat, 0.50)), h+"-p50-ms")
						b.ReportMetric(ms(quantile(lat, 0.99)), h+"-p99-ms")
					}
				}
				b.Logf("%s, %d records/s for %s:\n%s", setup.name, latencyRate, latencyWindow, hops.table())
			}
		})
	}
}

const (
	latencyRate       = 10_000 // records per second, chapter 8's latency aim
	latencyWarmup     = 3 * time.Second
	latencyWindow     = 10 * time.Second
	latencyPartitions = 6
)

// hopTimes are latencies by hop, gathered from several goroutines.
type hopTimes struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

func (h *hopTimes) add(hop string, d time.Duration) {
	h.mu.Lock()
	h.m[hop] = append(h.m[hop], d)
	h.mu.Unlock()
}

// get returns hop's latencies, sorted.
func (h *hopTimes) get(hop string) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.Sort(h.m[hop])
	return h.m[hop]
}

// hopOrder is the table's order: a record's way.
var hopOrder = []string{"ack", "produce.queue", "produce.local", "produce.remote", "follower.wake", "follower.send",
	"follower.turnaround", "follower.queue", "follower.local", "produce.send"}

func (h *hopTimes) table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-20s %8s %8s %8s %8s %8s\n", "hop (ms)", "count", "p50", "p90", "p99", "max")
	for _, hop := range hopOrder {
		lat := h.get(hop)
		if len(lat) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%-20s %8d %8.2f %8.2f %8.2f %8.2f\n", hop, len(lat), ms(quantile(lat, 0.5)),
			ms(quantile(lat, 0.9)), ms(quantile(lat, 0.99)), ms(quantile(lat, 1)))
	}
	return sb.String()
}

// measureHops runs one latency pass on a new cluster and returns its hops.
func measureHops(b *testing.B, rf int, acks kgo.Acks) *hopTimes {
	b.Helper()
	hops := &hopTimes{m: map[string][]time.Duration{}}
	var (
		mu        sync.Mutex // guards what follows
		measuring bool
		// lastSent: when each follower's last fetch answer was written, by
		// leader and follower.
		lastSent = map[[2]int32]time.Time{}
		// appends: when each leader's Produce handlers began (the append
		// starts there, and the handler completes the parked fetches it
		// wakes before it returns); parked: the leader's follower fetches
		// that waited in the purgatory. An observer runs once the answer
		// is written, so a Produce is seen after the fetches it woke: the
		// two are matched once the run is over.
		appends = map[int32][]time.Time{}
		parked  = map[int32][]*broker.RequestTiming{}
	)
	observe := func(id int32, t *broker.RequestTiming) {
		mu.Lock()
		defer mu.Unlock()
		switch r := t.Body.(type) {
		case *kmsg.ProduceRequest:
			if measuring {
				appends[id] = append(appends[id], t.Dequeued)
				hops.add("produce.queue", t.Dequeued.Sub(t.Received))
				hops.add("produce.local", t.LocalDone.Sub(t.Dequeued))
				hops.add("produce.send", t.Sent.Sub(t.Responded))
				if acks == kgo.AllISRAcks() {
					hops.add("produce.remote", t.Responded.Sub(t.LocalDone))
				}
			}
		case *kmsg.FetchRequest:
			if r.ReplicaID < 0 {
				return
			}
			k := [2]int32{id, r.ReplicaID}
			if sent, ok := lastSent[k]; ok && measuring {
				hops.add("follower.turnaround", t.Received.Sub(sent))
				hops.add("follower.queue", t.Dequeued.Sub(t.Received))
				hops.add("follower.local", t.LocalDone.Sub(t.Dequeued))
			}
			lastSent[k] = t.Sent
			if measuring && t.Responded.After(t.LocalDone) {
				copied := *t // the observer may not keep t
				parked[id] = append(parked[id], &copied)
			}
		}
	}
	defer func() {
		// A parked fetch was woken by the last Produce its leader began
		// between the park and the answer (none: the wait ran out).
		mu.Lock()
		defer mu.Unlock()
		for id, fetches := range parked {
			apps := appends[id]
			slices.SortFunc(apps, func(a, b time.Time) int { return a.Compare(b) })
			for _, t := range fetches {
				i, _ := slices.BinarySearchFunc(apps, t.Responded, func(a, b time.Time) int { return a.Compare(b) })
				if i > 0 && apps[i-1].After(t.LocalDone) {
					hops.add("follower.wake", t.Responded.Sub(apps[i-1]))
					hops.add("follower.send", t.Sent.Sub(t.Responded))
				}
			}
		}
	}()
	c, err := Start(3, Options{Dir: b.TempDir(), Logger: testLogger(), ObserveRequests: observe,
		Props: map[string]string{"min.insync.replicas": "2"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	const topic = "latency"
	if err := c.Controller.CreateTopic(topic, latencyPartitions, rf); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p := range int32(latencyPartitions) {
		for {
			isr, _, err := c.ISR(commitlog.TopicPartition{Topic: topic, Partition: p})
			if err == nil && len(isr) == rf {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("partition %d: ISR %v (%v), want %d replicas", p, isr, err, rf)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(acks),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite()) // franz-go's idempotence needs acks=all
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	var f failures
	var lmu sync.Mutex
	var lat []time.Duration
	value := make([]byte, benchValueSize)
	start := time.Now()
	n := 0
	const tick = time.Millisecond
	perTick := latencyRate / int(time.Second/tick)
	for next := start; time.Since(start) < latencyWarmup+latencyWindow; next = next.Add(tick) {
		time.Sleep(time.Until(next))
		measured := time.Since(start) >= latencyWarmup
		mu.Lock()
		measuring = measured
		mu.Unlock()
		for range perTick {
			sent := time.Now()
			cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				f.add(err)
				if measured {
					lmu.Lock()
					lat = append(lat, time.Since(sent))
					lmu.Unlock()
				}
			})
			n++
		}
	}
	flush(b, cl)
	f.check(b, n)
	mu.Lock()
	measuring = false
	mu.Unlock()
	lmu.Lock()
	for _, d := range lat {
		hops.add("ack", d)
	}
	lmu.Unlock()
	return hops
}
