package cluster_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// An election policy other than the default: the last live replica that
// is in the ISR leads, alone in the new ISR; with no live ISR member the
// partition stays offline. The controller uses it whenever a leader fails
// or a leaderless partition's replica starts, never for ElectLeader.
func TestElectionPolicyChoosesLeadersAfterAFailureAndAStart(t *testing.T) {
	var mu sync.Mutex
	var calls [][]int32 // the live replicas each call saw
	lastLiveInISR := func(_ commitlog.TopicPartition, s cluster.PartitionState, live func(int32) bool) (int32, []int32) {
		var seen []int32
		leader := int32(-1)
		for _, r := range s.Replicas {
			if live(r) {
				seen = append(seen, r)
				if slices.Contains(s.ISR, r) {
					leader = r
				}
			}
		}
		mu.Lock()
		calls = append(calls, seen)
		mu.Unlock()
		if leader < 0 {
			return -1, s.ISR
		}
		return leader, []int32{leader}
	}
	c := startClusterWith(t, 3, cluster.Options{Elect: lastLiveInISR})
	c.createTopic("policy", 1, 3) // leader 0, ISR [0 1 2]
	p := tp("policy", 0)
	state := func() (int32, int32, []int32) {
		st, ok := c.Controller.State(p)
		require.True(t, ok)
		return st.Leader, st.LeaderEpoch, st.ISR
	}
	requireState := func(leader, epoch int32, isr []int32, msg string) {
		t.Helper()
		l, e, i := state()
		require.Equal(t, []any{leader, epoch, isr}, []any{l, e, i}, msg)
	}

	c.stop(0)
	requireState(2, 1, []int32{2}, "the policy's choice (the default would pick broker 1)")
	b2, _ := c.Broker(2)
	rp, ok := b2.Replicas.Partition(p.Topic, p.Partition)
	require.True(t, ok)
	require.Equal(t, replica.Leader, rp.Role(), "broker 2 was told it leads")
	b1, _ := c.Broker(1)
	require.Equal(t, []int32{2}, b1.Metadata.Partitions(p.Topic)[0].ISR, "the metadata carries the policy's ISR")

	c.stop(2)
	requireState(-1, 2, []int32{2}, "broker 1 runs, but is not in the ISR: offline at the next epoch")
	require.Equal(t, int32(-1), b1.Metadata.Partitions(p.Topic)[0].Leader)

	c.start(0)
	requireState(-1, 2, []int32{2}, "still no live ISR member: nothing written")

	c.start(2)
	requireState(2, 3, []int32{2}, "the ISR member is back and leads")
	b2, _ = c.Broker(2)
	rp, ok = b2.Replicas.Partition(p.Topic, p.Partition)
	require.True(t, ok)
	require.Equal(t, replica.Leader, rp.Role())
	c.produce(p, kgo.LeaderAck(), "led by the policy's choice")
	c.waitInSync(p)

	c.elect(p, 0)
	requireState(0, 4, []int32{2}, "an explicit election takes the broker it is given")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, [][]int32{{1, 2}, {1}, {0, 1}, {0, 1, 2}}, calls,
		"called on stop 0, stop 2, start 0 and start 2; not on ElectLeader")
}
