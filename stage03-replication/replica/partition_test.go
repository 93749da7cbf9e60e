package replica

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

var quiet = slog.New(slog.DiscardHandler)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *clock                   { return &clock{now: time.UnixMilli(1_700_000_000_000)} }
func batch(t *testing.T, values ...string) []byte {
	b := record.NewBatch(0)
	for i, v := range values {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	out, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

// newTestPartition is broker 0's replica of t-0, with quorum q.
func newTestPartition(t *testing.T, q Quorum, c *clock) *Partition {
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	l, err := commitlog.Open(filepath.Join(t.TempDir(), tp.String()), commitlog.DefaultConfig(), commitlog.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	p, err := newPartition(&store.Partition{TopicPartition: tp, Log: l}, 0, 0, Options{Quorum: q, Listener: NopListener{}, Logger: quiet, Now: c.Now})
	require.NoError(t, err)
	return p
}

func leaderState(epoch int32, replicas ...int32) LeaderAndIsrState {
	return LeaderAndIsrState{Leader: 0, LeaderEpoch: epoch, Replicas: replicas, ISR: replicas}
}

func TestHighWatermarkIsTheSmallestLogEndOffset(t *testing.T) {
	require.Equal(t, int64(10), HighWatermark(10, nil), "a leader alone commits everything")
	require.Equal(t, int64(4), HighWatermark(10, []int64{7, 4, 9}))
	require.Equal(t, int64(-1), HighWatermark(10, []int64{7, -1}), "a follower that never fetched holds it back")
}

func TestLeaderHighWatermarkWaitsForEveryReplicaAndNeverGoesBack(t *testing.T) {
	c := newClock()
	p := newTestPartition(t, AllReplicas{}, c)
	require.NoError(t, p.MakeLeader(leaderState(0, 0, 1, 2)))
	for range 3 {
		_, _, err := p.AppendAsLeader(batch(t, "a", "b"))
		require.NoError(t, err)
	}
	require.Equal(t, int64(0), p.HighWatermark())

	wake := make(chan struct{}, 1)
	p.HWAdvanced.Watch(wake)
	require.NoError(t, p.UpdateFollowerFetchState(1, 6, 0, -1))
	require.Equal(t, int64(0), p.HighWatermark(), "broker 2 has not fetched")
	require.NoError(t, p.UpdateFollowerFetchState(2, 4, 0, -1))
	require.Equal(t, int64(4), p.HighWatermark())
	select {
	case <-wake:
	default:
		t.Fatal("the high watermark moved without a signal")
	}
	require.NoError(t, p.UpdateFollowerFetchState(2, 2, 0, -1)) // an old fetch, arriving late
	require.Equal(t, int64(4), p.HighWatermark(), "never backwards")

	err := p.UpdateFollowerFetchState(7, 0, 0, -1)
	require.ErrorIs(t, err, ErrUnknownReplica)
	err = p.UpdateFollowerFetchState(1, 99, 0, -1)
	require.ErrorIs(t, err, commitlog.ErrOffsetOutOfRange, "a follower cannot be ahead of its leader")
}

// noFollowers is a Quorum that counts nobody: stage 04's ISR of one.
type noFollowers struct{}

func (noFollowers) Counted(int32, []int32, []int32) []int32 { return nil }

func TestQuorumDecidesWhoCountsForTheHighWatermark(t *testing.T) {
	p := newTestPartition(t, noFollowers{}, newClock())
	require.NoError(t, p.MakeLeader(leaderState(0, 0, 1, 2)))
	_, last, err := p.AppendAsLeader(batch(t, "a"))
	require.NoError(t, err)
	require.Equal(t, last+1, p.HighWatermark(), "with nobody else counted, an append commits at once")
}

func TestLeaderStampsAndRecordsItsEpoch(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, p.MakeLeader(leaderState(3, 0, 1)))
	b := batch(t, "x")
	_, _, err := p.AppendAsLeader(b)
	require.NoError(t, err)
	h, _ := record.ReadHeader(b)
	require.Equal(t, int32(3), h.PartitionLeaderEpoch)
	require.Equal(t, []EpochEntry{{3, 0}}, p.Epochs.Entries())

	require.NoError(t, p.MakeLeader(leaderState(5, 0, 1)))
	require.Equal(t, []EpochEntry{{3, 0}, {5, 1}}, p.Epochs.Entries(), "epoch 5 starts at the log end")
}

func TestStaleLeaderAndIsrStatesAreRefused(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, p.MakeLeader(leaderState(4, 0, 1)))
	require.ErrorIs(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 4, Replicas: []int32{0, 1}}), ErrStaleEpoch)
	require.ErrorIs(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 2, Replicas: []int32{0, 1}}), ErrStaleEpoch)
	require.Equal(t, Leader, p.Role())
	require.ErrorIs(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 9, Replicas: []int32{1, 2}}), ErrNotReplica)
	require.NoError(t, p.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 5, Replicas: []int32{0, 1}}))
	require.Equal(t, Follower, p.Role())
	_, _, err := p.AppendAsLeader(batch(t, "x"))
	require.ErrorIs(t, err, ErrNotLeader)
}

