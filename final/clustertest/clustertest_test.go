package clustertest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/clustertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestBrokerImageServesClients: two brokers of the image built FROM
// scratch, on a ZooKeeper container's network, replicate to each other on
// their INTERNAL listener and serve a client on this machine through their
// published PLAINTEXT ports, which Metadata advertises: an acks=all
// produce with min.insync.replicas=2 is read back whole.
func TestBrokerImageServesClients(t *testing.T) {
	ens := zktest.StartStandalone(t)
	brokers := clustertest.StartBrokers(t, ens, 2, nil)
	var addrs []string
	for _, b := range brokers {
		addrs = append(addrs, b.Addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	md, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	var told []string
	for _, b := range md.Brokers {
		told = append(told, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	slices.Sort(told)
	slices.Sort(addrs)
	require.Equal(t, addrs, told, "each broker advertises its published PLAINTEXT port")

	created, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("order %03d", i))
	}
	require.Eventually(t, func() bool { // until both partitions have leaders and a full ISR
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(want[0])}).FirstErr() == nil
	}, 60*time.Second, 200*time.Millisecond, "acks=all with both replicas in sync")
	for _, v := range want[1:] {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)}).FirstErr())
	}
	var got []string
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), len(want))
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	require.ElementsMatch(t, want, got)
}
