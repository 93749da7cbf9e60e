package cluster

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// TestSlowFollowerLeavesTheISRAndRejoins: seed §1.3. A follower that stops
// copying leaves the ISR after replica.lag.time.max.ms, and acks=all goes on
// with the two that remain; when it copies again it catches up and rejoins.
// Both changes are written through the state store, each at a new version.
func TestSlowFollowerLeavesTheISRAndRejoins(t *testing.T) {
	tc := startCluster(t, nil)
	start := tc.waitISR(0, 1, 2)
	cl := tc.client(kgo.AllISRAcks())

	var acked, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("r")}).FirstErr()
			cancel()
			if err != nil {
				failed.Add(1)
				t.Logf("produce: %v", err)
			} else {
				acked.Add(1)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	require.Eventually(t, func() bool { return acked.Load() > 10 }, 10*time.Second, 10*time.Millisecond)
	paused := time.Now()
	tc.server(2).Replicas.PauseFetching(true)
	shrunk := tc.waitISR(0, 1)
	t.Logf("broker 2 left the ISR %v after its fetcher paused (replica.lag.time.max.ms %v)", time.Since(paused).Round(time.Millisecond), lagMax)
	require.Greater(t, time.Since(paused), lagMax/2, "not before it could have fallen behind")

	before := acked.Load()
	require.Eventually(t, func() bool { return acked.Load() > before+10 }, 10*time.Second, 10*time.Millisecond,
		"acks=all goes on with the ISR that remains")

	tc.server(2).Replicas.PauseFetching(false)
	rejoined := tc.waitISR(0, 1, 2)
	require.Zero(t, failed.Load(), "no produce failed: acks=all waits only for the ISR")

	require.Less(t, start, shrunk)
	require.Less(t, shrunk, rejoined, "each change is a new version of the state")
	leader := tc.server(0).ISR // it counts a change once installed, just after the store has it
	require.Eventually(t, func() bool { return leader.Shrinks() == 1 && leader.Expands() == 1 }, 10*time.Second, time.Millisecond,
		"the leader counted one shrink and one expansion")
	var isrs [][]int32
	for _, w := range tc.States.History(isr.StatePath(tc.tp)) {
		s, err := isr.DecodePartitionState(w.Data)
		require.NoError(t, err)
		require.Equal(t, int32(0), s.Leader)
		isrs = append(isrs, s.ISR)
	}
	require.Equal(t, [][]int32{{0, 1, 2}, {0, 1}, {0, 1, 2}}, isrs, "created by the controller, shrunk and expanded by the leader")

	// The controller heard of both changes (isr_change_notification) and
	// told every broker: a client's Metadata shows the ISR.
	require.Eventually(t, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(tc.tp.Topic)}}
		resp, err := req.RequestWith(context.Background(), cl)
		return err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 &&
			slices.Equal(resp.Topics[0].Partitions[0].ISR, []int32{0, 1, 2})
	}, 10*time.Second, 20*time.Millisecond)
	// The controller deletes a notification after it has told the brokers,
	// so a client may see the ISR a moment before the node goes.
	require.Eventually(t, func() bool { return len(tc.States.Children(isr.IsrChangeNotificationPath)) == 0 },
		10*time.Second, 10*time.Millisecond, "notifications are consumed")
}

