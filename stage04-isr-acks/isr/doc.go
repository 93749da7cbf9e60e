// Package isr keeps the in-sync replica set of seed §1.3 on each leader, as
// Kafka does up to 2.6:
//
//	rules.go         the rules as pure functions: who is out of sync
//	                 (OutOfSync), who may rejoin (CanJoin), and the Quorum
//	                 that makes the ISR count for the high watermark
//	manager.go       Manager: shrink every replica.lag.time.max.ms / 2,
//	                 expand after follower fetches, each change written
//	                 first to a StateStore conditional on the partition
//	                 epoch, then installed, then notified
//	state.go         the state znode's JSON (Kafka's exact bytes), the ISR
//	                 change notification, the StateStore seam
//	memory_store.go  MemoryStore: the znodes in process, for this stage's
//	                 tests and demo (stage 05 puts ZooKeeper behind the seam)
package isr
