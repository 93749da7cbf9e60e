package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// The story Jepsen told of Kafka in 2013 (Kyle Kingsbury, "Call me maybe:
// Kafka"): the ISR shrinks to the leader alone; the leader, still taking
// acks=all writes as the only ISR member, is cut off; a former follower is
// elected; everything the old leader acknowledged alone is gone. Kafka's
// answer was min.insync.replicas and clean leader election. Each test plays
// the story once.
//
//	step                       broker 0           brokers 1, 2
//	write "before" (acks=all)  [before]           [before]
//	1 and 2 stop copying       ISR shrinks to [0] (paused)
//	write "alone"  (acks=all)  [before alone]?    [before]
//	0 is cut off; 1, 2 resume  (stopped)          who leads?
//	0 comes back, follows      ...

// playJepsen runs the story on a cluster with the brokers' props and the
// topic's overrides, and returns what was acknowledged and what a consumer
// reads at the end.
func playJepsen(t *testing.T, props map[string]string, topicProps map[string]string) (acked, read []string, aloneErr error) {
	tc := startCluster(t, props)
	require.NoError(t, tc.SetTopicConfig(tc.tp.Topic, topicProps))
	cl := tc.client(kgo.AllISRAcks(), kgo.RecordRetries(2))
	before, err := produceAll(cl, values("before", 5))
	require.NoError(t, err)

	// The followers stop copying. The first write after that is appended
	// while the ISR still has three members and waits for them; after
	// replica.lag.time.max.ms the leader drops them and decides it (with
	// min.insync.replicas=1: acknowledged by the leader alone; with 2:
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND, and the retries NOT_ENOUGH_REPLICAS).
	tc.server(1).Replicas.PauseFetching(true)
	tc.server(2).Replicas.PauseFetching(true)
	alone, aloneErr := produceAll(cl, values("alone", 5))
	acked = append(before, alone...)
	tc.waitISR(0)
	if aloneErr != nil {
		// franz-go reports only that its retries ran out: ask the leader
		// directly what it answers now.
		code, _ := tc.produceRaw(0, -1, 5*time.Second, "refused")
		aloneErr = kerr.ErrorForCode(code)
	}

	// Broker 0 is cut off: the controller learns of it (in stage 05, its
	// ZooKeeper session expires) and elects a new leader as its rule
	// allows. The followers copy again, from whoever leads.
	require.NoError(t, tc.StopBroker(0))
	require.NoError(t, tc.Controller.BrokerStopped(0))
	tc.server(1).Replicas.PauseFetching(false)
	tc.server(2).Replicas.PauseFetching(false)
	state, _ := tc.Controller.State(tc.tp)
	t.Logf("after broker 0 was cut off: leader %d, ISR %v", state.Leader, state.ISR)

	// Broker 0 comes back and takes the role the controller gives it.
	require.NoError(t, tc.StartBroker(0))
	require.NoError(t, tc.Controller.BrokerStarted(0))
	tc.waitISR(leaderFirst(tc)...)
	return acked, tc.readAll(), aloneErr
}

// leaderFirst is the ISR the partition settles on: the leader, then the
// others as they rejoin.
func leaderFirst(tc *testCluster) []int32 {
	var leader int32 = -1
	require.Eventually(tc.t, func() bool {
		s, _ := tc.Controller.State(tc.tp)
		leader = s.Leader
		return leader >= 0
	}, 20*time.Second, 10*time.Millisecond, "a leader is elected")
	isr := []int32{leader}
	require.Eventually(tc.t, func() bool {
		got, _, err := tc.ISR(tc.tp)
		if err != nil || len(got) != 3 || got[0] != leader {
			return false
		}
		isr = got
		return true
	}, 30*time.Second, 10*time.Millisecond, "every replica rejoins the ISR")
	return isr
}

func TestJepsenUncleanElectionLosesAcknowledgedRecords(t *testing.T) {
	acked, read, aloneErr := playJepsen(t, map[string]string{server.KeyMinInsyncReplicas: "1"},
		map[string]string{server.KeyUncleanLeaderElection: "true"}) // the topic allows it; the brokers' default does not
	require.NoError(t, aloneErr, "with min.insync.replicas=1 the leader alone acknowledges acks=all")
	var lost []string
	for _, v := range acked {
		if !slices.Contains(read, v) {
			lost = append(lost, v)
		}
	}
	t.Logf("acknowledged %d records, read back %d; lost: %v", len(acked), len(read), lost)
	// Broker 1 led without what only broker 0 had (a fetch already on its
	// way when the fetchers paused may have carried the first of them),
	// and broker 0 truncated them when it came back: gone, although
	// acknowledged with acks=all.
	require.NotEmpty(t, lost, "acknowledged records were lost")
	require.Subset(t, values("alone", 5), lost, "only records acknowledged by the leader alone")
	require.Equal(t, values("before", 5), read[:5], "what every replica had survived")
}

func TestJepsenMinInsyncReplicasAndCleanElectionLoseNothing(t *testing.T) {
	acked, read, aloneErr := playJepsen(t, map[string]string{server.KeyUncleanLeaderElection: "false"},
		map[string]string{server.KeyMinInsyncReplicas: "2"}) // the topic asks for it; the brokers' default is 1
	require.ErrorIs(t, aloneErr, kerr.NotEnoughReplicas, "the leader alone refuses acks=all")
	require.Equal(t, values("before", 5), acked, "nothing was acknowledged after the ISR shrank")
	require.Equal(t, acked, read[:len(acked)], "every acknowledged record is there, in order")
	// The first write after the pause was appended before the ISR shrank
	// and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND: in the log, never
	// acknowledged. A producer must treat it as unknown (idempotence, part
	// 2, makes its retry safe).
	require.Subset(t, values("alone", 1), read[len(acked):], "nothing else: the retries were refused before appending")
	t.Logf("acknowledged %d records, read back %d: %v", len(acked), len(read), read)
}
