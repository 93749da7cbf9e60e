package cluster

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// ErrBadVersion is what MemoryStateStore.Update returns when a partition's
// state was written since the writer loaded it: its partition epoch is no
// longer the one the writer expected (ZooKeeper's BADVERSION).
var ErrBadVersion = errors.New("cluster: partition state changed since it was loaded (bad version)")

// StateStore is where the controller keeps partition states: the state
// znodes /brokers/topics/<t>/partitions/<p>/state from stage 05, whose
// version is the partition epoch. In stage 03 the controller is the only
// writer and the default, MemoryStateStore, is a map. In stage 04 the
// partitions' leaders write their ISR changes to the same store, as Kafka's
// leaders write the state znode (up to 2.6), so the controller loads a
// state before every decision about it and writes on condition that nobody
// wrote meanwhile.
//
// The controller calls a StateStore from its one event at a time (see
// Controller), holding none of its locks. A StateStore must not call the
// Controller: a watcher that reacts to a write hands the work to another
// goroutine, as a ZooKeeper watch puts an event on Kafka's controller queue.
type StateStore interface {
	// Create records a new partition's first state and returns its
	// partition epoch (0, as a new znode's version).
	Create(tp commitlog.TopicPartition, s PartitionState, controllerEpoch int32) (int32, error)
	// Load refreshes s's Leader, LeaderEpoch, ISR and PartitionEpoch from
	// the store (Replicas stay the controller's).
	Load(tp commitlog.TopicPartition, s *PartitionState) error
	// Update writes s if tp's stored partition epoch is still
	// s.PartitionEpoch and returns the new epoch; an error otherwise
	// (someone else wrote meanwhile).
	Update(tp commitlog.TopicPartition, s PartitionState, controllerEpoch int32) (int32, error)
}

// MemoryStateStore is the StateStore of a cluster whose Options.States is
// nil: partition states in a map, each write bumping the partition epoch by
// one, as each write of a znode bumps its version. It is safe for
// concurrent use.
type MemoryStateStore struct {
	mu     sync.Mutex
	states map[commitlog.TopicPartition]PartitionState // Protected by mu.
}

// NewMemoryStateStore returns an empty store.
func NewMemoryStateStore() *MemoryStateStore {
	return &MemoryStateStore{states: map[commitlog.TopicPartition]PartitionState{}}
}

// Create records tp's first state at partition epoch 0; tp must be new.
func (m *MemoryStateStore) Create(tp commitlog.TopicPartition, s PartitionState, _ int32) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.states[tp]; ok {
		return 0, fmt.Errorf("cluster: state of %s exists", tp)
	}
	s.PartitionEpoch = 0
	m.states[tp] = cloneState(s)
	return 0, nil
}

// Load copies tp's stored leader, leader epoch, ISR and partition epoch
// into s.
func (m *MemoryStateStore) Load(tp commitlog.TopicPartition, s *PartitionState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.states[tp]
	if !ok {
		return fmt.Errorf("cluster: no state of %s", tp)
	}
	s.Leader, s.LeaderEpoch, s.ISR, s.PartitionEpoch = cur.Leader, cur.LeaderEpoch, slices.Clone(cur.ISR), cur.PartitionEpoch
	return nil
}

// Update writes s if tp's partition epoch is still s.PartitionEpoch, and
// returns the next epoch; ErrBadVersion if it moved.
func (m *MemoryStateStore) Update(tp commitlog.TopicPartition, s PartitionState, _ int32) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.states[tp]
	if !ok {
		return 0, fmt.Errorf("cluster: no state of %s", tp)
	}
	if cur.PartitionEpoch != s.PartitionEpoch {
		return 0, fmt.Errorf("%w: %s is at partition epoch %d, not %d", ErrBadVersion, tp, cur.PartitionEpoch, s.PartitionEpoch)
	}
	s.PartitionEpoch++
	m.states[tp] = cloneState(s)
	return s.PartitionEpoch, nil
}

// cloneState copies s with slices of its own.
func cloneState(s PartitionState) PartitionState {
	s.Replicas, s.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	return s
}
