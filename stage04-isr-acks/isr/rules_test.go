package isr

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

func TestOutOfSyncFollowsLastCaughtUpTimeNotLastFetch(t *testing.T) {
	now := time.Unix(1000, 0)
	lag := 30 * time.Second
	followers := map[int32]replica.ReplicaState{
		// Fetched a moment ago, but has not had everything for 31 s: a
		// follower too slow for the produce rate.
		1: {LogEndOffset: 90, LastFetchTime: now, LastCaughtUpTime: now.Add(-31 * time.Second)},
		// Stopped fetching 31 s ago, but had everything then and nothing
		// was appended since: still in sync.
		2: {LogEndOffset: 100, LastFetchTime: now.Add(-31 * time.Second), LastCaughtUpTime: now.Add(-31 * time.Second)},
		// Behind, but caught up 29 s ago: within the lag.
		3: {LogEndOffset: 50, LastCaughtUpTime: now.Add(-29 * time.Second)},
	}
	require.Equal(t, []int32{1}, OutOfSync(0, []int32{0, 1, 2, 3}, followers, 100, now, lag))
	require.Empty(t, OutOfSync(0, []int32{0, 2, 3}, followers, 100, now, lag))
	require.Empty(t, OutOfSync(1, []int32{1}, followers, 100, now, lag), "the leader never leaves")
}

// TestOutOfSyncPassesOverAnIDThatIsNoLongerAReplica: an ISR member the
// leader keeps no follower state for (a reassignment removed it) is left
// to the controller; read as a zero state it would look caught up at
// time zero, long out of sync.
func TestOutOfSyncPassesOverAnIDThatIsNoLongerAReplica(t *testing.T) {
	now := time.Unix(1000, 0)
	followers := map[int32]replica.ReplicaState{
		1: {LogEndOffset: 100, LastCaughtUpTime: now},
		3: {LogEndOffset: 40, LastCaughtUpTime: now.Add(-time.Minute)},
	}
	require.Equal(t, []int32{3}, OutOfSync(0, []int32{0, 1, 2, 3}, followers, 100, now, 30*time.Second),
		"2 has no state: not this leader's to remove")
}

func TestCanJoinNeedsTheHighWatermarkAndTheEpochStart(t *testing.T) {
	require.True(t, CanJoin(100, 100, 80))
	require.False(t, CanJoin(99, 100, 80), "missing a committed record")
	require.False(t, CanJoin(100, 90, 120), "has not reached this leader's epoch: it may still truncate")
}

func TestWithAndWithoutKeepTheOrderMembersJoinedIn(t *testing.T) {
	require.Equal(t, []int32{2, 0}, Without([]int32{2, 1, 0}, []int32{1}))
	require.Equal(t, []int32{2, 0, 1}, With([]int32{2, 0}, 1))
	isr := []int32{2, 0}
	require.Equal(t, []int32{2, 0}, With(isr, 0))
	_ = With(isr, 1)
	require.Equal(t, []int32{2, 0}, isr, "inputs are not changed")
}

func TestPartitionStateJSONIsKafkas(t *testing.T) {
	s := PartitionState{ControllerEpoch: 1, Leader: 0, LeaderEpoch: 3, ISR: []int32{0, 2}}
	require.Equal(t, `{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":3,"isr":[0,2]}`, string(s.Encode()))
	back, err := DecodePartitionState(s.Encode())
	require.NoError(t, err)
	require.True(t, s.Equal(back))
	_, err = DecodePartitionState([]byte(`{"version":2,"leader":0}`))
	require.ErrorContains(t, err, "version 2")
	require.Equal(t, "/brokers/topics/orders/partitions/7/state", StatePath(commitlog.TopicPartition{Topic: "orders", Partition: 7}))

	n := EncodeIsrChange([]commitlog.TopicPartition{{Topic: "orders", Partition: 0}})
	require.Equal(t, `{"version":1,"partitions":[{"topic":"orders","partition":0}]}`, string(n))
	tps, err := DecodeIsrChange(n)
	require.NoError(t, err)
	require.Equal(t, []commitlog.TopicPartition{{Topic: "orders", Partition: 0}}, tps)
}

func TestMemoryStoreWritesAreConditionalOnTheVersion(t *testing.T) {
	m := NewMemoryStore()
	tp := commitlog.TopicPartition{Topic: "orders", Partition: 0}
	var seen []string
	m.Watch(func(path string) { seen = append(seen, path) })
	require.NoError(t, m.Create(StatePath(tp), PartitionState{Leader: 0, ISR: []int32{0, 1}}.Encode()))
	require.ErrorIs(t, m.Create(StatePath(tp), nil), ErrNodeExists)

	v, err := m.UpdatePartitionState(tp, PartitionState{Leader: 0, ISR: []int32{0}}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
	_, err = m.UpdatePartitionState(tp, PartitionState{Leader: 0, ISR: []int32{0, 1}}, 0)
	require.True(t, errors.Is(err, ErrBadVersion), "a stale writer is refused: %v", err)

	s, v, err := m.PartitionState(tp)
	require.NoError(t, err)
	require.EqualValues(t, 1, v)
	require.Equal(t, []int32{0}, s.ISR)
	require.Len(t, m.History(StatePath(tp)), 2)

	require.NoError(t, m.NotifyIsrChange([]commitlog.TopicPartition{tp}))
	require.NoError(t, m.NotifyIsrChange([]commitlog.TopicPartition{tp}))
	require.Equal(t, []string{
		"/isr_change_notification/isr_change_0000000000",
		"/isr_change_notification/isr_change_0000000001",
	}, m.Children(IsrChangeNotificationPath))
	require.Equal(t, []string{StatePath(tp), StatePath(tp),
		"/isr_change_notification/isr_change_0000000000", "/isr_change_notification/isr_change_0000000001"}, seen)
}
