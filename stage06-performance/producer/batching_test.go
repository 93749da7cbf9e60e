package producer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// TestALoneRecordWaitsLingerMs: a batch that does not fill up is sent
// once it has waited linger.ms, not before.
func TestALoneRecordWaitsLingerMs(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "slow", 1, 1)
	const linger = 300 * time.Millisecond
	p := newProducer(t, []string{addr}, "acks", "1", "linger.ms", fmt.Sprint(linger.Milliseconds()))
	warm := newAcks() // the first record also waits for metadata and a connection
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "slow", Value: []byte("warm-up")}, warm.callback))
	warm.waitFor(t, 1, 10*time.Second)

	a := newAcks()
	start := time.Now()
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "slow", Value: []byte("alone")}, a.callback))
	a.waitFor(t, 1, 10*time.Second)
	took := time.Since(start)
	t.Logf("a lone record with linger.ms=%d was acknowledged after %v", linger.Milliseconds(), took)
	require.GreaterOrEqual(t, took, linger)
}

// TestFlushSendsALingeringBatchAtOnce: Flush makes every batch ready,
// so it returns as soon as the brokers answer, not after linger.ms.
func TestFlushSendsALingeringBatchAtOnce(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "flushed", 1, 1)
	const linger = 10 * time.Second
	p := newProducer(t, []string{addr}, "acks", "1", "linger.ms", fmt.Sprint(linger.Milliseconds()))
	a := newAcks()
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "flushed", Value: []byte("lingering")}, a.callback))
	start := time.Now()
	flushCtx, cancel := context.WithTimeout(ctx(t), linger/3)
	defer cancel()
	require.NoError(t, p.Flush(flushCtx), "Flush waited for linger.ms")
	require.Equal(t, 1, a.count())
	t.Logf("Flush returned after %v with linger.ms=%d", time.Since(start), linger.Milliseconds())
}

// TestBatchesFillUpToBatchSize: records produced faster than linger.ms
// travel in batches of at most batch.size bytes, each filled until the
// next record did not fit, as the broker stores them.
func TestBatchesFillUpToBatchSize(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "sized", 1, 1)
	const batchSize = 1024
	p := newProducer(t, []string{addr}, "acks", "1", "batch.size", fmt.Sprint(batchSize), "linger.ms", "1000")
	a := newAcks()
	value := []byte(strings.Repeat("v", 100))
	const n = 900
	for range n {
		require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "sized", Value: value}, a.callback))
	}
	require.NoError(t, p.Flush(ctx(t)))
	recordSize := (&record.Record{Value: value, OffsetDelta: 100, TimestampDelta: 100}).EncodedSize()
	batches := storedBatches(t, addr, "sized", 0)
	total := 0
	for i, h := range batches {
		require.LessOrEqual(t, h.Size(), batchSize, "batch %d", i)
		if i < len(batches)-1 {
			require.Greater(t, h.Size(), batchSize-recordSize, "batch %d (%d records) was sent before it was full", i, h.NumRecords)
		}
		total += int(h.NumRecords)
	}
	require.Equal(t, n, total)
	t.Logf("%d records of %d bytes in %d batches of %d records", n, recordSize, len(batches), batches[0].NumRecords)
}

// TestARecordLargerThanBatchSizeGetsABufferOfItsOwn: a record that does
// not fit in batch.size opens a batch whose buffer is sized for it, and
// that buffer, counted against buffer.memory while it is out, comes back
// whole (it is not pooled).
func TestARecordLargerThanBatchSizeGetsABufferOfItsOwn(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "large", 1, 1)
	const batchSize, memory = 1024, 16 * 1024
	p := newProducer(t, []string{addr}, "acks", "1", "batch.size", fmt.Sprint(batchSize), "buffer.memory", fmt.Sprint(memory),
		"linger.ms", "1000")
	a := newAcks()
	values := []string{"small-0", "small-1", "large-" + strings.Repeat("L", 3*batchSize), "small-2"}
	for _, v := range values {
		require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "large", Key: []byte("k"), Value: []byte(v)}, a.callback))
	}
	require.NoError(t, p.Flush(ctx(t)))
	_, failed, _ := a.snapshot()
	require.Empty(t, failed)
	require.Equal(t, len(values), a.count())
	var got []string
	for _, r := range readAll(t, []string{addr}, "large") {
		got = append(got, r.value)
	}
	require.Equal(t, values, got)
	batches := storedBatches(t, addr, "large", 0)
	require.Len(t, batches, 2, "the large record did not fit the first batch and opened one of its own")
	require.Equal(t, int32(2), batches[0].NumRecords)
	require.Greater(t, batches[1].Size(), batchSize)
	require.Equal(t, int64(memory), p.BufferPool().Available(), "every byte is back in the pool, no more, no less")
}

