// Package group is Kafka's group coordinator (GroupCoordinator and
// GroupMetadataManager): the third election of seed §1.1, the one that
// picks which consumer of a group reads which partition.
//
// A group's coordinator is the broker leading partition
// abs(hashCode(group id)) % offsets.topic.num.partitions of the internal
// topic __consumer_offsets (PartitionFor). Consumers find it with
// FindCoordinator, then:
//
//	JoinGroup   every member sends its protocols (assignors) and their
//	            metadata (the topics it subscribes to); the coordinator
//	            waits until every known member has joined, or the
//	            rebalance timeout, then answers all of them at once with
//	            a new generation. The group leader (the first member to
//	            join, as long as it keeps rejoining) alone gets the member
//	            list.
//	SyncGroup   the leader sends the assignment it computed; every
//	            member gets its own part back.
//	Heartbeat   members prove they are alive within session.timeout.ms,
//	            and learn that a rebalance began (REBALANCE_IN_PROGRESS).
//	LeaveGroup  a member leaves at once instead of timing out.
//	OffsetCommit / OffsetFetch
//	            where each partition's consumption got to.
//
// Group metadata and offset commits are records in __consumer_offsets
// with Kafka's key and value schemas (records.go), appended with acks=all
// by the partition's leader, so a new leader rebuilds every group by
// reading the partition (Coordinator.Elected) and the topic, compacted,
// keeps the latest record per key.
//
// Timeouts wait in stage 04's purgatory: a DelayedJoin per rebalance
// (keyed by group), a DelayedHeartbeat per member (keyed by group and
// member). Their callbacks take the group's lock, so this package never
// calls the purgatory while holding a group's lock: group.later queues the
// call, and unlock runs it. The caller's code runs the same way: a
// request's respond callback and the Writer's Append are called with no
// group's lock (nor the Coordinator's) held, so either may call the
// coordinator again.
//
// Locks: Coordinator.mu (the partitions owned and the map of groups) is
// held for map operations only; each Group's mu guards the group and is
// never held across an append, an answer or a purgatory call. A purgatory
// operation's lock may be held when a group's is taken (TryComplete), and
// a group's when the Coordinator's is (a group that dies leaves the map);
// never the other way round.
package group