// TestMinInsyncReplicasRefusesAcksAllBeforeAppending: seed §1.4 with
// min.insync.replicas=2 and three replicas. Two brokers stop; once the
// leader has dropped them from the ISR, acks=all is refused with
// NOT_ENOUGH_REPLICAS and nothing is appended, while acks=1 still works.
func TestMinInsyncReplicasRefusesAcksAllBeforeAppending(t *testing.T) {
	tc := startCluster(t, map[string]string{server.KeyMinInsyncReplicas: "2"})
	code, _ := tc.produceRaw(0, -1, 10*time.Second, "committed")
	require.Zero(t, code)

	require.NoError(t, tc.StopBroker(1))
	require.NoError(t, tc.StopBroker(2))
	// A follower falls out of sync only when the leader has something it
	// lacks (Kafka's rule: its log end differs from the leader's): an idle
	// partition keeps a dead follower in its ISR until the controller
	// removes it (stage 05). One acks=1 record makes them lag.
	code, _ = tc.produceRaw(0, 1, 10*time.Second, "the stopped brokers lack this")
	require.Zero(t, code)
	tc.waitISR(0)

	end := tc.logEnd(0)
	code, _ = tc.produceRaw(0, -1, 10*time.Second, "refused")
	require.Equal(t, kerr.NotEnoughReplicas.Code, code)
	require.Equal(t, end, tc.logEnd(0), "nothing appended")

	code, offset := tc.produceRaw(0, 1, 10*time.Second, "acks=1 ignores min.insync.replicas")
	require.Zero(t, code)
	require.Equal(t, end, offset)
	require.Equal(t, end+1, tc.logEnd(0))
}

// TestMinInsyncReplicasIsATopicConfig: the broker default is 1; a topic
// that sets 2 refuses acks=all with the leader alone.
func TestMinInsyncReplicasIsATopicConfig(t *testing.T) {
	tc := startCluster(t, nil)
	require.NoError(t, tc.SetTopicConfig(tc.tp.Topic, map[string]string{server.KeyMinInsyncReplicas: "2"}))
	tc.server(1).Replicas.PauseFetching(true)
	tc.server(2).Replicas.PauseFetching(true)
	code, _ := tc.produceRaw(0, 1, 10*time.Second, "the followers lack this")
	require.Zero(t, code)
	tc.waitISR(0)
	code, _ = tc.produceRaw(0, -1, 10*time.Second, "refused")
	require.Equal(t, kerr.NotEnoughReplicas.Code, code)
}

// TestISRShrinkingAfterTheAppendAnswersNotEnoughReplicasAfterAppend: an
// acks=all batch is appended while the ISR has three members; both
// followers stop copying before they have it, so it waits; when the leader
// drops them, the high watermark passes the batch, but the ISR is now
// below min.insync.replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND, and the
// batch stays in the log.
func TestISRShrinkingAfterTheAppendAnswersNotEnoughReplicasAfterAppend(t *testing.T) {
	tc := startCluster(t, map[string]string{server.KeyMinInsyncReplicas: "2"})
	tc.server(1).Replicas.PauseFetching(true)
	tc.server(2).Replicas.PauseFetching(true)
	end := tc.logEnd(0)

	start := time.Now()
	code, offset := tc.produceRaw(0, -1, 60*time.Second, "appended, then the ISR shrank")
	require.Equal(t, kerr.NotEnoughReplicasAfterAppend.Code, code)
	require.Greater(t, time.Since(start), lagMax/2, "answered when the ISR shrank, not before")
	require.Equal(t, end, offset, "it was appended at the log end")
	require.Equal(t, end+1, tc.logEnd(0), "and stays")
	isrNow, _, err := tc.ISR(tc.tp)
	require.NoError(t, err)
	require.Equal(t, []int32{0}, isrNow)
}

// TestAcksAllTimesOutWhenTheISRCannotCatchUp: with one follower paused and
// still in the ISR, an acks=all produce whose timeout is shorter than
// replica.lag.time.max.ms expires in the purgatory: REQUEST_TIMED_OUT.
func TestAcksAllTimesOutWhenTheISRCannotCatchUp(t *testing.T) {
	tc := startCluster(t, nil)
	tc.server(2).Replicas.PauseFetching(true)
	start := time.Now()
	code, _ := tc.produceRaw(0, -1, 200*time.Millisecond, "late")
	require.Equal(t, kerr.RequestTimedOut.Code, code)
	require.GreaterOrEqual(t, time.Since(start), 190*time.Millisecond)
}

