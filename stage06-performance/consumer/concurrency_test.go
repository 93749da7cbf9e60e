package consumer_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
)

// TestOffsetsNeedNoLockUnderConcurrentPollCommitAndReassignment: Poll on
// one goroutine, CommitSync and CommitAsync on another, Seek and Assign
// on a third, Position and Committed read on a fourth, all at once (run
// under -race). Every record Poll returns is the one produced at its
// offset (their order is the seeks' to decide: one Poll may hold a
// partition's records from before and after a seek), and after the storm
// a seek to the start reads every partition whole, in order.
func TestOffsetsNeedNoLockUnderConcurrentPollCommitAndReassignment(t *testing.T) {
	addr := startFake(t, 2)
	const topic, n = "storm", 2000
	createTopic(t, addr, topic, 4)
	want := produce(t, addr, topic, n, kgo.Lz4Compression())
	c := newConsumer(t, config(t, addr, map[string]string{"group.id": "storm", "max.poll.records": "37",
		"max.partition.fetch.bytes": "2048", "auto.commit.interval.ms": "5"}))
	all := partitions(topic, 4)
	require.NoError(t, c.Assign(deadline(t, 10*time.Second), all...))

	ctx, stop := context.WithCancel(deadline(t, 60*time.Second))
	var wg sync.WaitGroup
	polled := 0
	wg.Go(func() { // the application
		for ctx.Err() == nil {
			recs, err := c.Poll(ctx)
			if errors.Is(err, context.Canceled) || !assert.NoError(t, err) {
				return // (assert, not require: FailNow belongs to the test's goroutine)
			}
			for i := range recs {
				r := &recs[i]
				if !assert.Equal(t, want[r.Partition][r.Offset], received(r), "the record at %d[%d]", r.Partition, r.Offset) {
					return
				}
			}
			polled += len(recs)
		}
	})
	wg.Go(func() { // a committer besides the automatic one
		for ctx.Err() == nil {
			if err := c.CommitSync(ctx); ctx.Err() == nil && !assert.NoError(t, err) {
				return
			}
			c.CommitAsync(nil)
		}
	})
	wg.Go(func() { // an observer
		for ctx.Err() == nil {
			for _, tp := range all {
				c.Position(tp)
				c.Committed(tp)
			}
			c.Assignment()
		}
	})
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 { // the reassigner
		switch i % 10 {
		case 0:
			require.NoError(t, c.Assign(ctx, all[:1+r.IntN(4)]...))
		case 5:
			require.NoError(t, c.Assign(ctx, all...))
		default:
			tp := all[r.IntN(4)]
			if err := c.Seek(tp, int64(r.IntN(n/4))); err != nil {
				require.NotContains(t, c.Assignment(), tp, "Seek fails only for what is not assigned")
			}
		}
		time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond) // jitter between changes, not a wait for a condition
	}
	stop()
	wg.Wait()
	require.Positive(t, polled)

	require.NoError(t, c.Assign(deadline(t, 10*time.Second), all...))
	for _, tp := range all {
		require.NoError(t, c.Seek(tp, 0))
	}
	got := pollUntil(t, deadline(t, 30*time.Second), c, n)
	require.Equal(t, want, got)
}

// TestCloseCommitsAndFailsLaterCalls: Close commits the positions; calls
// after it fail with ErrClosed.
func TestCloseCommitsAndFailsLaterCalls(t *testing.T) {
	addr := startFake(t, 1)
	createTopic(t, addr, "close", 1)
	produce(t, addr, "close", 100, kgo.NoCompression())
	c := newConsumer(t, config(t, addr, map[string]string{"group.id": "closers", "enable.auto.commit": "false"}))
	tp := consumer.TopicPartition{Topic: "close", Partition: 0}
	require.NoError(t, c.Assign(deadline(t, 10*time.Second), tp))
	pollUntil(t, deadline(t, 10*time.Second), c, 100)
	require.NoError(t, c.Close(deadline(t, 10*time.Second)))
	_, err := c.Poll(context.Background())
	require.ErrorIs(t, err, consumer.ErrClosed)
	require.ErrorIs(t, c.Close(context.Background()), consumer.ErrClosed)

	again := newConsumer(t, config(t, addr, map[string]string{"group.id": "closers"}))
	require.NoError(t, again.Assign(deadline(t, 10*time.Second), tp))
	off, ok := again.Committed(tp)
	require.True(t, ok)
	require.EqualValues(t, 100, off)
}

