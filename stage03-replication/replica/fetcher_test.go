package replica

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// followerWithEpochs is broker 0's replica of t-0, now following broker 1
// at epoch 5, whose log holds one record per offset written at the given
// epochs, and whose high watermark is hw.
func followerWithEpochs(t *testing.T, epochs []int32, hw int64) *Partition {
	p := newTestPartition(t, AllReplicas{}, newClock())
	for _, epoch := range epochs {
		if epoch != p.Epochs.LatestEpoch() {
			require.NoError(t, p.MakeLeader(leaderState(epoch, 0, 1)))
		}
		_, _, err := p.AppendAsLeader(batch(t, "x"))
		require.NoError(t, err)
	}
	require.NoError(t, p.UpdateFollowerFetchState(1, hw, 0, -1))
	require.Equal(t, hw, p.HighWatermark())
	require.NoError(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 5, Replicas: []int32{0, 1}}))
	return p
}

// TestAnEpochThatStartsAtOurLogEndIsForgottenWhenTheLeaderAnswers: a
// broker that led an epoch and appended nothing in it (MakeLeader records
// the epoch at the log end) becomes a follower and asks its new leader
// about that epoch. The leader never had it, and answers an epoch we never
// had either, ending past our log end: the cut lands at our log end and
// changes no record, but the empty epoch must go (Kafka's
// UnifiedLog.truncateTo truncates the epoch cache even then), or the
// follower asks the same question again, gets the same answer, and never
// fetches: TestSoak's follower stuck for good.
func TestAnEpochThatStartsAtOurLogEndIsForgottenWhenTheLeaderAnswers(t *testing.T) {
	p := followerWithEpochs(t, []int32{0, 0, 0, 2, 2, 4}, 4)
	require.NoError(t, p.MakeLeader(leaderState(6, 0, 1)))
	require.NoError(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 7, Replicas: []int32{0, 1}}))
	require.Equal(t, []EpochEntry{{0, 0}, {2, 3}, {4, 5}, {6, 6}}, p.Epochs.Entries(), "epoch 6 starts at the log end, empty")
	tp := p.TopicPartition
	s := &fetchState{p: p, epoch: 7, truncating: true}
	f := &fetcher{m: &Manager{cfg: Config{BrokerID: 0}}, leaderID: 1, logger: quiet,
		parts: map[commitlog.TopicPartition]*fetchState{tp: s}}

	// Asked about epoch 6, the leader answers its epoch 5, which ends at 8.
	rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.EndOffset = tp.Partition, 5, 8
	f.truncateFromAnswer(tp, s, &rp)
	require.Equal(t, int64(6), p.Log.EndOffset(), "no record is cut")
	require.True(t, s.truncating, "it asks again")
	require.Equal(t, int32(4), p.Epochs.LatestEpoch(), "about the epoch below the empty one: a new question, so the truncation ends")

	// Asked about epoch 4, the leader answers that it ends at 6: done.
	rp.LeaderEpoch, rp.EndOffset = 4, 6
	f.truncateFromAnswer(tp, s, &rp)
	require.False(t, s.truncating)
	require.Equal(t, int64(6), p.Log.EndOffset())
	require.Equal(t, []EpochEntry{{0, 0}, {2, 3}, {4, 5}}, p.Epochs.Entries())
}

// TestFollowerTruncatesWhereTheLeadersAnswerSays applies one
// OffsetsForLeaderEpoch answer to a follower whose log holds epoch 0 at
// [0, 3), epoch 2 at [3, 5) and epoch 4 at [5, 6), and checks where it cuts
// and whether it asks again (KIP-101, KIP-279).
func TestFollowerTruncatesWhereTheLeadersAnswerSays(t *testing.T) {
	tests := []struct {
		name        string
		epoch       int32 // the leader's answer
		endOffset   int64
		wantEnd     int64 // the follower's log end after the cut
		wantAskMore bool  // still truncating: it asks again before fetching
	}{
		{"the leader has our latest epoch and more: nothing is cut", 4, 8, 6, false},
		{"the leader has our latest epoch, ending earlier: cut at its end", 4, 5, 5, false},
		{"a shared epoch that ends first on the leader's side", 2, 4, 4, false},
		{"a shared epoch that ends first on our side: cut where ours ends", 2, 9, 5, false},
		{"an epoch we never had: cut where our epoch below it ends, and ask again", 3, 7, 5, true},
		{"an epoch we never had, ending before ours below it: cut at the leader's end, and ask again", 1, 2, 2, true},
		{"a leader that lost its log: epoch 0 ends at 0", 0, 0, 0, false},
		{"no answer: fall back to the high watermark", UndefinedEpoch, UndefinedOffset, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := followerWithEpochs(t, []int32{0, 0, 0, 2, 2, 4}, 4)
			require.Equal(t, []EpochEntry{{0, 0}, {2, 3}, {4, 5}}, p.Epochs.Entries())
			tp := p.TopicPartition
			s := &fetchState{p: p, epoch: 5, truncating: true}
			f := &fetcher{m: &Manager{cfg: Config{BrokerID: 0}}, leaderID: 1, logger: quiet,
				parts: map[commitlog.TopicPartition]*fetchState{tp: s}}
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.EndOffset = tp.Partition, tt.epoch, tt.endOffset

			f.truncateFromAnswer(tp, s, &rp)
			require.Equal(t, tt.wantEnd, p.Log.EndOffset(), "where the log was cut")
			require.Equal(t, tt.wantAskMore, s.truncating, "whether it asks the leader again")
			require.LessOrEqual(t, p.HighWatermark(), p.Log.EndOffset())
		})
	}
}