// TestLeaderWithAStaleStateStopsChangingTheISR: the leader's ISR writes are
// conditional on the state version it holds. When someone else has written
// the state (a controller whose LeaderAndIsr has not arrived yet), the
// leader's shrink fails, and it changes nothing more until the controller's
// next LeaderAndIsr brings the new version; then it shrinks again.
func TestLeaderWithAStaleStateStopsChangingTheISR(t *testing.T) {
	tc := startCluster(t, nil)
	path := isr.StatePath(tc.tp)
	data, v, err := tc.States.Get(path)
	require.NoError(t, err)
	_, err = tc.States.Set(path, data, v) // the same state, one version on
	require.NoError(t, err)
	writes := len(tc.States.History(path))

	tc.server(2).Replicas.PauseFetching(true)
	code, _ := tc.produceRaw(0, 1, 10*time.Second, "broker 2 lacks this")
	require.Zero(t, code)
	require.Eventually(t, func() bool { return slices.Contains(tc.server(0).ISR.Fenced(), tc.tp) }, 20*time.Second, 10*time.Millisecond,
		"the leader's shrink found a newer version")
	require.Len(t, tc.States.History(path), writes, "and wrote nothing")
	s, _ := tc.server(0).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
	_, ok := s.LeaderView()
	require.True(t, ok, "it still leads")

	// The controller tells it the state as it is (a new leader epoch, the
	// current version); the next shrink succeeds.
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0))
	tc.waitISR(0, 1)
	require.Empty(t, tc.server(0).ISR.Fenced())
}

// TestWaitingProduceSurvivesALeaderEpochBumpWithTheSameLeader: the
// controller bumps the leader epoch without moving the leader (Kafka's
// controller does when it removes a dead follower from the ISR). An
// acks=all produce waiting meanwhile goes on waiting and succeeds: its
// batch is still in this leader's log (stage 03's StillLeadsBatch), as in
// Kafka, where only a lost leadership answers NOT_LEADER_OR_FOLLOWER.
func TestWaitingProduceSurvivesALeaderEpochBumpWithTheSameLeader(t *testing.T) {
	tc := startCluster(t, nil)
	tc.server(2).Replicas.PauseFetching(true)
	answer := make(chan int16, 1)
	go func() {
		code, _ := tc.produceRaw(0, -1, 30*time.Second, "waits across the epoch bump")
		answer <- code
	}()
	require.Eventually(t, func() bool { return tc.logEnd(0) == 1 }, 10*time.Second, 5*time.Millisecond, "appended")
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 0)) // leader 0 again, epoch 1
	select {
	case code := <-answer:
		t.Fatalf("answered %d while broker 2, in the ISR, still lacks the batch", code)
	default:
	}
	tc.server(2).Replicas.PauseFetching(false)
	select {
	case code := <-answer:
		require.Zero(t, code, "acknowledged once the ISR has it")
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
}

// TestAWaitingProduceIsAnsweredNotLeaderWhenTheLeaderMoves: an acks=all
// produce waits for broker 2, which has stopped copying; the controller
// moves the leadership to broker 1. The old leader can no longer vouch for
// the batch (the new leader may not have it, and its log decides), so the
// waiting produce is answered NOT_LEADER_OR_FOLLOWER at once, not
// REQUEST_TIMED_OUT at its deadline: the producer learns to ask the new
// leader.
func TestAWaitingProduceIsAnsweredNotLeaderWhenTheLeaderMoves(t *testing.T) {
	tc := startCluster(t, nil)
	tc.server(2).Replicas.PauseFetching(true)
	answer := make(chan int16, 1)
	start := time.Now()
	go func() {
		code, _ := tc.produceRaw(0, -1, 30*time.Second, "waits for broker 2")
		answer <- code
	}()
	require.Eventually(t, func() bool { return tc.logEnd(0) == 1 }, 10*time.Second, 5*time.Millisecond, "appended")
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 1))
	select {
	case code := <-answer:
		require.Equal(t, kerr.NotLeaderForPartition.Code, code)
		require.Less(t, time.Since(start), 20*time.Second, "answered when the leader moved, not at the deadline")
	case <-time.After(40 * time.Second):
		t.Fatal("no answer")
	}
}
