package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// isr returns partition 0's leader and ISR as broker 'asked' sees them.
func isr(t *testing.T, c *cluster.Cluster, topic string) (int32, []int32) {
	t.Helper()
	cl, err := c.Client()
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return -1, nil
	}
	p := md.Topics[topic].Partitions[0]
	s := slices.Clone(p.ISR)
	slices.Sort(s)
	return p.Leader, s
}

// TestClusterLifecycle: Up starts three ZooKeeper servers, three brokers
// and Prometheus; each fault does what it says, seen from a client; Down
// leaves nothing behind.
func TestClusterLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := fmt.Sprintf("lifecycle-%d", time.Now().UnixNano()%1e6)
	c, err := cluster.Up(ctx, cluster.Config{Name: name, Prometheus: true, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Down(context.Background(), name)) })

	cl, err := c.Client(kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 3, nil, "t")
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.Eventually(t, func() bool {
		l, s := isr(t, c, "t")
		return l >= 0 && len(s) == 3
	}, 30*time.Second, 200*time.Millisecond)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr())

	leader, _ := isr(t, c, "t")
	var followers []string
	for _, b := range c.Brokers() {
		if int32(b.ID) != leader {
			followers = append(followers, b.Name)
		}
	}
	t.Logf("cut leader %d from %v", leader, followers)
	require.NoError(t, c.Cut(ctx, c.Broker(int(leader)).Name, followers...))
	// A follower whose log ends where the leader's does is in sync however
	// long it has been silent (Kafka's rule too): only a write the
	// followers cannot fetch makes them lag.
	one, err := c.Client(kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	require.NoError(t, err)
	defer one.Close()
	require.NoError(t, one.ProduceSync(ctx, &kgo.Record{Value: []byte("b")}).FirstErr())
	require.Eventually(t, func() bool {
		l, s := isr(t, c, "t")
		return l == leader && slices.Equal(s, []int32{leader})
	}, 60*time.Second, 500*time.Millisecond, "the leader, cut from its followers, keeps leading and shrinks the ISR to itself")
	require.NoError(t, c.Heal(ctx))
	require.Eventually(t, func() bool {
		_, s := isr(t, c, "t")
		return len(s) == 3
	}, 60*time.Second, 500*time.Millisecond, "healed: the followers catch up and rejoin")

	require.NoError(t, c.Kill(ctx, c.Broker(int(leader)).Name))
	require.Eventually(t, func() bool {
		l, _ := isr(t, c, "t")
		return l >= 0 && l != leader
	}, 60*time.Second, 500*time.Millisecond, "a new leader after kill -9")
	require.NoError(t, c.Start(ctx, c.Broker(int(leader)).Name))
	require.NoError(t, c.WaitBroker(ctx, int(leader)))

	other, _ := isr(t, c, "t")
	require.NoError(t, c.Disconnect(ctx, c.Broker(int(other)).Name))
	require.Eventually(t, func() bool {
		l, _ := isr(t, c, "t")
		return l >= 0 && l != other
	}, 60*time.Second, 500*time.Millisecond, "a new leader after the old one left the network")
	require.NoError(t, c.Connect(ctx, c.Broker(int(other)).Name))
	require.NoError(t, c.WaitBroker(ctx, int(other)))
	require.Eventually(t, func() bool {
		_, s := isr(t, c, "t")
		return len(s) == 3
	}, 60*time.Second, 500*time.Millisecond, "every replica back in sync")

	again, err := cluster.Attach(ctx, name)
	require.NoError(t, err)
	require.Equal(t, c.BootstrapServers(), again.BootstrapServers())
	require.Len(t, again.ZooKeepers(), 3)
}
