package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

func dumpString(t *testing.T, path string, printData bool) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, dump(&out, path, printData))
	return out.String()
}

// writeOurSegment writes two batches with our Log and returns the segment.
func writeOurSegment(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "demo-0")
	l, err := commitlog.Open(dir, commitlog.DefaultConfig(), commitlog.Options{})
	require.NoError(t, err)
	b1 := record.NewBatch(1704067200000,
		record.Record{OffsetDelta: 0, Key: []byte("k1"), Value: []byte("hello")},
		record.Record{OffsetDelta: 1, TimestampDelta: 5, Value: []byte("world"),
			Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}})
	b2 := record.NewBatch(1704067201000, record.Record{Value: []byte("third")})
	for _, b := range []*record.Batch{b1, b2} {
		data, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		_, _, err = l.AppendAsLeader(data, 0)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	return filepath.Join(dir, "00000000000000000000.log")
}

func TestDumpPrintsBatchesAndRecordsAsKafkaDoes(t *testing.T) {
	path := writeOurSegment(t)
	want := "Dumping " + path + "\n" +
		"Log starting offset: 0\n" +
		"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 " +
		"partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1704067200005 " +
		"size: 91 magic: 2 compresscodec: none crc: 3612364456 isvalid: true\n" +
		"| offset: 0 CreateTime: 1704067200000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: [] key: k1 payload: hello\n" +
		"| offset: 1 CreateTime: 1704067200005 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [h] payload: world\n" +
		"baseOffset: 2 lastOffset: 2 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 " +
		"partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 91 CreateTime: 1704067201000 " +
		"size: 73 magic: 2 compresscodec: none crc: 1908051096 isvalid: true\n" +
		"| offset: 2 CreateTime: 1704067201000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: third\n"
	require.Equal(t, want, dumpString(t, path, true))

	batchesOnly := dumpString(t, path, false)
	require.Equal(t, 2, strings.Count(batchesOnly, "baseOffset:"))
	require.NotContains(t, batchesOnly, "| offset")
}

// kmsgBatch encodes a batch with franz-go's kmsg, as a producer or another
// broker would write it, without our record package.
func kmsgBatch(firstOffset int64, values ...string) []byte {
	kb := kmsg.RecordBatch{FirstOffset: firstOffset, Magic: 2, FirstTimestamp: 1600000000000,
		MaxTimestamp: 1600000000000, ProducerID: 42, ProducerEpoch: 1, FirstSequence: 7,
		NumRecords: int32(len(values)), LastOffsetDelta: int32(len(values) - 1)}
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		kb.Records = r.AppendTo(kb.Records)
	}
	out := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func TestDumpReadsASegmentWrittenByAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000100.log")
	data := append(kmsgBatch(100, "a", "b", "c"), kmsgBatch(103, "d")...)
	require.NoError(t, os.WriteFile(path, data, 0o644))

	out := dumpString(t, path, true)
	require.Contains(t, out, "Log starting offset: 100\n")
	require.Contains(t, out, "baseOffset: 100 lastOffset: 102 count: 3 baseSequence: 7 lastSequence: 9 producerId: 42 producerEpoch: 1")
	require.Contains(t, out, "baseOffset: 103 lastOffset: 103 count: 1")
	require.Equal(t, 2, strings.Count(out, "isvalid: true"))
	require.Contains(t, out, "| offset: 101 CreateTime: 1600000000000 keySize: -1 valueSize: 1 sequence: 8 headerKeys: [] payload: b\n")
}

func TestDumpFlagsCorruptBatchesAndTornTails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	first, second := kmsgBatch(0, "good"), kmsgBatch(1, "flipped")
	second[len(second)-2] ^= 0xff
	third := kmsgBatch(2, "torn")
	data := append(append(append([]byte(nil), first...), second...), third[:30]...)
	require.NoError(t, os.WriteFile(path, data, 0o644))

	out := dumpString(t, path, false)
	require.Contains(t, out, "baseOffset: 0 lastOffset: 0 count: 1")
	require.Regexp(t, `baseOffset: 1 lastOffset: 1 .* isvalid: false\n`, out)
	require.Contains(t, out, "Found 30 invalid bytes at the end of 00000000000000000000.log\n")
}

