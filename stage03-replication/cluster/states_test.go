package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
)

// storeWrite is one Update the controller made.
type storeWrite struct {
	Expected, Got int32 // the partition epoch it expected, and the new one (-1: refused)
	Leader        int32
	ISR           []int32
}

// racingStore is the default store with a leader that writes the ISR just
// before the controller's next Updates, as a stage 04 leader may between
// the controller's Load and Update. It records the controller's writes.
type racingStore struct {
	*cluster.MemoryStateStore
	mu        sync.Mutex
	creates   int          // Protected by mu.
	updates   []storeWrite // the controller's. Protected by mu.
	conflicts int          // Updates still to be preceded by a leader's write. Protected by mu.
	leaderISR []int32      // what that leader writes. Protected by mu.
}

func newRacingStore() *racingStore {
	return &racingStore{MemoryStateStore: cluster.NewMemoryStateStore()}
}

func (s *racingStore) Create(tp commitlog.TopicPartition, st cluster.PartitionState, controllerEpoch int32) (int32, error) {
	s.mu.Lock()
	s.creates++
	s.mu.Unlock()
	return s.MemoryStateStore.Create(tp, st, controllerEpoch)
}

func (s *racingStore) Update(tp commitlog.TopicPartition, st cluster.PartitionState, controllerEpoch int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conflicts > 0 {
		s.conflicts--
		if _, err := s.leaderWrites(tp, s.leaderISR); err != nil {
			return 0, err
		}
	}
	epoch, err := s.MemoryStateStore.Update(tp, st, controllerEpoch)
	w := storeWrite{Expected: st.PartitionEpoch, Got: epoch, Leader: st.Leader, ISR: st.ISR}
	if err != nil {
		w.Got = -1
	}
	s.updates = append(s.updates, w)
	return epoch, err
}

// leaderWrites writes tp's ISR as its leader would: conditionally on the
// partition epoch it just read.
func (s *racingStore) leaderWrites(tp commitlog.TopicPartition, isr []int32) (int32, error) {
	var st cluster.PartitionState
	if err := s.MemoryStateStore.Load(tp, &st); err != nil {
		return 0, err
	}
	st.ISR = isr
	return s.MemoryStateStore.Update(tp, st, 0)
}

// race makes a leader write isr before each of the controller's next n
// Updates.
func (s *racingStore) race(n int, isr []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts, s.leaderISR = n, isr
}

func (s *racingStore) writes() []storeWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.updates
	s.updates = nil
	return out
}

// A leader shrinks the ISR between the controller's Load and its Update:
// the controller's write is refused, it loads again, decides on the ISR the
// leader wrote, and tells the brokers the partition epoch its own write
// made.
func TestControllerLoadsAndDecidesAgainWhenALeaderWroteMeanwhile(t *testing.T) {
	store, log := newRacingStore(), &requestLog{}
	c := startClusterWith(t, 3, cluster.Options{States: store, NewServer: recordingServers(log)})
	c.createTopic("cas", 1, 3) // leader 0, ISR [0 1 2], partition epoch 0
	p := tp("cas", 0)
	store.mu.Lock()
	require.Equal(t, 1, store.creates)
	store.mu.Unlock()
	log.reset()

	store.race(1, []int32{0, 1}) // broker 2 fell behind: epoch 0 -> 1
	c.elect(p, 1)
	require.Equal(t, []storeWrite{
		{Expected: 0, Got: -1, Leader: 1, ISR: []int32{0, 1, 2}},
		{Expected: 1, Got: 2, Leader: 1, ISR: []int32{0, 1}},
	}, store.writes(), "refused once, then written on the ISR the leader wrote")

	st, _ := c.Controller.State(p)
	require.Equal(t, cluster.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 1, LeaderEpoch: 1, ISR: []int32{0, 1}, PartitionEpoch: 2}, st)
	for _, api := range []string{"LeaderAndIsr", "UpdateMetadata"} {
		want := []told{}
		for id := range int32(3) {
			want = append(want, told{api, id, p, 1, 1, []int32{0, 1}, 2})
		}
		require.Equal(t, want, log.take(api), "every broker hears the epoch Update returned")
	}
}

// A store whose every write conflicts makes the controller give up, with an
// error, instead of spinning; nothing is sent.
func TestControllerGivesUpWhenEveryWriteConflicts(t *testing.T) {
	store, log := newRacingStore(), &requestLog{}
	c := startClusterWith(t, 3, cluster.Options{States: store, NewServer: recordingServers(log)})
	c.createTopic("busy", 1, 3)
	p := tp("busy", 0)
	log.reset()

	store.race(1_000_000, []int32{0, 1})
	err := c.Controller.ElectLeader(p, 1)
	require.ErrorIs(t, err, cluster.ErrBadVersion)
	writes := store.writes()
	require.Greater(t, len(writes), 1, "it loaded and tried again")
	require.Less(t, len(writes), 100, "a bounded number of times")
	for _, w := range writes {
		require.Equal(t, int32(-1), w.Got)
	}
	require.Empty(t, log.take("LeaderAndIsr"))
	st, _ := c.Controller.State(p)
	require.Equal(t, []int32{0, 0}, []int32{st.Leader, st.LeaderEpoch}, "no leader change")
}

// A leader wrote a new ISR to the store; the controller, told so (in Kafka
// by an ISR change notification), loads it and sends UpdateMetadata alone:
// every broker's metadata, and so every client's, shows the new ISR.
func TestUpdateMetadataTellsEveryBrokerTheISRALeaderWrote(t *testing.T) {
	store, log := newRacingStore(), &requestLog{}
	c := startClusterWith(t, 3, cluster.Options{States: store, NewServer: recordingServers(log)})
	c.createTopic("shrunk", 1, 3)
	p := tp("shrunk", 0)
	log.reset()

	epoch, err := store.leaderWrites(p, []int32{0, 1})
	require.NoError(t, err)
	require.Equal(t, int32(1), epoch)
	st, _ := c.Controller.State(p)
	require.Equal(t, []int32{0, 1, 2}, st.ISR, "the controller has not read it yet")

	require.NoError(t, c.Controller.UpdateMetadata(p))
	st, _ = c.Controller.State(p)
	require.Equal(t, []int32{0, 1}, st.ISR)
	require.Equal(t, int32(1), st.PartitionEpoch)
	require.Empty(t, store.writes(), "the controller only read")
	require.Equal(t, []told{
		{"UpdateMetadata", 0, p, 0, 0, []int32{0, 1}, 1},
		{"UpdateMetadata", 1, p, 0, 0, []int32{0, 1}, 1},
		{"UpdateMetadata", 2, p, 0, 0, []int32{0, 1}, 1},
	}, log.take("UpdateMetadata"))
	require.Empty(t, log.take("LeaderAndIsr"), "no role changes")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr(p.Topic)}}
	resp, err := c.Controller.Send(ctx, 2, req) // a follower answers from its cache
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1}, resp.(*kmsg.MetadataResponse).Topics[0].Partitions[0].ISR)

	require.Error(t, c.Controller.UpdateMetadata(tp("unknown", 0)))
}
