package controller

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// brokerRange returns the broker ids 0..n-1.
func brokerRange(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// kafkaTestReplicaAssignment is the expected assignment of Kafka 2.8's
// AdminRackAwareTest.testReplicaAssignment: brokers 0..4 without racks, 10
// partitions, replication factor 3, fixedStartIndex 0 (so start index 0 and
// replica shift 0).
var kafkaTestReplicaAssignment = map[int32][]int32{
	0: {0, 1, 2},
	1: {1, 2, 3},
	2: {2, 3, 4},
	3: {3, 4, 0},
	4: {4, 0, 1},
	5: {0, 2, 3},
	6: {1, 3, 4},
	7: {2, 4, 0},
	8: {3, 0, 1},
	9: {4, 1, 2},
}

func TestAssignReplicasExpected(t *testing.T) {
	tests := []struct {
		name                     string
		partitions, rf           int
		brokers                  []int32
		startIndex, replicaShift int
		want                     map[int32][]int32
	}{
		{
			// Kafka: AdminRackAwareTest.testReplicaAssignment.
			name:       "kafka testReplicaAssignment",
			partitions: 10, rf: 3, brokers: brokerRange(5),
			want: kafkaTestReplicaAssignment,
		},
		{
			// The same, with the brokers shuffled: sorted first, as Kafka's
			// AdminZkClient.getBrokerMetadatas sorts them.
			name:       "kafka testReplicaAssignment, brokers unsorted",
			partitions: 10, rf: 3, brokers: []int32{3, 0, 4, 2, 1},
			want: kafkaTestReplicaAssignment,
		},
		{
			// By hand. Sorted brokers 101..104 (n=4), start 1, shift 2.
			// Round 0 (p0..p3): the follower is 1+(2+0)%3 = 3 brokers on.
			// Round 1 (p4, p5): the shift is 3, the follower 1+3%3 = 1 on.
			name:       "4 brokers, shift wraps and grows",
			partitions: 6, rf: 2, brokers: []int32{104, 102, 101, 103},
			startIndex: 1, replicaShift: 2,
			want: map[int32][]int32{
				0: {102, 101},
				1: {103, 102},
				2: {104, 103},
				3: {101, 104},
				4: {102, 103},
				5: {103, 104},
			},
		},
		{
			// By hand. Sorted brokers 10, 20, 30 (n=3), start 2, shift 1.
			// Round 0: followers 1+(1+0)%2 = 2 and 1+(1+1)%2 = 1 on.
			// Round 1 (p3): shift 2, followers 1 and 2 on.
			name:       "3 brokers, all replicas, ids not contiguous",
			partitions: 4, rf: 3, brokers: []int32{30, 10, 20},
			startIndex: 2, replicaShift: 1,
			want: map[int32][]int32{
				0: {30, 20, 10},
				1: {10, 30, 20},
				2: {20, 10, 30},
				3: {30, 10, 20},
			},
		},
		{
			// By hand: replication factor = brokers, shift 0.
			name:       "rf equals brokers",
			partitions: 3, rf: 3, brokers: brokerRange(3),
			want: map[int32][]int32{
				0: {0, 1, 2},
				1: {1, 2, 0},
				2: {2, 0, 1},
			},
		},
		{
			// By hand: one broker holds everything; start and shift are
			// irrelevant (and no follower means no mod 0).
			name:       "single broker",
			partitions: 3, rf: 1, brokers: []int32{7},
			startIndex: 5, replicaShift: 9,
			want: map[int32][]int32{0: {7}, 1: {7}, 2: {7}},
		},
		{
			// By hand: start index beyond the broker count wraps around.
			name:       "start index wraps",
			partitions: 2, rf: 2, brokers: brokerRange(3),
			startIndex: 4, replicaShift: 0,
			want: map[int32][]int32{0: {1, 2}, 1: {2, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.brokers)
			got, err := AssignReplicas(tt.partitions, tt.rf, in, tt.startIndex, tt.replicaShift)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.brokers, in, "the brokers slice is not changed")
		})
	}
}

// TestAssignReplicasKafkaDocTable reproduces the worked example of the doc
// comment of Kafka 2.8's AdminUtils.assignReplicasToBrokers: 5 brokers, 10
// partitions, replication factor 3, start index 0 and shift 0. The table
// reads per broker: row r, column b holds the partition that has replica
// number r/2 (0 = first) on broker b.
func TestAssignReplicasKafkaDocTable(t *testing.T) {
	table := [6][5]int32{
		{0, 1, 2, 3, 4}, // 1st replica
		{5, 6, 7, 8, 9}, // 1st replica
		{4, 0, 1, 2, 3}, // 2nd replica
		{8, 9, 5, 6, 7}, // 2nd replica
		{3, 4, 0, 1, 2}, // 3rd replica
		{7, 8, 9, 5, 6}, // 3rd replica
	}
	got, err := AssignReplicas(10, 3, brokerRange(5), 0, 0)
	require.NoError(t, err)
	require.Len(t, got, 10)
	for row, cols := range table {
		for broker, p := range cols {
			require.Equal(t, int32(broker), got[p][row/2], "partition %d replica %d", p, row/2)
		}
	}
	require.Equal(t, kafkaTestReplicaAssignment, got)
}

