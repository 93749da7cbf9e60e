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

// TestBufferPoolFreesPooledBuffersForALargerRequest: when the unpooled
// bytes are short, a request larger than batch.size takes its memory from
// the free list, dropping only as many pooled buffers as it needs
// (Kafka's freeUp), and does not wait.
func TestBufferPoolFreesPooledBuffersForALargerRequest(t *testing.T) {
	p := producer.NewBufferPool(64<<10, 16<<10)
	var held [][]byte
	for range 4 {
		b, err := p.Allocate(context.Background(), 16<<10, time.Second)
		require.NoError(t, err)
		held = append(held, b)
	}
	for _, b := range held {
		p.Deallocate(b)
	}
	require.Equal(t, 4, p.FreeBuffers())
	require.Equal(t, int64(64<<10), p.Available())

	big, err := p.Allocate(context.Background(), 40<<10, 10*time.Millisecond)
	require.NoError(t, err, "the free list holds the memory: no wait")
	require.Equal(t, 40<<10, cap(big))
	require.Equal(t, 1, p.FreeBuffers(), "three 16 KiB buffers make room for 40 KiB, the fourth stays pooled")
	require.Equal(t, int64(24<<10), p.Available())

	small, err := p.Allocate(context.Background(), 16<<10, 10*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 0, p.FreeBuffers(), "the pooled buffer is handed out")
	_, err = p.Allocate(context.Background(), 16<<10, 10*time.Millisecond)
	require.ErrorIs(t, err, producer.ErrBufferExhausted, "8 KiB left: a 16 KiB request must wait")
	p.Deallocate(small)
	p.Deallocate(big)
	require.Equal(t, int64(64<<10), p.Available(), "every byte is back")
}

// TestBufferPoolALargeWaiterIsNotOvertakenBySmallOnes: waiters are
// served strictly in order; a waiter whose request does not fit yet
// holds back the smaller ones behind it, which would otherwise take every
// buffer that comes back and starve it. Memory that comes back serves as
// many waiters as it fits, not just one.
func TestBufferPoolALargeWaiterIsNotOvertakenBySmallOnes(t *testing.T) {
	p := producer.NewBufferPool(32<<10, 16<<10)
	var held [][]byte
	for range 2 {
		b, err := p.Allocate(context.Background(), 16<<10, time.Second)
		require.NoError(t, err)
		held = append(held, b)
	}
	type result struct {
		buf []byte
		err error
	}
	large, small := make(chan result, 1), make(chan result, 2)
	go func() {
		b, err := p.Allocate(context.Background(), 32<<10, 30*time.Second)
		large <- result{b, err}
	}()
	require.Eventually(t, func() bool { return p.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	for i := range 2 {
		go func() {
			b, err := p.Allocate(context.Background(), 16<<10, 30*time.Second)
			small <- result{b, err}
		}()
		require.Eventually(t, func() bool { return p.Waiters() == 2+i }, 5*time.Second, time.Millisecond)
	}

	p.Deallocate(held[0]) // 16 KiB free: enough for a small waiter, not for the large one ahead of them
	require.Equal(t, 3, p.Waiters(), "the small waiters do not overtake the large one")
	require.Equal(t, 1, p.FreeBuffers())

	p.Deallocate(held[1]) // 32 KiB free: the large waiter's turn
	var r result
	select {
	case r = <-large:
	case <-time.After(10 * time.Second):
		t.Fatal("the large waiter was not served when its memory came back")
	}
	require.NoError(t, r.err)
	require.Equal(t, 32<<10, cap(r.buf), "the large waiter gets a buffer of its size")
	require.Equal(t, 2, p.Waiters(), "the small ones still wait")
	require.Equal(t, int64(0), p.Available(), "the large waiter holds all the memory")

	p.Deallocate(r.buf) // 32 KiB back at once: both small waiters fit
	for range 2 {
		select {
		case r = <-small:
		case <-time.After(10 * time.Second):
			t.Fatal("a small waiter was not served when the large one gave its 32 KiB back")
		}
		require.NoError(t, r.err)
		require.Equal(t, 16<<10, cap(r.buf))
	}
	require.Equal(t, 0, p.Waiters())
	require.Equal(t, int64(0), p.Available())
}
