package consumer_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// isolation.level=read_committed: transactions committed and aborted by
// franz-go's transactional producer on franz-go's in-memory cluster (an
// implementation of Kafka's transactions we did not write), interleaved
// with a plain producer's records. Our consumer reads the committed and
// plain ones only, in offset order; read_uncommitted reads them all; no
// control record reaches the application either way.
func TestReadCommittedSkipsAbortedTransactions(t *testing.T) {
	addr := startFake(t, 1)
	const topic = "txns"
	createTopic(t, addr, topic, 2)
	ctx := deadline(t, 60*time.Second)
	txn, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer txn.Close()
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer plain.Close()

	committed, all := map[int32][]string{}, map[int32][]string{}
	for i := range 12 {
		require.NoError(t, txn.BeginTransaction())
		commit := i%3 != 1
		for j := range 4 {
			p, v := int32(j%2), fmt.Sprintf("txn-%d-%d", i, j)
			require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr())
			all[p] = append(all[p], v)
			if commit {
				committed[p] = append(committed[p], v)
			}
			if j == 1 { // a plain record in the middle of the transaction
				pv := fmt.Sprintf("plain-%d", i)
				require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(pv)}).FirstErr())
				all[0], committed[0] = append(all[0], pv), append(committed[0], pv)
			}
		}
		require.NoError(t, txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	count := func(m map[int32][]string) (n int) {
		for _, vs := range m {
			n += len(vs)
		}
		return n
	}
	for _, tc := range []struct {
		level string
		want  map[int32][]string
	}{{"read_committed", committed}, {"read_uncommitted", all}} {
		c := newConsumer(t, config(t, addr, map[string]string{"isolation.level": tc.level, "max.poll.records": "7"}))
		require.NoError(t, c.Assign(ctx, partitions(topic, 2)...))
		got := map[int32][]string{}
		offsets := map[int32][]int64{}
		for p, recs := range pollUntil(t, ctx, c, count(tc.want)) {
			for _, r := range recs {
				got[p] = append(got[p], r.Value)
				offsets[p] = append(offsets[p], r.Offset)
			}
		}
		require.Equal(t, tc.want, got, tc.level)
		for p, offs := range offsets {
			require.True(t, slices.IsSorted(offs), "%s: partition %d in offset order", tc.level, p)
		}
	}
}
