// Package server assembles the stage 03 broker: the stage 02 broker (its
// network layer, store and API table) with replication (package replica).
//
// It replaces stage 02's handlers where replication changes the answer, and
// adds the controller's requests:
//
//	00_produce.go               leaders only; acks=all waits for the high watermark
//	01_fetch.go                 a replica-aware FetchSource: followers read to the
//	                            log end and report their offsets, consumers read
//	                            below the high watermark
//	02_list_offsets.go          leaders only; "latest" is the high watermark
//	03_metadata.go              answered from the controller's UpdateMetadata
//	04_leader_and_isr.go        the controller makes this broker leader or follower
//	05_stop_replica.go          ... or stops (and deletes) a replica
//	06_update_metadata.go       ... and tells it about every partition and broker
//	23_offset_for_leader_epoch.go  where an epoch ends: followers truncate by it
//
// CreateTopics and DeleteTopics are gone: in a cluster the controller
// creates topics (stage 05). Until then a test harness or cmd/cluster plays
// the controller with exactly the requests stage 05's controller will send.
package server
