package producer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// Our transactional producer against franz-go's in-memory cluster, an
// implementation of Kafka's transaction coordinator we did not write;
// franz-go's read_committed consumer and admin client judge.

func startTxnFake(t *testing.T, topics ...string) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func readCommitted(t *testing.T, addr, topic string, level kgo.IsolationLevel) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	got := map[string]bool{}
	for empty := 0; empty < 5; {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)], n = true, n+1 })
		if n == 0 {
			empty++
		}
	}
	return got
}

func TestTransactionsCommitAndAbort(t *testing.T) {
	addr := startTxnFake(t, "txn")
	p := newProducer(t, []string{addr}, "transactional.id", "ours", "linger.ms", "5")
	ctx := ctx(t)
	require.ErrorIs(t, p.Produce(ctx, &producer.Record{Topic: "txn", Value: []byte("x")}, nil), producer.ErrNoTransaction)
	require.NoError(t, p.InitTransactions(ctx))
	committed, all := map[string]bool{}, map[string]bool{}
	a := newAcks()
	for i := range 8 {
		require.NoError(t, p.BeginTransaction())
		require.ErrorIs(t, p.BeginTransaction(), producer.ErrTransactionOpen)
		for j := range 10 {
			v := fmt.Sprintf("t%d-r%d", i, j)
			require.NoError(t, p.Produce(ctx, &producer.Record{Topic: "txn", Key: []byte(v), Value: []byte(v)}, a.callback))
			all[v] = true
			if i%2 == 0 {
				committed[v] = true
			}
		}
		if i%2 == 0 {
			require.NoError(t, p.CommitTransaction(ctx))
		} else {
			require.NoError(t, p.AbortTransaction(ctx))
		}
	}
	_, errs, _ := a.snapshot()
	require.Empty(t, errs)
	require.Equal(t, committed, readCommitted(t, addr, "txn", kgo.ReadCommitted()))
	require.Equal(t, all, readCommitted(t, addr, "txn", kgo.ReadUncommitted()))
}

// A second producer with the same transactional.id fences the first:
// its commit fails with ErrFenced, and so does every call after.
func TestANewerProducerFencesTheOlder(t *testing.T) {
	addr := startTxnFake(t, "fenced")
	ctx := ctx(t)
	old := newProducer(t, []string{addr}, "transactional.id", "same")
	require.NoError(t, old.InitTransactions(ctx))
	require.NoError(t, old.BeginTransaction())
	require.NoError(t, old.Produce(ctx, &producer.Record{Topic: "fenced", Value: []byte("old")}, nil))
	require.NoError(t, old.Flush(ctx))

	young := newProducer(t, []string{addr}, "transactional.id", "same")
	require.NoError(t, young.InitTransactions(ctx))
	require.NoError(t, young.BeginTransaction())
	require.NoError(t, young.Produce(ctx, &producer.Record{Topic: "fenced", Value: []byte("young")}, nil))
	require.NoError(t, young.CommitTransaction(ctx))

	err := old.CommitTransaction(ctx)
	require.Error(t, err)
	require.True(t, errors.Is(err, producer.ErrFenced) || errors.Is(err, producer.ErrAbortableTransaction), "%v", err)
	require.Equal(t, map[string]bool{"young": true}, readCommitted(t, addr, "fenced", kgo.ReadCommitted()))
}

// Offsets sent with a transaction become the group's committed offsets
// when it commits, and not when it aborts.
func TestOffsetsCommitWithTheTransaction(t *testing.T) {
	addr := startTxnFake(t, "in", "out")
	ctx := ctx(t)
	p := newProducer(t, []string{addr}, "transactional.id", "etl")
	require.NoError(t, p.InitTransactions(ctx))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fetch := func() int64 {
		o, err := adm.FetchOffsets(ctx, "g")
		require.NoError(t, err)
		got, ok := o.Lookup("in", 1)
		if !ok {
			return -1
		}
		return got.At
	}
	group := producer.GroupMetadata{GroupID: "g", Generation: -1}
	for _, tc := range []struct {
		offset int64
		commit bool
		want   int64
	}{{10, true, 10}, {20, false, 10}, {30, true, 30}} {
		require.NoError(t, p.BeginTransaction())
		require.NoError(t, p.Produce(ctx, &producer.Record{Topic: "out", Value: []byte("v")}, nil))
		require.NoError(t, p.SendOffsetsToTransaction(ctx, group, map[string]map[int32]int64{"in": {1: tc.offset}}))
		if tc.commit {
			require.NoError(t, p.CommitTransaction(ctx))
		} else {
			require.NoError(t, p.AbortTransaction(ctx))
		}
		require.Equal(t, tc.want, fetch(), "after offset %d, commit %v", tc.offset, tc.commit)
	}
}
