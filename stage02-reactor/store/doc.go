// Package store is a broker's partition store: the partitions whose logs
// one log directory holds, over the stage 01 log, and what Kafka keeps
// beside them there. It knows nothing of the network or of requests: stage
// 02's broker serves it, and stage 03's replica package builds replicas on
// its partitions.
//
//	Store        partitions by topic and number, each a Partition:
//	  |            a commitlog.Log and a Signal raised after every append
//	  |          an index by topic, so a Metadata request costs what it names
//	  v
//	log.dirs     <topic>-<partition>/   the logs, one commitlog.Manager (chapter 1)
//	               partition.metadata   the topic's id (KIP-516), beside the segments
//	             meta.properties        which broker and cluster the directory belongs to
//	             topic-configs.json     each topic's own configs
//	             .creating~<topic>      a creation under way; one found at start is undone
//
// A single broker holds every partition of every topic; from stage 03 a
// broker holds the replicas it is assigned (CreatePartition,
// DeletePartition). Creating a topic is all or nothing and takes the
// store's lock only to reserve the name and the partitions and to publish
// them, so other requests are served while its files are made. No file is
// written under that lock at all: topic configs and topic ids have writer
// locks of their own (configsMu, assignMu), so a lookup, which every
// Produce and Fetch makes, never waits for the disk. A store
// holds at most Options.MaxPartitions, by default what the machine's
// open-file limit allows (DefaultMaxPartitions).
// Retention runs in the logs' Manager; Options.RetentionLimit keeps it
// below an offset of each partition (a replicating broker's high
// watermark).
//
// What the store and its logs report to clients, they report as Kafka's
// error codes (errors.go): Lookup for a partition it cannot serve,
// AppendErrorCode for a failed append, CheckLeaderEpoch for a client's
// leader epoch.
//
// # Files, in reading order
//
//	store.go             Store, Open, Options: lookups, partitions, deletion
//	partition.go         Partition: a log and its append signal
//	signal.go            Signal: wake-ups for long polls and waiting producers
//	topic_creation.go    CreateTopic: all or nothing, the creation marker
//	partition_budget.go  DefaultMaxPartitions, and how the open-file limit is shared
//	topic_configs.go     topic-configs.json: each topic's overrides of the log config
//	topic_ids.go         TopicID, partition.metadata: topics by id (KIP-516), CheckTopicID
//	meta_properties.go   meta.properties: the directory's broker and cluster id
//	properties.go        the Java properties format meta.properties is written in
//	names.go             Kafka's rules for topic names
//	errors.go            the store's errors and Kafka's codes for them
package store