func TestAssignReplicasErrors(t *testing.T) {
	tests := []struct {
		name                     string
		partitions, rf           int
		brokers                  []int32
		startIndex, replicaShift int
		is                       error  // the sentinel wrapped, nil for none
		contains                 string // in the message
	}{
		{name: "no partitions", partitions: 0, rf: 1, brokers: brokerRange(3),
			is: ErrInvalidPartitions, contains: "number of partitions must be larger than 0"},
		{name: "negative partitions", partitions: -1, rf: 1, brokers: brokerRange(3),
			is: ErrInvalidPartitions, contains: "number of partitions must be larger than 0"},
		{name: "partitions checked before replication factor", partitions: 0, rf: 0, brokers: nil,
			is: ErrInvalidPartitions, contains: "number of partitions"},
		// Kafka: AdminRackAwareTest.testReplicaAssignment, "test 0 replication factor".
		{name: "zero replication factor", partitions: 10, rf: 0, brokers: brokerRange(5),
			is: ErrInvalidReplicationFactor, contains: "replication factor must be larger than 0"},
		{name: "negative replication factor", partitions: 10, rf: -3, brokers: brokerRange(5),
			is: ErrInvalidReplicationFactor, contains: "replication factor must be larger than 0"},
		// Kafka: AdminRackAwareTest.testReplicaAssignment, "test wrong replication factor".
		{name: "replication factor above brokers", partitions: 10, rf: 6, brokers: brokerRange(5),
			is: ErrInvalidReplicationFactor, contains: "replication factor: 6 larger than available brokers: 5"},
		{name: "no brokers", partitions: 1, rf: 1, brokers: nil,
			is: ErrInvalidReplicationFactor, contains: "larger than available brokers: 0"},
		{name: "negative start index", partitions: 1, rf: 1, brokers: brokerRange(3), startIndex: -1,
			contains: "must not be negative"},
		{name: "negative replica shift", partitions: 1, rf: 1, brokers: brokerRange(3), replicaShift: -1,
			contains: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AssignReplicas(tt.partitions, tt.rf, tt.brokers, tt.startIndex, tt.replicaShift)
			require.Error(t, err)
			require.Nil(t, got)
			require.ErrorContains(t, err, tt.contains)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			} else {
				require.NotErrorIs(t, err, ErrInvalidPartitions)
				require.NotErrorIs(t, err, ErrInvalidReplicationFactor)
			}
			if tt.startIndex == 0 && tt.replicaShift == 0 {
				// The random variant refuses the same, without panicking on
				// no brokers.
				got, err := AssignReplicasRandomly(tt.partitions, tt.rf, tt.brokers)
				require.Nil(t, got)
				require.ErrorIs(t, err, tt.is)
				require.ErrorContains(t, err, tt.contains)
			}
		})
	}
}

// counts returns, for every broker, how many partitions it leads and how
// many replicas (all positions) it holds.
func counts(assignment map[int32][]int32, brokers []int32) (leaders, replicas map[int32]int) {
	leaders, replicas = map[int32]int{}, map[int32]int{}
	for _, b := range brokers {
		leaders[b], replicas[b] = 0, 0
	}
	for _, rs := range assignment {
		leaders[rs[0]]++
		for _, b := range rs {
			replicas[b]++
		}
	}
	return leaders, replicas
}

func spread(c map[int32]int) int {
	lo, hi := -1, -1
	for _, v := range c {
		if lo < 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return hi - lo
}

// TestAssignReplicasProperties checks, over random inputs, what Kafka's
// assignment guarantees: every partition gets replicationFactor distinct
// brokers among those given; the leaders go round-robin, so their counts
// differ by at most 1; and in every full round of len(brokers) partitions
// each replica position is a permutation of the brokers, so when partitions
// is a multiple of len(brokers) every broker holds exactly
// partitions*replicationFactor/len(brokers) replicas. A partial last round
// guarantees no such spread (TestAssignReplicasUnevenPartialRound).
func TestAssignReplicasProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range 2000 {
		n := 1 + rng.IntN(12)
		brokers := make([]int32, 0, n)
		for _, id := range rng.Perm(100)[:n] {
			brokers = append(brokers, int32(id))
		}
		partitions := 1 + rng.IntN(60)
		if i%2 == 0 {
			partitions = n * (1 + rng.IntN(5)) // full rounds only
		}
		rf := 1 + rng.IntN(n)
		start, shift := rng.IntN(3*n), rng.IntN(3*n)
		name := fmt.Sprintf("brokers=%v partitions=%d rf=%d start=%d shift=%d", brokers, partitions, rf, start, shift)

		got, err := AssignReplicas(partitions, rf, brokers, start, shift)
		require.NoError(t, err, name)
		require.Len(t, got, partitions, name)
		for p := range partitions {
			rs, ok := got[int32(p)]
			require.True(t, ok, "%s: partition %d missing", name, p)
			require.Len(t, rs, rf, name)
			for j, b := range rs {
				require.Contains(t, brokers, b, name)
				require.NotContains(t, rs[j+1:], b, "%s: partition %d has broker %d twice", name, p, b)
			}
		}

		leaders, replicas := counts(got, brokers)
		require.LessOrEqual(t, spread(leaders), 1, "%s: leaders %v", name, leaders)
		if partitions%n == 0 {
			for b, c := range replicas {
				require.Equal(t, partitions*rf/n, c, "%s: broker %d replicas %v", name, b, replicas)
			}
			for round := 0; round < partitions; round += n {
				for pos := range rf {
					seen := map[int32]bool{}
					for p := round; p < round+n; p++ {
						seen[got[int32(p)][pos]] = true
					}
					require.Len(t, seen, n, "%s: round at %d, position %d is not a permutation", name, round, pos)
				}
			}
		}

		// Only start mod n and shift mod n-1 matter.
		period := max(n-1, 1)
		same, err := AssignReplicas(partitions, rf, brokers, start+n*(1+rng.IntN(1000)), shift+period*(1+rng.IntN(1000)))
		require.NoError(t, err, name)
		require.Equal(t, got, same, name)
	}
}

