package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
	"github.com/kafkaworkbook/workbook/stage06-performance/zerocopy"
)

func TestMain(m *testing.M) {
	brokertest.MainWith(m, "github.com/kafkaworkbook/workbook/stage06-performance/cmd/broker")
}

// TestFollowersAndConsumersFetchThroughSendfile: three stage 06 broker
// processes, which write every Fetch response's log regions with
// sendfile(2). 20 MB of acks=all records with min.insync.replicas=3 reach
// both followers (their fetches are answered by sendfile, and the
// producer's acknowledgements wait for them), and a consumer reads every
// record back, value for value, in order.
func TestFollowersAndConsumersFetchThroughSendfile(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	if zerocopy.Zero {
		for id := range int32(3) {
			require.Contains(t, c.Broker(id).Log(), "fetch responses write log regions with sendfile (zero copy)")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("zero"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, "zero")
	require.NoError(t, err)
	require.NoError(t, created["zero"].Err)

	const n = 5000
	value := strings.Repeat("x", 4000)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%06d %s", i, value)})
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr(), "acks=all with min.insync.replicas=3: both followers fetched every batch")

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("zero"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	next := map[int32]int{0: 0, 1: 1}
	for read := 0; read < n; {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", read, n)
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, fmt.Sprintf("%06d %s", next[r.Partition], value), string(r.Value))
			next[r.Partition] += 2
			read++
		})
	}
}
