// Package commitlog is Kafka's on-disk log: an append-only sequence of
// record batches, split into segment files and indexed sparsely, in Kafka's
// own file formats (seed §2.1.2 sequential writes, §2.1.3 OS cache, §2.1.4
// log design, §2.1.7 mmap).
//
// A partition's log is a directory of segments. Each segment is named by the
// offset of its first batch and has three files:
//
//	00000000000000000000.log        the batches, byte for byte as produced
//	00000000000000000000.index      offset -> file position, one entry per ~4 KiB
//	00000000000000000000.timeindex  timestamp -> offset, alongside the index
//
// Appends go to the last ("active") segment with one sequential write; the
// OS page cache holds the data and Kafka does not fsync by default
// (flush.messages and flush.ms are off): durability comes from replication
// (stage 03), and a crash is handled by recovery. A read looks up the offset
// in the memory-mapped index, scans forward at most one index interval to
// the batch that holds the offset, and returns a Region of the file rather
// than a copy of the bytes, so the network layer can send it as it is.
//
// After an unclean shutdown (no .kafka_cleanshutdown marker in the log
// directory), Open validates every batch from the recovery point on,
// rebuilds the indexes, truncates at the first torn or corrupt batch and
// deletes every later segment. Segments below the recovery point are not
// opened until used, so a log with thousands of segments opens quickly.
//
// Manager plays Kafka's LogManager for one log directory: it opens every
// partition log in it, runs retention (retention.ms, retention.bytes) and
// time-based flushes in the background, and writes the checkpoint files in
// Kafka's text format. Its log cleaner (cleaner.go, Kafka's LogCleaner)
// compacts the logs whose cleanup.policy includes compact: it keeps the
// latest record of each key, rewriting segments crash-safely beside the
// appends and reads.
//
// Configuration uses Kafka's keys and defaults; see Config.
package commitlog