// TestAFullBatchLeavesWithoutWaitingOutLinger: a record that does not fit
// closes its batch for appends and makes it ready at once, as Kafka's
// closeForRecordAppends does, even when the sticky partitioner moves the
// next keyless records to another partition and nothing follows the full
// batch in its deque.
func TestAFullBatchLeavesWithoutWaitingOutLinger(t *testing.T) {
	addr := startBroker(t)
	createTopic(t, []string{addr}, "sticky", 2, 1)
	const linger = 20 * time.Second
	p := newProducer(t, []string{addr}, "acks", "1", "batch.size", "1024", "linger.ms", fmt.Sprint(linger.Milliseconds()))
	a := newAcks()
	value := strings.Repeat("v", 100)
	var first []int32 // the partition of each record, as Produce chose it
	for i := range 12 {
		r := &producer.Record{Topic: "sticky", Value: []byte(fmt.Sprintf("%02d%s", i, value))}
		require.NoError(t, p.Produce(ctx(t), r, a.callback))
		first = append(first, r.Partition)
	}
	full := 0 // the records of the first partition, before the switch
	for full < len(first) && first[full] == first[0] {
		full++
	}
	require.Less(t, full, len(first), "the sticky partitioner moved on once the batch was full: %v", first)
	start := time.Now()
	a.waitFor(t, full, linger/2)
	t.Logf("the full batch of %d records was acknowledged after %v (linger.ms=%d)", full, time.Since(start), linger.Milliseconds())
}

// TestEveryCodecRoundTrips: with each compression.type, the records read
// back are the ones produced, and the batches are stored with the codec,
// on our broker and on franz-go's kfake (idempotent there: acks=all).
func TestEveryCodecRoundTrips(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "codecs"))
	require.NoError(t, err)
	defer fake.Close()
	ours := startBroker(t)
	createTopic(t, []string{ours}, "codecs", 1, 1)
	for _, codec := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		for _, cluster := range []struct {
			name  string
			addrs []string
			acks  string
		}{{"ours", []string{ours}, "1"}, {"kfake", fake.ListenAddrs(), "all"}} {
			t.Run(codec.String()+"/"+cluster.name, func(t *testing.T) {
				p := newProducer(t, cluster.addrs, "acks", cluster.acks, "compression.type", codec.String(), "linger.ms", "20")
				a := newAcks()
				var want []string
				for i := range 300 {
					v := fmt.Sprintf(`{"codec":%q,"n":%d,"event":"page_view","path":"/catalog/items/%d"}`, codec, i, i%17)
					want = append(want, v)
					require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "codecs", Value: []byte(v)}, a.callback))
				}
				require.NoError(t, p.Flush(ctx(t)))
				_, failed, _ := a.snapshot()
				require.Empty(t, failed)
				var got []string
				for _, r := range readAll(t, cluster.addrs, "codecs") {
					if strings.Contains(r.value, fmt.Sprintf(`"codec":%q`, codec)) {
						got = append(got, r.value)
						require.Equal(t, uint8(codec), r.codec, "the stored batch has the codec")
					}
				}
				require.Equal(t, want, got)
			})
		}
	}
}

// TestExhaustedBufferMemoryBlocksProduceThenFails: while the broker's
// answers are held, the batches keep their buffers; once buffer.memory is
// used up Produce blocks, and fails after max.block.ms. When the answers
// come, the memory comes back and everything produced before is
// acknowledged.
func TestExhaustedBufferMemoryBlocksProduceThenFails(t *testing.T) {
	g, addr := startGatedBroker(t)
	createTopic(t, []string{addr}, "held", 1, 1)
	const batchSize = 1024
	p := newProducer(t, []string{addr}, "acks", "1", "batch.size", fmt.Sprint(batchSize), "buffer.memory", fmt.Sprint(4*batchSize),
		"max.block.ms", "300")
	a := newAcks()
	value := func(i int) []byte { return fmt.Appendf(nil, "%03d-%s", i, strings.Repeat("x", 96)) }
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "held", Value: value(0)}, a.callback))
	a.waitFor(t, 1, 10*time.Second) // metadata and connection are there
	g.Hold()
	produced := 0
	var blocked time.Duration
	for {
		start := time.Now()
		err := p.Produce(ctx(t), &producer.Record{Topic: "held", Value: value(1 + produced)}, a.callback)
		if err != nil {
			blocked = time.Since(start)
			require.ErrorIs(t, err, producer.ErrBufferExhausted)
			require.ErrorContains(t, err, "failed to allocate memory within the configured max blocking time")
			break
		}
		produced++
		require.Less(t, produced, 1000, "Produce never ran out of buffer memory")
	}
	t.Logf("%d records fit in buffer.memory=%d; the next Produce blocked %v", produced, 4*batchSize, blocked)
	require.GreaterOrEqual(t, blocked, 300*time.Millisecond)
	require.Equal(t, 1, a.count(), "nothing was acknowledged while the answers were held")

	g.Release()
	a.waitFor(t, 1+produced, 30*time.Second)
	_, failed, _ := a.snapshot()
	require.Empty(t, failed)
	require.Equal(t, int64(4*batchSize), p.BufferPool().Available(), "every buffer is back")
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "held", Value: value(999)}, a.callback), "memory is there again")
	require.NoError(t, p.Flush(ctx(t)))
}
