package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The seams final's metrics read: the BrokerTopicMetrics counters and
// ObserveRequests.

// TestCountersCountBytesAndRecordsInAndOut: BytesIn and MessagesIn count
// the produced batches a topic's leader appended, BytesOut the record
// bytes fetched by consumers, per topic and for every topic together.
func TestCountersCountBytesAndRecordsInAndOut(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("counted", 1)
	tb.createTopic("other", 1)
	cl := tb.manualClient(kgo.ProducerLinger(0))
	produceRecords(t, cl, "counted", 0, "a", "b", "c")
	produceRecords(t, cl, "counted", 0, "d")
	c, topic := tb.Counters(), tb.Counters().Topic("counted")
	require.Equal(t, uint64(4), topic.MessagesIn.Load())
	require.Equal(t, uint64(4), c.All.MessagesIn.Load())
	in := topic.BytesIn.Load()
	require.Greater(t, in, uint64(2*61), "two batches, each with its 61-byte header")
	require.Zero(t, c.Topic("other").MessagesIn.Load())

	consumeAll(t, tb, "counted", 1, 4)
	require.Eventually(t, func() bool { return topic.BytesOut.Load() >= in }, 10*time.Second, time.Millisecond,
		"consumers read back every stored byte")
	require.Equal(t, topic.BytesOut.Load(), c.All.BytesOut.Load())
	names := map[string]bool{}
	c.Topics(func(name string, _ *TopicCounters) { names[name] = true })
	require.True(t, names["counted"])
}

// TestObserveRequestsTimesEveryAnsweredRequest: each answered request is
// observed once, after its answer is written, with its instants in order.
func TestObserveRequestsTimesEveryAnsweredRequest(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	tb := startBrokerRegistering(t, quietLogger, func(b *Broker) {
		b.ObserveRequests(func(rt *RequestTiming) {
			ordered := !rt.Received.After(rt.Dequeued) && !rt.Dequeued.After(rt.LocalDone) &&
				!rt.LocalDone.After(rt.Responded) && !rt.Responded.After(rt.Sent)
			mu.Lock()
			defer mu.Unlock()
			if !ordered {
				seen["out of order"]++
			}
			seen[kmsg.NameForKey(rt.Header.APIKey)]++
			if rt.Header.APIKey == 1 && rt.Responded.Sub(rt.LocalDone) >= 150*time.Millisecond {
				seen["long poll waited remotely"]++
			}
		})
	})
	tb.createTopic("timed", 1)
	produceRecords(t, tb.manualClient(), "timed", 0, "x")
	// A long poll: answered from a timer after the handler returned, so its
	// RemoteTime (LocalDone to Responded) is the wait.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = -1, 200, 1<<20, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "timed"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fetch.Version = 4
	c := tb.dial()
	c.send(fetch, 7)
	c.receive()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["Produce"] >= 1 && seen["long poll waited remotely"] == 1 && seen["Metadata"] >= 1 && seen["ApiVersions"] >= 1
	}, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, seen["out of order"], "%v", seen)
}
