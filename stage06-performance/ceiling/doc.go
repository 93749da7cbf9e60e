// Package ceiling measures how much a broker can take when the client
// costs almost nothing: the broker's own ceiling (issue 13), against the
// one thing it cannot beat, a sequential write of the same bytes to a file.
//
// A real producer spends its CPU building records, batching and
// compressing them, and encoding requests; on a two-core machine that
// shares its cores with the broker, a benchmark with franz-go measures
// the client as much as the broker. Here the client is a Produce request
// encoded once per partition (Produce: one uncompressed batch of N
// records, built with stage 01's record.AppendBatch and wrapped with
// kmsg), copied and stamped with a new correlation id for each send, and
// written by stage 02's loadgen over a few connections with several
// requests in flight on each:
//
//	load generator (this process)              broker process
//	┌───────────────────────────────┐          ┌─────────────────────────────────┐
//	│ conn 0: writer ─ req req req ─┼──TCP────▶│ Processor: read, mute, queue    │
//	│         reader ◀─ resp ───────┼──────────┤ RequestChannel                  │
//	│ conn 1..3: the same           │          │ handler: validate (CRC, each    │
//	│ one template per partition,   │          │   record), assign offsets,      │
//	│ partition = corr mod P        │          │   write(2) to the segment       │
//	└───────────────────────────────┘          │ response: unmute, next request  │
//	                                           └─────────────────────────────────┘
//	raw baseline (this process):  write(2) the same batch bytes to one file, batch
//	                              by batch, no fsync (the broker does not fsync either)
//
// The broker answers a connection's requests one at a time (it mutes the
// connection until the response is written), so pipelining does not make
// one connection's requests run in parallel; it keeps the next request in
// the broker's read buffer so the broker never waits a round trip for it.
// With a few connections the broker's handlers always have work, and the
// rate measured is the broker's, not the client's.
//
// Files, in reading order:
//
//	produce.go               Produce: the pre-encoded requests, one per partition
//	rawwrite.go              WriteSequential: the baseline
//	offsets.go               EndOffsets: what a load really appended
//	produce_test.go          the requests decode as Kafka's; a load appends every record
//	sink_test.go             a server that only reads and writes: TCP's cost
//	bench_linux_test.go      BenchmarkBrokerCeiling: raw, sink, RF1 acks=1, RF3 acks=all
//	inprocess_linux_test.go  BenchmarkStage02Ceiling: the same load in one process, to profile
//	threads_test.go          BenchmarkThreads: num.network.threads × num.io.threads
//
// The command cmd/loadgen runs the same load against any broker and prints
// what kafka-producer-perf-test prints.
package ceiling
