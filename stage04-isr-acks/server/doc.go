// Package server assembles the stage 04 broker: stage 03's replicating
// broker (package server there) with the ISR and acks of seed §1.3-§1.4.
//
//	server.go      the stage 03 server with isr.Quorum (the ISR counts for
//	               the high watermark), the ISR manager, the three
//	               purgatories, and the listener that ties them to the
//	               partitions' changes
//	config.go      replica.lag.time.max.ms, min.insync.replicas (broker
//	               default and per topic), unclean.leader.election.enable
//	00_produce.go  acks 0 / 1 / all and min.insync.replicas;
//	               DelayedProduce
//	01_fetch.go    DelayedFetch: stage 02's Fetch handler parks its waiting
//	               fetches in the fetch purgatory
//	21_delete_records.go  DeleteRecords; DelayedDeleteRecords waits for
//	               every replica's log start offset (the low watermark)
//
// Nothing here copies a lower stage's handler: Produce is stage 02's
// handler over stage 03's ReplicaAppender.AppendPartition, Fetch stage 02's
// handler over stage 03's ReplicaSource, each with this stage's wait.
package server
