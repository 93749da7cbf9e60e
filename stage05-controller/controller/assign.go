package controller

// This file holds the replica assignment of a topic created, or grown,
// without an explicit one: Kafka's rack-unaware assignment
// (AdminUtils.assignReplicasToBrokersRackUnaware), so that this broker
// places the replicas where a Kafka 2.8 broker would.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// build 05.D: replica assignment without racks, as a Kafka 2.8 broker places replicas
// tests: TestAssignReplicasExpected, TestAssignReplicasKafkaDocTable, TestAssignReplicasErrors, TestAssignReplicasProperties, TestAssignReplicasUnevenPartialRound, TestAssignNewPartitionsContinuesTheTopicsRounds

var (
	// ErrInvalidPartitions is the error of a partition count below 1; the
	// CreateTopics handler answers INVALID_PARTITIONS (37) for it.
	ErrInvalidPartitions = errors.New("invalid partitions")
	// ErrInvalidReplicationFactor is the error of a replication factor below
	// 1 or above the number of brokers; the CreateTopics handler answers
	// INVALID_REPLICATION_FACTOR (38) for it.
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
)

// AssignReplicas places replicationFactor replicas of each of partitions
// partitions on brokers, as Kafka's rack-unaware assignment does; the
// result maps partition 0..partitions-1 to its replicas, preferred leader
// first.
//
// The brokers (distinct ids, in any order) are sorted by id first, as
// Kafka's AdminZkClient sorts them before it assigns; the slice itself is
// not changed. The first replicas go round-robin over the sorted brokers:
// partition p's is the broker at (startIndex+p) mod len(brokers). Each
// follower is a broker further along, at a distance in 1..len(brokers)-1
// set by nextReplicaShift and the follower's position: the k-th follower
// (k = 0, 1, ...) is 1 + (nextReplicaShift+k) mod (len(brokers)-1) brokers
// after the first replica. nextReplicaShift grows by one at every full
// round of len(brokers) partitions, so that the rounds do not repeat the
// same sets of replicas. Kafka draws both at random (AssignReplicasRandomly);
// fixed values, both at least 0, give a reproducible assignment.
//
// It returns an error wrapping ErrInvalidPartitions if partitions < 1, and
// one wrapping ErrInvalidReplicationFactor if replicationFactor < 1 or
// replicationFactor > len(brokers); an error wrapping neither if startIndex
// or nextReplicaShift is negative.
func AssignReplicas(partitions, replicationFactor int, brokers []int32, startIndex, nextReplicaShift int) (map[int32][]int32, error) {
	if err := checkAssignment(partitions, replicationFactor, len(brokers)); err != nil {
		return nil, err
	}
	if startIndex < 0 || nextReplicaShift < 0 {
		return nil, fmt.Errorf("replica assignment: start index %d and replica shift %d must not be negative",
			startIndex, nextReplicaShift)
	}
	return assignRackUnaware(0, partitions, replicationFactor, brokers, startIndex, nextReplicaShift), nil
}

// AssignNewPartitions places the replicas of partitions new partitions
// of a topic that has existing ones (numbered 0..existing-1), as Kafka's
// AdminZkClient.createNewPartitionsAssignment does for a CreatePartitions
// request without an explicit assignment: the rack-unaware assignment,
// continued from partition existing, with both the start index and the
// replica shift set to the position, among the sorted brokers, of the
// first whose id is at least firstReplica (partition 0's first replica;
// position 0 if there is none). The leaders of the new partitions thus go
// on round-robin from where the topic's first partition began. The result
// maps partition existing..existing+partitions-1 to its replicas; the
// errors are AssignReplicas'.
func AssignNewPartitions(existing, partitions, replicationFactor int, brokers []int32, firstReplica int32) (map[int32][]int32, error) {
	if err := checkAssignment(partitions, replicationFactor, len(brokers)); err != nil {
		return nil, err
	}
	sorted := slices.Sorted(slices.Values(brokers))
	start := max(0, slices.IndexFunc(sorted, func(id int32) bool { return id >= firstReplica }))
	return assignRackUnaware(max(0, existing), partitions, replicationFactor, brokers, start, start), nil
}

// AssignReplicasRandomly is AssignReplicas with startIndex and
// nextReplicaShift drawn at random in [0, len(brokers)), as Kafka does when a
// topic is created without an explicit assignment (fixedStartIndex = -1,
// startPartitionId = -1).
func AssignReplicasRandomly(partitions, replicationFactor int, brokers []int32) (map[int32][]int32, error) {
	// Checked before drawing: rand.IntN panics on 0 brokers.
	if err := checkAssignment(partitions, replicationFactor, len(brokers)); err != nil {
		return nil, err
	}
	n := len(brokers)
	return assignRackUnaware(0, partitions, replicationFactor, brokers, rand.IntN(n), rand.IntN(n)), nil
}

// checkAssignment returns the error Kafka's assignReplicasToBrokers throws
// for these arguments, in its order, or nil.
func checkAssignment(partitions, replicationFactor, brokers int) error {
	switch {
	case partitions <= 0:
		return fmt.Errorf("%w: number of partitions must be larger than 0, got %d", ErrInvalidPartitions, partitions)
	case replicationFactor <= 0:
		return fmt.Errorf("%w: replication factor must be larger than 0, got %d", ErrInvalidReplicationFactor, replicationFactor)
	case replicationFactor > brokers:
		return fmt.Errorf("%w: replication factor: %d larger than available brokers: %d",
			ErrInvalidReplicationFactor, replicationFactor, brokers)
	}
	return nil
}

// assignRackUnaware is the assignment of AssignReplicas, on checked
// arguments: partitions >= 1, 1 <= replicationFactor <= len(brokers),
// startIndex and nextReplicaShift >= 0, for the partitions numbered from
// firstPartition >= 0 (0 for a new topic; the existing count for
// AssignNewPartitions).
func assignRackUnaware(firstPartition, partitions, replicationFactor int, brokers []int32, startIndex, nextReplicaShift int) map[int32][]int32 {
	sorted := slices.Clone(brokers)
	slices.Sort(sorted)
	n := len(sorted)

	// Only startIndex mod n and the shift mod n-1 matter; reducing them
	// first keeps the sums below from overflowing on huge arguments.
	startIndex %= n
	if n > 1 {
		nextReplicaShift %= n - 1
	}

	out := make(map[int32][]int32, partitions)
	for p := firstPartition; p < firstPartition+partitions; p++ {
		if p > 0 && p%n == 0 {
			nextReplicaShift++ // a new round
		}
		first := (p + startIndex) % n
		replicas := make([]int32, 0, replicationFactor)
		replicas = append(replicas, sorted[first])
		// n == 1 implies replicationFactor == 1: no follower, no mod 0.
		for k := range replicationFactor - 1 {
			distance := 1 + (nextReplicaShift+k)%(n-1)
			replicas = append(replicas, sorted[(first+distance)%n])
		}
		out[int32(p)] = replicas
	}
	return out
}

// end build
