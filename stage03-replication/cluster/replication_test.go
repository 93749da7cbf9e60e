package cluster_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestReplicasAreIdenticalAfter100kRecordsWithAcksAll(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("orders", 1, 3)
	p := tp("orders", 0)

	cl := c.client(kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var failed error
	var mu sync.Mutex
	for i := range 100_000 {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	require.NoError(t, cl.Flush(ctx))
	require.NoError(t, failed)

	batches := c.waitInSync(p)
	require.Equal(t, int64(99_999), batches[len(batches)-1].LastOffset)
	for _, b := range batches {
		require.Equal(t, int32(0), b.Epoch, "every batch was stamped by the first leader")
	}
}

func TestLeaderChangeUnderLoadLosesNoAcknowledgedRecord(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("payments", 1, 3)
	p := tp("payments", 0)

	var mu sync.Mutex
	var acked []int // values acknowledged, in no particular order
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a producer with acks=all, one record at a time
		defer wg.Done()
		cl := c.client(kgo.DefaultProduceTopic("payments"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr()
			cancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, i)
				mu.Unlock()
			}
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	for _, leader := range []int32{1, 2, 0, 1} {
		before := ackedCount()
		require.Eventually(t, func() bool { return ackedCount() > before+50 }, 30*time.Second, time.Millisecond)
		c.elect(p, leader)
	}
	before := ackedCount()
	require.Eventually(t, func() bool { return ackedCount() > before+50 }, 30*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()

	batches := c.waitInSync(p)
	mu.Lock()
	want := append([]int(nil), acked...)
	mu.Unlock()
	got := c.consume(p, int(batches[len(batches)-1].LastOffset+1)) // everything below the high watermark
	// Everything acknowledged is there; retries may have duplicated a
	// record, but first occurrences are in production order.
	seen := map[int]bool{}
	last := -1
	for _, v := range got {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		if seen[n] {
			continue
		}
		require.Greater(t, n, last, "record %d came after %d: reordered", n, last)
		seen[n], last = true, n
	}
	for _, n := range want {
		require.True(t, seen[n], "acknowledged record %d is missing (consumed %s)", n, strings.Join(got[:min(20, len(got))], ","))
	}
}

// TestMetadataAnswersEachNameOnce: stage 03's Metadata, answered from the
// metadata cache, lists a name given many times once, as stage 02's does.
func TestMetadataAnswersEachNameOnce(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic("named", 2, 1)
	req := kmsg.NewPtrMetadataRequest()
	for range 1000 {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("named")},
			kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("unknown")})
	}
	resp, err := req.RequestWith(context.Background(), c.client())
	require.NoError(t, err)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, "named", *resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 2)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
}
