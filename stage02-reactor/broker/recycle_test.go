package broker

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// valueOf is record i of partition p: 1,000 bytes that name both, so a
// record carried by another request's bytes would not read back as itself.
func valueOf(p int32, i int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "p%d-r%06d;", p, i), 100)[:1000]
}

// TestRecycledRequestBuffersNeverMixBatches: the Produce handler gives each
// request's bytes back to the network layer's free list once its batches
// are appended and counted (network.Request.Recycle), so the next
// requests are read into the same buffers. Three producers on three
// connections send uncompressed batches of a few hundred KB at once; every
// record reads back as it was sent, in order, and buffers were recycled.
func TestRecycledRequestBuffersNeverMixBatches(t *testing.T) {
	tb := startBroker(t, "message.max.bytes", "1048588")
	tb.createTopic("recycled", 3)
	const perPartition = 6000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for p := range int32(3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := tb.manualClient(kgo.DefaultProduceTopic("recycled"), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerLinger(5*time.Millisecond), kgo.DisableIdempotentWrite())
			for i := range perPartition {
				cl.Produce(ctx, &kgo.Record{Partition: p, Value: valueOf(p, i)}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	got := consumeAll(t, tb, "recycled", 3, 3*perPartition)
	require.Len(t, got, 3*perPartition)
	next := map[int32]int{}
	for _, r := range got {
		i := next[r.Partition]
		require.Equal(t, int64(i), r.Offset, "partition %d", r.Partition)
		require.True(t, bytes.Equal(valueOf(r.Partition, i), r.Value), "partition %d offset %d holds %.12q", r.Partition, i, r.Value)
		next[r.Partition]++
	}
	require.NotZero(t, tb.NetworkStats().BuffersRecycled, "no Produce request's buffer was recycled")
}
