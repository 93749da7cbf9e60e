// Package isr keeps the in-sync replica set of seed §1.3 on each leader, as
// Kafka does up to 2.6, with the writes off the fetch path as from 2.7:
//
//	rules.go         the rules as pure functions: who is out of sync
//	                 (OutOfSync), who may rejoin (CanJoin), and the Quorum
//	                 that makes the ISR count for the high watermark
//	manager.go       Manager: shrink every replica.lag.time.max.ms / 2,
//	                 expand after follower fetches; each change queued, at
//	                 most one a partition
//	writer.go        the writer: each change written first to a StateStore
//	                 conditional on the partition epoch, then installed
//	notify.go        the controller told of the changes in batches
//	                 (IsrChangePropagationConfig, Kafka's 2.5 s / 5 s / 60 s)
//	state.go         the state znode's JSON (Kafka's exact bytes), the ISR
//	                 change notification, the StateStore seam
//	memory_store.go  MemoryStore: the znodes in process, for this stage's
//	                 tests and demo (stage 05 puts ZooKeeper behind the seam)
package isr
