// Package record encodes and decodes Kafka's RecordBatch format, version 2
// (magic 2), byte for byte as Kafka writes it on disk and on the wire.
//
// A batch is a 61-byte header followed by its records. Every integer in the
// header is big-endian; the records use zigzag varints (seed §2.1.4: the log
// stores exactly what the producer sent, so the format is the log's format).
//
//	 0                   8          12                   16    17            21
//	+-------------------+----------+--------------------+-----+-------------+
//	| baseOffset int64  | length   | partitionLeader-   |magic| crc uint32  |
//	|                   | int32    | Epoch int32        | =2  | (CRC-32C)   |
//	+-------+-----------+----------+-----------+--------+-----+-------------+
//	21      23          27                     35                          43
//	| attrs | lastOffset-| firstTimestamp int64 | maxTimestamp int64        |
//	| int16 | Delta int32|                      |                           |
//	+-------+------------+----------------------+-------+---------+---------+
//	43                   51              53             57        61
//	| producerId int64   | producerEpoch | baseSequence | records-| records…
//	|                    | int16         | int32        | Count   |
//	+--------------------+---------------+--------------+---------+---------
//	                     |<------------- covered by the crc: bytes 21..end -->
//
// length counts the bytes after the length field, so a batch occupies
// length+12 bytes. The CRC starts at the attributes, which leaves out
// baseOffset and partitionLeaderEpoch: a broker assigns offsets and stamps
// its leader epoch in place without recomputing the checksum.
//
// Each record inside is
//
//	length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	keyLength varint | key | valueLength varint | value |
//	headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint | headerValue)…
//
// where a length of -1 means null. A record's offset is baseOffset +
// offsetDelta and its timestamp firstTimestamp + timestampDelta.
//
// Decoding never panics on bad input: it returns one of the sentinel errors
// below, wrapped with context. [IsCorrupt] groups the errors that mean "these
// bytes are not a valid batch", the ones a log's recovery treats as the end of
// its valid data.
//
// A compressed batch (codec bits in the attributes) keeps its header plain
// and compresses its records as one blob; compression.go holds the four
// codecs (seed §2.1.6) in the framings Kafka's clients write.
// AppendBatch compresses, and a Reader decompresses before iterating,
// bounded: a batch claiming more records than its limit can hold is refused
// before any work, and decompression stops at the limit, so a few kilobytes
// of gzip cannot make a broker allocate gigabytes.
package record
