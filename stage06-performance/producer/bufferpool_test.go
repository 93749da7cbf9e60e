package producer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// TestBufferPoolReusesBatchSizeBuffers: a batch.size buffer given back is
// the next one handed out (the same memory: no garbage); a larger one is
// counted while out and dropped when back.
func TestBufferPoolReusesBatchSizeBuffers(t *testing.T) {
	p := producer.NewBufferPool(64<<10, 16<<10)
	a, err := p.Allocate(context.Background(), 16<<10, time.Second)
	require.NoError(t, err)
	require.Equal(t, 16<<10, cap(a))
	require.Equal(t, int64(48<<10), p.Available())
	a = append(a, "records"...)
	p.Deallocate(a)
	require.Equal(t, 1, p.FreeBuffers())
	b, err := p.Allocate(context.Background(), 16<<10, time.Second)
	require.NoError(t, err)
	require.Len(t, b, 0)
	require.Same(t, &a[:1][0], &b[:1][0], "the pooled buffer is handed out again")

	big, err := p.Allocate(context.Background(), 40<<10, time.Second)
	require.NoError(t, err)
	require.Equal(t, int64(8<<10), p.Available())
	p.Deallocate(big)
	require.Equal(t, 0, p.FreeBuffers(), "only batch.size buffers are pooled")
	require.Equal(t, int64(48<<10), p.Available())

	_, err = p.Allocate(context.Background(), 65<<10, time.Second)
	require.ErrorContains(t, err, "larger than buffer.memory")
}

// TestBufferPoolExhaustedBlocksThenFailsAfterMaxBlock: with buffer.memory
// used up, Allocate waits max.block.ms and fails with Kafka's message.
func TestBufferPoolExhaustedBlocksThenFailsAfterMaxBlock(t *testing.T) {
	p := producer.NewBufferPool(32<<10, 16<<10)
	for range 2 {
		_, err := p.Allocate(context.Background(), 16<<10, time.Second)
		require.NoError(t, err)
	}
	start := time.Now()
	_, err := p.Allocate(context.Background(), 16<<10, 300*time.Millisecond)
	require.ErrorIs(t, err, producer.ErrBufferExhausted)
	require.ErrorContains(t, err, "Failed to allocate memory within the configured max blocking time"[len("Failed "):])
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.False(t, p.Waiting(), "a waiter that gave up leaves the queue")
}

// TestBufferPoolFreedBufferUnblocksTheOldestWaiter: waiters are served
// first come, first served, as buffers come back.
func TestBufferPoolFreedBufferUnblocksTheOldestWaiter(t *testing.T) {
	p := producer.NewBufferPool(32<<10, 16<<10)
	var held [][]byte
	for range 2 {
		b, err := p.Allocate(context.Background(), 16<<10, time.Second)
		require.NoError(t, err)
		held = append(held, b)
	}
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			_, err := p.Allocate(context.Background(), 16<<10, 30*time.Second)
			if err == nil {
				order <- i
			}
		}()
		// the second waiter queues behind the first
		require.Eventually(t, func() bool { return p.Waiters() == i+1 }, 5*time.Second, time.Millisecond)
	}
	p.Deallocate(held[0])
	select {
	case i := <-order:
		require.Equal(t, 0, i, "the oldest waiter first")
	case <-time.After(10 * time.Second):
		t.Fatal("a freed buffer did not unblock a waiter")
	}
	p.Deallocate(held[1])
	require.Equal(t, 1, <-order)
}

// TestBufferPoolWaiterGivesUpWithItsContext: a Produce's context cancels
// its wait for memory (franz-go's producer does the same).
func TestBufferPoolWaiterGivesUpWithItsContext(t *testing.T) {
	p := producer.NewBufferPool(16<<10, 16<<10)
	_, err := p.Allocate(context.Background(), 16<<10, time.Second)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = p.Allocate(ctx, 16<<10, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
