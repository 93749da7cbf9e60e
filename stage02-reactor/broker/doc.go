// Package broker is a single-node Kafka broker over the stage 01 log, served
// by the stage 02 reactor (seed §3.1, §2.1.1).
//
// A Broker is assembled from three parts:
//
//	network.Server   Acceptor -> Processors -> RequestChannel -> RequestHandlerPool
//	      |                                                        |
//	      |  Broker.Handle: protocol.ParseRequest, then by API key  v
//	API table        00_produce.go 01_fetch.go 02_list_offsets.go 03_metadata.go
//	                 18_api_versions.go 19_create_topics.go 20_delete_topics.go
//	      |
//	store.Store      topics -> partitions -> commitlog.Log (one Manager per log dir)
//
// Each API lives in a file named after its key and starts with the versions
// it serves and what they added. ApiVersions advertises exactly the API
// table, so a later stage that registers a replacement handler (stage 03's
// Metadata) or a new API (OffsetForLeaderEpoch, LeaderAndIsr) changes what
// clients see without touching this package.
//
// The handlers that every stage shares take a seam instead of being
// replaced: Produce an Appender (Kafka's ReplicaManager.appendRecords),
// Fetch a FetchSource, ListOffsets an OffsetSource. This stage's are the
// store's (StoreAppender, StoreFetchSource, StoreOffsetSource); stage 03
// plugs in replica-aware ones and keeps the request loops, the acks rules,
// the long poll and the framing of this package.
//
// The store is a package of its own (package store): stage 03's replica
// package builds replicas on its partitions without this package's network
// server and handlers.
//
// Configuration uses Kafka's broker keys, parsed by ParseConfig from a
// server.properties file and --override values.
package broker