func TestDumpIndexes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx-0")
	cfg := commitlog.DefaultConfig()
	cfg.IndexIntervalBytes = 100
	l, err := commitlog.Open(dir, cfg, commitlog.Options{})
	require.NoError(t, err)
	for i := range 10 {
		data, err := record.AppendBatch(nil, record.NewBatch(int64(1000+i), record.Record{Value: bytes.Repeat([]byte("x"), 80)}))
		require.NoError(t, err)
		_, _, err = l.Append(data)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())

	idx := dumpString(t, filepath.Join(dir, "00000000000000000000.index"), false)
	// 150-byte batches, an entry once more than 100 bytes were written
	// since the last one: every batch after the first.
	require.Contains(t, idx, "offset: 1 position: 150\noffset: 2 position: 300\n")
	require.Equal(t, 9, strings.Count(idx, "offset: "))
	ts := dumpString(t, filepath.Join(dir, "00000000000000000000.timeindex"), false)
	require.Contains(t, ts, "timestamp: 1002 offset: 2\n")
	require.Contains(t, ts, "timestamp: 1009 offset: 9\n", "the final entry written when the segment closed")
}

func TestDumpPrintsTheRecordsOfCompressedBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	var data []byte
	for i, c := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		b := record.NewBatch(1704067200000, record.Record{Value: []byte("first " + c.String())},
			record.Record{OffsetDelta: 1, Key: []byte("k"), Value: []byte("second " + c.String())})
		b.BaseOffset = int64(2 * i)
		b.Attributes = b.Attributes.WithCodec(c)
		var err error
		data, err = record.AppendBatch(data, b)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
	out := dumpString(t, path, true)
	for i, c := range []string{"gzip", "snappy", "lz4", "zstd"} {
		require.Contains(t, out, "compresscodec: "+c+" crc:")
		require.Contains(t, out, fmt.Sprintf("| offset: %d CreateTime: 1704067200000 keySize: -1 valueSize: %d sequence: -1 headerKeys: [] payload: first %s\n",
			2*i, len("first "+c), c))
		require.Contains(t, out, fmt.Sprintf("| offset: %d CreateTime: 1704067200000 keySize: 1 valueSize: %d sequence: -1 headerKeys: [] key: k payload: second %s\n",
			2*i+1, len("second "+c), c))
	}
}

// TestDumpPointsAtACorruptBatchInTheMiddle is what an operator runs when a
// consumer stops with a CRC error: dumplog names the batch, its offsets and
// its position in the file.
func TestDumpPointsAtACorruptBatchInTheMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	var data []byte
	for i := range 5 {
		data = append(data, kmsgBatch(int64(i), fmt.Sprintf("record %d", i))...)
	}
	size := len(kmsgBatch(0, "record 0"))
	data[2*size+record.HeaderSize+3] ^= 0x40 // one bit of the third batch's records
	require.NoError(t, os.WriteFile(path, data, 0o644))

	out := dumpString(t, path, false)
	require.Equal(t, 5, strings.Count(out, "baseOffset:"), "every batch is listed")
	require.Regexp(t, fmt.Sprintf(`baseOffset: 2 lastOffset: 2 .* position: %d .* isvalid: false\n`, 2*size), out)
	require.Contains(t, out, fmt.Sprintf("| corrupt batch at position %d: record: crc mismatch: stored ", 2*size))
	require.Contains(t, out, fmt.Sprintf("Found 1 corrupt batch(es) in 00000000000000000000.log: baseOffset 2 at position %d\n", 2*size))
}