func TestLeaderChecksTheClientsEpoch(t *testing.T) {
	p := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, p.MakeLeader(leaderState(4, 0, 1)))
	require.NoError(t, p.CheckLeader(-1))
	require.NoError(t, p.CheckLeader(4))
	require.ErrorIs(t, p.CheckLeader(3), ErrFencedEpoch)
	require.ErrorIs(t, p.CheckLeader(5), ErrUnknownEpoch)
}

func TestFollowerLearnsEpochsFromBatchesAndTakesTheLeadersHighWatermark(t *testing.T) {
	// What the leader wrote: epoch 0 then epoch 3.
	leader := newTestPartition(t, noFollowers{}, newClock())
	require.NoError(t, leader.MakeLeader(leaderState(0, 0)))
	var data []byte
	for i, epoch := range []int32{0, 0, 3} {
		if epoch != 0 && i > 0 {
			require.NoError(t, leader.MakeLeader(leaderState(epoch, 0)))
		}
		b := batch(t, "a", "b")
		_, _, err := leader.AppendAsLeader(b)
		require.NoError(t, err)
		data = append(data, b...)
	}

	f := newTestPartition(t, AllReplicas{}, newClock())
	require.NoError(t, f.MakeFollower(LeaderAndIsrState{Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 0}}))
	// The leader's read stopped inside the last batch: that part waits.
	leo, err := f.AppendAsFollower(data[:len(data)-5], 6)
	require.NoError(t, err)
	require.Equal(t, int64(4), leo)
	require.Equal(t, int64(4), f.HighWatermark(), "the leader's high watermark, bounded by our log end")
	leo, err = f.AppendAsFollower(data[len(data)-len(data)/3:], 6)
	require.NoError(t, err)
	require.Equal(t, int64(6), leo)
	require.Equal(t, int64(6), f.HighWatermark())
	require.Equal(t, []EpochEntry{{0, 0}, {3, 4}}, f.Epochs.Entries())

	require.NoError(t, f.TruncateTo(4))
	require.Equal(t, []EpochEntry{{0, 0}}, f.Epochs.Entries(), "truncation forgets the epochs it removed")
	require.Equal(t, int64(4), f.HighWatermark())
}

func TestLastCaughtUpTimeFollowsKafkasRule(t *testing.T) {
	c := newClock()
	p := newTestPartition(t, AllReplicas{}, c)
	require.NoError(t, p.MakeLeader(leaderState(0, 0, 1)))
	start := c.Now()
	_, _, err := p.AppendAsLeader(batch(t, "a", "b")) // leader end 2
	require.NoError(t, err)

	c.Advance(time.Second)
	require.NoError(t, p.UpdateFollowerFetchState(1, 0, 0, -1)) // behind
	r, _ := p.Remote(1)
	require.Equal(t, start, r.LastCaughtUpTime, "not caught up: unchanged")

	c.Advance(time.Second)
	_, _, err = p.AppendAsLeader(batch(t, "c")) // leader end 3
	require.NoError(t, err)
	fetchedAt := c.Now()
	require.NoError(t, p.UpdateFollowerFetchState(1, 2, 0, -1)) // reached where the leader ended at its last fetch...
	r, _ = p.Remote(1)
	require.Equal(t, start.Add(time.Second), r.LastCaughtUpTime, "...so it was caught up at that fetch")

	c.Advance(time.Second)
	require.NoError(t, p.UpdateFollowerFetchState(1, 3, 0, -1)) // at the leader's end
	r, _ = p.Remote(1)
	require.Equal(t, fetchedAt.Add(time.Second), r.LastCaughtUpTime, "caught up now")
}