// TestAutoCommitCommitsWhatThePreviousPollReturned: the background
// committer commits the position at the start of the latest Poll (the
// application asked past the records before it), never the records the
// latest Poll returned: a member that dies holding them leaves them to be
// read again.
func TestAutoCommitCommitsWhatThePreviousPollReturned(t *testing.T) {
	addr := startFake(t, 1)
	createTopic(t, addr, "auto", 1)
	produce(t, addr, "auto", 100, kgo.NoCompression())
	tp := consumer.TopicPartition{Topic: "auto", Partition: 0}
	c := newConsumer(t, config(t, addr, map[string]string{"group.id": "autos", "max.poll.records": "10",
		"auto.commit.interval.ms": "20", "fetch.max.wait.ms": "10"}))
	require.NoError(t, c.Assign(deadline(t, 10*time.Second), tp))
	ctx := deadline(t, 20*time.Second)
	var before int64 // the position when the latest Poll began
	for got := 0; got < 20; {
		before, _ = c.Position(tp)
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		got += len(recs)
	}
	held, ok := c.Position(tp)
	require.True(t, ok)
	require.Greater(t, held, before)
	var committed int64
	require.Eventually(t, func() bool { committed, ok = c.Committed(tp); return ok && committed == before }, 10*time.Second, 5*time.Millisecond,
		"the committer commits where the latest Poll began, not the %d its records reach", held)

	other := newConsumer(t, config(t, addr, map[string]string{"group.id": "autos"}))
	require.NoError(t, other.Assign(deadline(t, 10*time.Second), tp))
	again, ok := other.Committed(tp)
	require.True(t, ok)
	require.Equal(t, committed, again, "what the coordinator stored")
}

// TestCommitsAreSentInTheOrderAsked: CommitAsync after every Poll, each
// reading a larger position, and an auto-committer besides: the
// callbacks run in the order of the calls, and the coordinator keeps the
// last position, never an older one that overtook it.
func TestCommitsAreSentInTheOrderAsked(t *testing.T) {
	addr := startFake(t, 1)
	createTopic(t, addr, "ordered", 1)
	produce(t, addr, "ordered", 1000, kgo.NoCompression())
	tp := consumer.TopicPartition{Topic: "ordered", Partition: 0}
	c := newConsumer(t, config(t, addr, map[string]string{"group.id": "orderers", "max.poll.records": "7",
		"auto.commit.interval.ms": "1"}))
	require.NoError(t, c.Assign(deadline(t, 10*time.Second), tp))
	ctx := deadline(t, 30*time.Second)
	var mu sync.Mutex
	var order []int
	calls := 0
	for got := 0; got < 1000; calls++ {
		recs, err := c.Poll(ctx)
		require.NoError(t, err)
		got += len(recs)
		call := calls
		c.CommitAsync(func(err error) {
			assert.NoError(t, err)
			mu.Lock()
			order = append(order, call)
			mu.Unlock()
		})
	}
	require.NoError(t, c.CommitSync(ctx), "after every CommitAsync asked before it")
	mu.Lock()
	require.Len(t, order, calls)
	require.IsIncreasing(t, order)
	mu.Unlock()

	other := newConsumer(t, config(t, addr, map[string]string{"group.id": "orderers"}))
	require.NoError(t, other.Assign(deadline(t, 10*time.Second), tp))
	committed, ok := other.Committed(tp)
	require.True(t, ok)
	require.EqualValues(t, 1000, committed)
}
