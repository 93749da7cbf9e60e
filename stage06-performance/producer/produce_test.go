package producer_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestEveryRecordIsAcknowledgedOnceWithTheOffsetItWasStoredAt: records
// with keys land on murmur2's partition, each callback runs once with the
// offset a consumer then reads the record at.
func TestEveryRecordIsAcknowledgedOnceWithTheOffsetItWasStoredAt(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "orders", 3, 1)
	p := newProducer(t, []string{addr}, "acks", "1", "linger.ms", "5")
	a := newAcks()
	const n = 5000
	for i := range n {
		key := fmt.Sprintf("customer-%d", i%97)
		v := fmt.Sprintf("order-%d", i)
		require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "orders", Key: []byte(key), Value: []byte(v)}, a.callback))
	}
	require.NoError(t, p.Flush(ctx(t)))
	got, failed, twice := a.snapshot()
	require.Empty(t, failed)
	require.Empty(t, twice)
	require.Len(t, got, n)

	for _, r := range readAll(t, []string{addr}, "orders") {
		require.Equal(t, ack{r.partition, r.offset}, got[r.value], "record %s", r.value)
		require.Equal(t, producer.KeyPartition([]byte(r.key), 3), r.partition, "murmur2 chose the partition of %s", r.key)
	}
}

// TestOrderPerPartitionHoldsWithFiveRequestsInFlight: keyless records
// with many small batches (batch.size 1 KiB) and five requests in flight
// are read back in the order produced on each partition.
func TestOrderPerPartitionHoldsWithFiveRequestsInFlight(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "ordered", 4, 1)
	p := newProducer(t, []string{addr}, "acks", "1", "batch.size", "1024", "max.in.flight.requests.per.connection", "5")
	a := newAcks()
	const n = 20000
	for i := range n {
		require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "ordered", Value: []byte(strconv.Itoa(i))}, a.callback))
	}
	require.NoError(t, p.Flush(ctx(t)))
	_, failed, _ := a.snapshot()
	require.Empty(t, failed)
	last := map[int32]int{}
	perPartition := map[int32]int{}
	for _, r := range readAll(t, []string{addr}, "ordered") {
		v, err := strconv.Atoi(r.value)
		require.NoError(t, err)
		prev, ok := last[r.partition]
		require.True(t, !ok || v > prev, "partition %d: %d after %d", r.partition, v, prev)
		last[r.partition] = v
		perPartition[r.partition]++
	}
	t.Logf("records per partition (sticky): %v", perPartition)
	require.Greater(t, len(perPartition), 1, "the sticky partitioner moves on when a batch is full")
}

// TestAnUnknownTopicIsCreatedByTheBroker: the producer asks for a topic
// it does not know with allowAutoTopicCreation, as Kafka's producer does,
// and a broker with auto.create.topics.enable creates it.
func TestAnUnknownTopicIsCreatedByTheBroker(t *testing.T) {
	addr := startBroker(t, "num.partitions", "2")
	p := newProducer(t, []string{addr}, "acks", "1")
	a := newAcks()
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "born-on-produce", Value: []byte("first")}, a.callback))
	require.NoError(t, p.Flush(ctx(t)))
	got, failed, _ := a.snapshot()
	require.Empty(t, failed)
	require.Equal(t, int64(0), got["first"].offset)
	require.Len(t, readAll(t, []string{addr}, "born-on-produce"), 1)
}

// TestARecordNotAcknowledgedWithinDeliveryTimeoutFails: while the
// broker's answers are held, a batch is retried until delivery.timeout.ms
// has passed since it was made, and then its callback gets Kafka's
// "Expiring ... ms has passed since batch creation".
func TestARecordNotAcknowledgedWithinDeliveryTimeoutFails(t *testing.T) {
	g, addr := startGatedBroker(t)
	createTopic(t, []string{addr}, "late", 1, 1)
	p := newProducer(t, []string{addr}, "acks", "1", "request.timeout.ms", "300", "delivery.timeout.ms", "1000")
	a := newAcks()
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "late", Value: []byte("on time")}, a.callback))
	a.waitFor(t, 1, 10*time.Second)
	g.Hold()
	start := time.Now()
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "late", Value: []byte("late")}, a.callback))
	a.waitFor(t, 2, 20*time.Second)
	_, failed, _ := a.snapshot()
	require.Len(t, failed, 1)
	require.ErrorContains(t, failed[0], "ms has passed since batch creation")
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	t.Logf("failed after %v: %v", time.Since(start), failed[0])
	g.Release()
}

// TestACallbackMayProduceTheNextRecord: a callback that produces the
// next record, a common way to send records one after the other, runs to
// the end of its chain in both sender modes. Callbacks run with no lock
// of the producer held, and Produce never waits for the goroutine that
// runs them: a new batch takes its buffer from buffer.memory (the batch
// whose callback is running gives its own back after the callbacks) and
// only signals its sender.
func TestACallbackMayProduceTheNextRecord(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "chain", 3, 1)
	for _, mode := range senderModes {
		t.Run(mode.name, func(t *testing.T) {
			p := newProducerWith(t, mode.single, []string{addr}, "acks", "1")
			ctx := ctx(t)
			a := newAcks()
			const n = 300
			prefix := mode.name + "-"
			var produce func(i int)
			produce = func(i int) {
				r := &producer.Record{Topic: "chain", Value: []byte(prefix + strconv.Itoa(i))}
				err := p.Produce(ctx, r, func(r *producer.Record, err error) {
					a.callback(r, err)
					if err == nil && i+1 < n {
						produce(i + 1) // on the goroutine that runs callbacks
					}
				})
				if err != nil {
					a.callback(r, err)
				}
			}
			produce(0)
			a.waitFor(t, n, 30*time.Second)
			require.Equal(t, n, requireOnceInOrder(t, a, n, readAll(t, []string{addr}, "chain"), prefix))
		})
	}
}
