// Package txn is Kafka's transaction coordinator (TransactionCoordinator
// and TransactionStateManager, KIP-98): the broker side of a producer's
// transactions, beside the group coordinator.
//
// A transactional producer names itself with a transactional.id. Its
// coordinator is the broker leading partition
// abs(hashCode(transactional.id)) % transaction.state.log.num.partitions
// of the internal topic __transaction_state (PartitionFor), found with
// FindCoordinator key type 1. Then:
//
//	InitProducerId    the id's producer id and a new epoch: an older
//	                  producer of the same id (a zombie) is fenced, and
//	                  a transaction it left open is aborted first
//	AddPartitionsToTxn
//	                  before its first record to a partition, the
//	                  producer says the partition is in the transaction
//	AddOffsetsToTxn   the group's partition of __consumer_offsets joins
//	                  too; the offsets themselves go to the group
//	                  coordinator (TxnOffsetCommit)
//	EndTxn            commit or abort: the coordinator writes its
//	                  decision (PrepareCommit, PrepareAbort), answers,
//	                  and then has every partition's leader write a
//	                  marker (WriteTxnMarkers, stage 04); once all have,
//	                  it writes CompleteCommit or CompleteAbort
//
// Each transactional id's state is a record in __transaction_state with
// Kafka's key and value schemas (records.go), written with acks=all by
// the partition's leader, so that a new leader reads it back
// (Coordinator.Elected) and finishes what the old one decided: a
// transaction found in PrepareCommit has its markers sent again. The
// coordinator epoch, which markers carry so that partitions refuse an
// older coordinator's, is the leader epoch of the __transaction_state
// partition.
//
//	          AddPartitions        EndTxn(commit)       markers written
//	Empty ───────────────▶ Ongoing ─────────────▶ PrepareCommit ───────▶ CompleteCommit
//	  ▲                      │ EndTxn(abort), timeout, fencing            │
//	  │                      ▼                                            │
//	  │                  PrepareAbort ──────────────────────▶ CompleteAbort
//	  └───────────── InitProducerId (epoch + 1) ◀─────────────────────────┘
//
// A transaction open for longer than its timeout is aborted by the
// coordinator, with the producer's epoch bumped so that the producer,
// if it is still alive, is fenced (Kafka's abortTimedOutTransactions).
//
// Locks: one mutex, Coordinator.mu, guards the partitions owned and every
// transactional id's state; it is never held across a log append, a
// marker request or an answer, all of which run from callbacks on other
// goroutines.
package txn
