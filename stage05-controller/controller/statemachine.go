package controller

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// build 05.C: the partition and replica state machines: the transitions Kafka allows
// tests: TestStateMachinesRefuseTransitionsKafkaForbids

// Kafka's controller keeps two state machines, with these names, and
// checks every transition against the states it may come from: a
// transition from anywhere else is a bug, logged and refused, not made.

// PartitionStateName is a partition's state in the controller.
type PartitionStateName int

const (
	NonExistentPartition PartitionStateName = iota // never created, or deleted
	NewPartition                                   // assigned, no leader yet
	OnlinePartition                                // a live leader
	OfflinePartition                               // its leader died and none could be elected
)

var partitionStateNames = [...]string{"NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition"}

func (s PartitionStateName) String() string { return partitionStateNames[s] }

// validPartitionPrevious lists where each state may be entered from
// (Kafka's PartitionState.validPreviousStates).
var validPartitionPrevious = map[PartitionStateName][]PartitionStateName{
	NewPartition:         {NonExistentPartition},
	OnlinePartition:      {NewPartition, OnlinePartition, OfflinePartition},
	OfflinePartition:     {NewPartition, OnlinePartition, OfflinePartition},
	NonExistentPartition: {OfflinePartition},
}

// ReplicaStateName is a replica's state in the controller.
type ReplicaStateName int

const (
	NonExistentReplica        ReplicaStateName = iota // not assigned, or deleted
	NewReplica                                        // assigned while being created (a new partition, a reassignment's target)
	OnlineReplica                                     // on a live broker, told its role
	OfflineReplica                                    // its broker died, or it is leaving (shutdown, reassignment, deletion)
	ReplicaDeletionStarted                            // StopReplica with delete sent
	ReplicaDeletionSuccessful                         // the broker deleted it
	ReplicaDeletionIneligible                         // could not be deleted now (its broker is down)
)

var replicaStateNames = [...]string{"NonExistentReplica", "NewReplica", "OnlineReplica", "OfflineReplica",
	"ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible"}

func (s ReplicaStateName) String() string { return replicaStateNames[s] }

// validReplicaPrevious is Kafka's ReplicaState.validPreviousStates.
var validReplicaPrevious = map[ReplicaStateName][]ReplicaStateName{
	NewReplica:                {NonExistentReplica},
	OnlineReplica:             {NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible},
	OfflineReplica:            {NewReplica, OnlineReplica, OfflineReplica, ReplicaDeletionIneligible},
	ReplicaDeletionStarted:    {OfflineReplica},
	ReplicaDeletionSuccessful: {ReplicaDeletionStarted},
	ReplicaDeletionIneligible: {OfflineReplica, ReplicaDeletionStarted},
	NonExistentReplica:        {ReplicaDeletionSuccessful},
}

// Replica names one replica: a partition on a broker.
type Replica struct {
	commitlog.TopicPartition
	Broker int32
}

func (r Replica) String() string { return fmt.Sprintf("%s@%d", r.TopicPartition, r.Broker) }

// machines holds both state machines' states. A partition or replica
// absent from its map is NonExistent.
type machines struct {
	logger     *slog.Logger
	partitions map[commitlog.TopicPartition]PartitionStateName
	replicas   map[Replica]ReplicaStateName
}

func newMachines(logger *slog.Logger) *machines {
	return &machines{logger: logger, partitions: map[commitlog.TopicPartition]PartitionStateName{}, replicas: map[Replica]ReplicaStateName{}}
}

// partition moves tp to state to; false (and an error logged) if that
// transition is not allowed from where it is.
func (m *machines) partition(tp commitlog.TopicPartition, to PartitionStateName) bool {
	return transition(m.logger, "partition", m.partitions, validPartitionPrevious, tp, to)
}

// replica moves a replica to state to, as partition does.
func (m *machines) replica(r Replica, to ReplicaStateName) bool {
	return transition(m.logger, "replica", m.replicas, validReplicaPrevious, r, to)
}

// transition is both machines' move: checked against the valid previous
// states, logged, and the zero state (NonExistent) kept as absence.
func transition[K comparable, S interface {
	comparable
	fmt.Stringer
}](logger *slog.Logger, kind string, states map[K]S, valid map[S][]S, key K, to S) bool {
	from := states[key]
	if !slices.Contains(valid[to], from) {
		logger.Error("invalid "+kind+" state transition", kind, key, "from", from, "to", to)
		return false
	}
	if from != to {
		logger.Debug(kind+" state change", kind, key, "from", from, "to", to)
	}
	var nonExistent S
	if to == nonExistent {
		delete(states, key)
	} else {
		states[key] = to
	}
	return true
}

// replicaTo moves a replica to state to through the states Kafka's
// machine would pass on the way, when the direct move is not allowed:
// NonExistent to Online goes through New; Online to deletion goes
// through Offline.
func (m *machines) replicaTo(r Replica, to ReplicaStateName) {
	from := m.replicas[r]
	switch {
	case from == to && to != OnlineReplica && to != OfflineReplica:
		return
	case from == NonExistentReplica && (to == OnlineReplica || to == OfflineReplica):
		m.replica(r, NewReplica)
	case to == ReplicaDeletionStarted && from != OfflineReplica,
		to == ReplicaDeletionIneligible && from != OfflineReplica && from != ReplicaDeletionStarted:
		m.replica(r, OfflineReplica)
	}
	m.replica(r, to)
}

// partitionTo moves a partition to state to, through NewPartition when it
// does not exist yet and through OfflinePartition when it is deleted.
func (m *machines) partitionTo(tp commitlog.TopicPartition, to PartitionStateName) {
	from := m.partitions[tp]
	switch {
	case from == NonExistentPartition && to != NewPartition && to != NonExistentPartition:
		m.partition(tp, NewPartition)
	case to == NonExistentPartition && from == NonExistentPartition:
		return
	case to == NonExistentPartition && from != OfflinePartition:
		m.partition(tp, OfflinePartition)
	}
	m.partition(tp, to)
}

// forgetTopic drops every state of a topic's partitions and replicas.
func (m *machines) forgetTopic(topic string) {
	for tp := range m.partitions {
		if tp.Topic == topic {
			delete(m.partitions, tp)
		}
	}
	for r := range m.replicas {
		if r.Topic == topic {
			delete(m.replicas, r)
		}
	}
}

// StateMachines returns a copy of the state machines' states, while this
// broker is the controller (for tests, tools and the demo).
func (c *Controller) StateMachines() (map[commitlog.TopicPartition]PartitionStateName, map[Replica]ReplicaStateName, error) {
	type snapshot struct {
		partitions map[commitlog.TopicPartition]PartitionStateName
		replicas   map[Replica]ReplicaStateName
	}
	out := make(chan *snapshot, 1)
	c.queue.put(event{"StateMachines", func(c *Controller) {
		if c.state == nil {
			out <- nil
			return
		}
		m := c.state.machines
		out <- &snapshot{maps.Clone(m.partitions), maps.Clone(m.replicas)}
	}})
	select {
	case s := <-out:
		if s == nil {
			return nil, nil, ErrNotController
		}
		return s.partitions, s.replicas, nil
	case <-c.stopped:
		return nil, nil, ErrNotController
	}
}

// end build
