package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/final/clustertest"
)

// leaderIn returns partition 0's leader in broker id's view, -1 if it
// does not answer.
func leaderIn(ctx context.Context, c *cluster.Cluster, id int) int32 {
	if v, ok := c.Views(ctx, "t")[id]; ok {
		return v[0].Leader
	}
	return -1
}

// settled waits until every broker sees a leader and a full ISR.
func settled(t *testing.T, ctx context.Context, c *cluster.Cluster, msg string) {
	t.Helper()
	var why string
	require.Eventually(t, func() bool {
		ok, w := c.Settled(ctx, "t")
		why = w
		return ok
	}, 60*time.Second, 250*time.Millisecond, "%s (last: %s)", msg, why)
}

// TestClusterLifecycle: Up starts three ZooKeeper servers and three
// brokers; each fault does what it says, seen from a client: a leader cut
// from its followers keeps leading with an ISR of itself, a killed leader
// and a disconnected one are replaced, each comes back into the ISR; and
// Attach finds the cluster from its name alone. (clustertest.Start's
// cleanup is Down; cmd/cluster's TestUpStatusDown shows it leaves nothing.)
func TestClusterLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := clustertest.Start(t, cluster.Config{})
	name := c.Name()

	cl, err := c.Client(kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 3, nil, "t")
	require.NoError(t, err)
	require.NoError(t, res.Err)
	settled(t, ctx, c, "a new topic: a leader and every replica in sync")
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr())

	leader := int(leaderIn(ctx, c, 0))
	var followers []string
	var others []int
	for _, b := range c.Brokers() {
		if b.ID != leader {
			followers, others = append(followers, b.Name), append(others, b.ID)
		}
	}
	t.Logf("cut leader %d from %v", leader, followers)
	require.NoError(t, c.Cut(ctx, c.Broker(leader).Name, followers...))
	// A follower whose log ends where the leader's does is in sync however
	// long it has been silent (Kafka's rule too): only a write the
	// followers cannot fetch makes them lag.
	one, err := c.Client(kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	require.NoError(t, err)
	defer one.Close()
	require.NoError(t, one.ProduceSync(ctx, &kgo.Record{Value: []byte("b")}).FirstErr())
	// Which brokers hear of the shrink depends on where the controller is:
	// the leader itself (then only it knows), or a follower (then the
	// followers know, through its UpdateMetadata, and the leader, behind
	// the cut, does not). Some broker does.
	require.Eventually(t, func() bool {
		for _, v := range c.Views(ctx, "t") {
			if p := v[0]; p.Leader == int32(leader) && slices.Equal(p.ISR, []int32{int32(leader)}) {
				return true
			}
		}
		return false
	}, 60*time.Second, 250*time.Millisecond, "the leader, cut from its followers, keeps leading and shrinks the ISR to itself")
	require.NoError(t, c.Heal(ctx))
	settled(t, ctx, c, "healed: the followers catch up and rejoin, and every broker hears")

	require.NoError(t, c.Kill(ctx, c.Broker(leader).Name))
	require.Eventually(t, func() bool {
		l := leaderIn(ctx, c, others[0])
		return l >= 0 && int(l) != leader
	}, 60*time.Second, 250*time.Millisecond, "a new leader after kill -9")
	require.NoError(t, c.Start(ctx, c.Broker(leader).Name))
	require.NoError(t, c.WaitBroker(ctx, leader))
	settled(t, ctx, c, "the killed broker rejoins")

	other := int(leaderIn(ctx, c, leader))
	require.NoError(t, c.Disconnect(ctx, c.Broker(other).Name))
	require.Eventually(t, func() bool {
		l := leaderIn(ctx, c, (other+1)%3)
		return l >= 0 && int(l) != other
	}, 60*time.Second, 250*time.Millisecond, "a new leader after the old one left the network")
	require.NoError(t, c.Connect(ctx, c.Broker(other).Name))
	require.NoError(t, c.WaitBroker(ctx, other))
	settled(t, ctx, c, "every replica back in sync")

	again, err := cluster.Attach(ctx, name)
	require.NoError(t, err)
	require.Equal(t, c.BootstrapServers(), again.BootstrapServers())
	require.Len(t, again.ZooKeepers(), 3)
}
