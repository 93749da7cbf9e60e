package consumer

import (
	"slices"
)

// build 06.G: the partition assignors: range and round-robin, as Kafka splits
// tests: TestAssignorsSplitLikeKafkas

// An assignor is a partition.assignment.strategy: the group leader runs
// it, client side, on every member's subscription (the coordinator only
// relays the result, which is why a group's members must share one).
type assignor struct {
	name   string // the protocol name in JoinGroup, as Kafka's assignors call themselves
	assign func(subs map[string][]string, partitions map[string]int32) map[string][]TopicPartition
}

var assignors = []assignor{
	{"range", rangeAssign},
	{"roundrobin", roundRobinAssign},
}

// assignorNamed accepts the short names and Kafka's class names.
func assignorNamed(name string) *assignor {
	switch name {
	case "org.apache.kafka.clients.consumer.RangeAssignor":
		name = "range"
	case "org.apache.kafka.clients.consumer.RoundRobinAssignor":
		name = "roundrobin"
	}
	for i := range assignors {
		if assignors[i].name == name {
			return &assignors[i]
		}
	}
	return nil
}

// rangeAssign is Kafka's RangeAssignor: topic by topic, the members
// subscribed to it, sorted by member id, take consecutive ranges of its
// partitions; the first (partitions mod members) take one more. Two
// topics with the same partition count are split the same way, which
// co-partitioned joins rely on.
func rangeAssign(subs map[string][]string, partitions map[string]int32) map[string][]TopicPartition {
	out := map[string][]TopicPartition{}
	byTopic := map[string][]string{}
	for member, topics := range subs {
		out[member] = nil
		for _, t := range topics {
			byTopic[t] = append(byTopic[t], member)
		}
	}
	for _, topic := range sortedKeys(byTopic) {
		members := byTopic[topic]
		slices.Sort(members)
		n := partitions[topic]
		per, extra := n/int32(len(members)), n%int32(len(members))
		next := int32(0)
		for i, m := range members {
			take := per
			if int32(i) < extra {
				take++
			}
			for p := next; p < next+take; p++ {
				out[m] = append(out[m], TopicPartition{topic, p})
			}
			next += take
		}
	}
	return out
}

// roundRobinAssign is Kafka's RoundRobinAssignor: every partition of
// every topic, sorted, dealt to the members in turn (sorted by id),
// skipping a member not subscribed to the partition's topic.
func roundRobinAssign(subs map[string][]string, partitions map[string]int32) map[string][]TopicPartition {
	out := map[string][]TopicPartition{}
	members := sortedKeys(subs)
	topics := map[string]bool{}
	for _, m := range members {
		out[m] = nil
		for _, t := range subs[m] {
			topics[t] = true
		}
	}
	i := 0
	for _, topic := range sortedKeys(topics) {
		for p := range partitions[topic] {
			for { // the next member subscribed to topic; one exists
				m := members[i%len(members)]
				i++
				if slices.Contains(subs[m], topic) {
					out[m] = append(out[m], TopicPartition{topic, p})
					break
				}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// end build
