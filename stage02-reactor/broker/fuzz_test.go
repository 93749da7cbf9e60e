package broker

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// fuzzBatch encodes n records with codec c, as a producer sends them.
func fuzzBatch(t testing.TB, c record.Codec, n int) []byte {
	b := record.NewBatch(1_700_000_000_000)
	for i := range n {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i),
			Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("value %d", i))})
	}
	b.Attributes = b.Attributes.WithCodec(c)
	out, err := record.AppendBatch(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzValidateProducedBatch feeds arbitrary bytes to the produce
// validator, as a producer may send them. It must never panic, it refuses
// only with the codes a produce response may carry for a batch, and a batch
// it accepts is one the log and the consumers can use: one whole batch
// with a header that decodes, at least one record, and records that decode
// (decompressed within the validator's bound) to exactly recordsCount
// records with offset deltas 0, 1, 2, .... The CRC is not part of it:
// validateBatch leaves it to Log.Append. Run it with
//
//	go test ./broker -run '^$' -fuzz '^FuzzValidateProducedBatch$' -fuzztime 5m
//
// A spread of the corpus it built is kept in
// testdata/fuzz/FuzzValidateProducedBatch.
func FuzzValidateProducedBatch(f *testing.F) {
	for _, c := range []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		f.Add(fuzzBatch(f, c, 1))
		f.Add(fuzzBatch(f, c, 10))
	}
	good := fuzzBatch(f, record.CodecNone, 3)
	f.Add(good[:40])
	f.Add(good[:len(good)-1])
	badCount := fuzzBatch(f, record.CodecNone, 3)
	binary.BigEndian.PutUint32(badCount[57:], 4) // recordsCount
	f.Add(badCount)
	f.Add(append(fuzzBatch(f, record.CodecNone, 1), fuzzBatch(f, record.CodecNone, 1)...))
	f.Add([]byte{})

	const maxBytes = 1 << 20
	reader := record.Reader{MaxRecordBytes: maxBytes * DecompressionFactor}
	f.Fuzz(func(t *testing.T, b []byte) {
		code, msg, _, _ := validateBatch(b, maxBytes, false, false)
		switch code {
		case 0:
		case kerrInvalidRecord, kerrCorruptMessage, kerrMessageTooLarge:
			if msg == "" {
				t.Fatalf("refused with code %d and no message", code)
			}
			return
		default:
			t.Fatalf("refused with code %d (%s), not a produce batch error", code, msg)
		}
		h, err := record.ReadHeader(b)
		if err != nil {
			t.Fatalf("accepted a batch whose header does not decode: %v", err)
		}
		if h.Size() != len(b) || h.NumRecords <= 0 {
			t.Fatalf("accepted a batch of %d bytes and %d records from %d bytes", h.Size(), h.NumRecords, len(b))
		}
		it, err := reader.Records(b)
		if err != nil {
			t.Fatalf("accepted a batch whose records do not open: %v", err)
		}
		n := int32(0)
		for ; it.Next(); n++ {
			if d := it.Record().OffsetDelta; d != n {
				t.Fatalf("accepted a batch whose record %d has offset delta %d", n, d)
			}
		}
		if err := it.Err(); err != nil || n != h.NumRecords {
			t.Fatalf("accepted a batch of %d records that decodes to %d: %v", h.NumRecords, n, err)
		}
	})
}