// TestAssignReplicasUnevenPartialRound pins that Kafka promises no even
// replica spread when the last round is partial, even when
// partitions*replicationFactor is a multiple of the brokers.
func TestAssignReplicasUnevenPartialRound(t *testing.T) {
	got, err := AssignReplicas(2, 2, brokerRange(4), 0, 0)
	require.NoError(t, err)
	require.Equal(t, map[int32][]int32{0: {0, 1}, 1: {1, 2}}, got)
	_, replicas := counts(got, brokerRange(4))
	require.Equal(t, map[int32]int{0: 1, 1: 2, 2: 1, 3: 0}, replicas)
}

func TestAssignReplicasRandomly(t *testing.T) {
	brokers := []int32{14, 11, 13, 10, 12}
	in := slices.Clone(brokers)
	n := len(brokers)
	leaders := map[int32]bool{}
	distances := map[int]bool{}
	for range 300 {
		got, err := AssignReplicasRandomly(7, 3, in)
		require.NoError(t, err)
		require.Equal(t, brokers, in, "the brokers slice is not changed")

		// It is AssignReplicas for some start and shift in [0, n).
		found := false
		for s := 0; s < n && !found; s++ {
			for h := 0; h < n && !found; h++ {
				want, err := AssignReplicas(7, 3, in, s, h)
				require.NoError(t, err)
				found = maps.EqualFunc(want, got, slices.Equal[[]int32])
			}
		}
		require.True(t, found, "%v is no fixed assignment", got)

		leaders[got[0][0]] = true
		distances[int((got[0][1]-got[0][0])+int32(n))%n] = true // ids 10..14 are their own sorted index + 10
	}
	require.Len(t, leaders, n, "the start index is drawn over all brokers")
	require.Len(t, distances, n-1, "the replica shift is drawn over all distances")
}

// TestAssignNewPartitionsContinuesTheTopicsRounds: new partitions go
// where the same assignment would have put them had the topic been
// created with all of them, when it was created with the start index and
// the replica shift equal (Kafka's fixedStartIndex): the continuation
// starts at partition 0's first replica, takes it for both, and counts
// rounds from the first new partition on.
func TestAssignNewPartitionsContinuesTheTopicsRounds(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		brokers := brokerRange(n)
		for start := range n {
			for existing := 1; existing <= 2*n; existing++ {
				rf := min(n, 3)
				whole, err := AssignReplicas(existing+n+1, rf, brokers, start, start)
				require.NoError(t, err)
				// A round boundary inside the existing partitions bumps the
				// shift of the whole assignment, not of the continuation,
				// which counts only the rounds it crosses (Kafka's too).
				if existing >= n && n > 1 {
					continue
				}
				added, err := AssignNewPartitions(existing, n+1, rf, brokers, whole[0][0])
				require.NoError(t, err)
				for p := existing; p < existing+n+1; p++ {
					require.Equal(t, whole[int32(p)], added[int32(p)], "brokers %d, start %d, existing %d, partition %d", n, start, existing, p)
				}
				require.Len(t, added, n+1)
			}
		}
	}
	// 3 -> 6 on brokers 0..2, partition 0 led by broker 1: the new
	// partitions' first replicas go on round-robin from broker 1.
	added, err := AssignNewPartitions(3, 3, 2, []int32{2, 0, 1}, 1)
	require.NoError(t, err)
	require.Equal(t, map[int32][]int32{3: {1, 2}, 4: {2, 0}, 5: {0, 1}}, added)
	_, err = AssignNewPartitions(3, 1, 4, brokerRange(3), 0)
	require.ErrorIs(t, err, ErrInvalidReplicationFactor)
}
