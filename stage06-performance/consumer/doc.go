// Package consumer is a Kafka consumer client built for seed §2.3.1,
// lock-free offset management: the offsets of every assigned partition
// are atomics, read and moved by several goroutines without a mutex.
//
// Why this is the §2.3.1 point in Go. Kafka's KafkaConsumer is
// single-threaded by contract: poll, commit, seek and the rebalance
// callbacks all run on the application's thread (a second thread gets a
// ConcurrentModificationException). Its SubscriptionState does guard the
// positions with a lock (its methods are synchronized, for the background
// heartbeat thread), but one that is almost never contended: only the
// application's thread moves positions. A Go consumer is shared by
// goroutines: the fetchers (one per broker) run ahead of the application,
// the committer commits in the background, the group's heartbeat
// goroutine revokes and assigns partitions, and the application may Poll
// on one goroutine while it commits on another. A mutex over the offsets
// would put all of them in one queue on the hot path. Instead:
//
//	                    Consumer.assigned: atomic.Pointer[assignment]
//	                    (immutable map; a change swaps in a new one)
//	                                │
//	       ┌────────────────────────┼─────────────────────────┐
//	       ▼                        ▼                         ▼
//	partitionState t-0       partitionState t-1        partitionState t-2
//	leader        1          leader        2           leader        1
//	fetchOffset ◄─CAS─┐      fetchOffset               fetchOffset
//	position    ◄─CAS─┼─┐    position                  position
//	consumed    ◄─────┼─┼─┐  consumed                  consumed
//	committed   ◄─────┼─┼─┼─┐committed                 committed
//	highWatermark     │ │ │ │
//	                  │ │ │ │
//	fetcher(broker 1) ┘ │ │ └ committer (auto.commit.interval.ms), CommitSync
//	fetcher(broker 2)   │ └── Poll start: the previous Poll's records are consumed
//	  │                 └──── Poll: records handed out
//	  └─► fetched (chan, BufferedFetches deep) ─► Poll ─► application
//
//	member (group.id): FindCoordinator, JoinGroup, SyncGroup (range or
//	roundrobin, run by the leader), Heartbeat; on REBALANCE_IN_PROGRESS
//	commit consumed, publish an empty assignment, rejoin; OffsetFetch
//	on assignment; LeaveGroup on Close, and after max.poll.interval.ms
//	outside Poll (joining again at the next Poll).
//
// Every writer of an offset moves it with a CompareAndSwap from the value
// it started from, so a write based on a stale read fails instead of
// overwriting: a fetch response whose partition was sought, reset or
// moved to another broker's fetcher meanwhile is dropped. A seek, an
// offset reset or a rebalance never edits a partition's state; it
// publishes a new state in a new assignment (copy-on-write, swapped with
// CompareAndSwap), so whatever was fetched or buffered for the old state
// is recognized as stale by a pointer comparison.
//
// Fetching: one goroutine per broker fetches the assigned partitions that
// broker leads (fetch.min.bytes, fetch.max.wait.ms, fetch.max.bytes,
// max.partition.fetch.bytes) and queues each response for Poll without
// decoding it; it sends the next fetch at once, so a response is on its
// way while the application works through the previous one. A partition
// without a committed offset, or answered OFFSET_OUT_OF_RANGE, starts
// where auto.offset.reset says (ListOffsets); NOT_LEADER_OR_FOLLOWER and
// its kin refresh the metadata, and the partition moves to its new
// leader's fetcher.
//
// Poll decodes batches (stage 01's record package: CRC checked when
// check.crcs, decompressed into reused buffers) into at most
// max.poll.records records whose keys, values and headers alias the
// fetched bytes: no allocation per record. They are valid until the next
// Poll.
//
// Commits: consumed is what the background committer commits (the
// records of every Poll before the latest: the application asked for
// more, so it is done with them), and only forward; CommitSync,
// CommitAsync and Close commit position (everything Poll returned). A
// rebalance commits consumed before giving the partitions up; a record
// returned by the last Poll may then be read again by the partition's
// next owner: at least once. Every commit but Close's last is sent by one
// committer goroutine, in the order asked, so an older offset never
// overtakes a newer one on the wire; the offsets are read from the
// atomics when it sends.
package consumer
