package record

import (
	"testing"
)

// FuzzDecodeBatch feeds arbitrary bytes to everything that decodes a batch,
// compressed or not. Decoding must never panic, and whatever it accepts
// must be consistent: Validate never accepts more bytes than it was given,
// and an iterator that finishes without error has produced exactly
// recordsCount records. The fuzz function reads through a Reader limited to
// 1 MiB rather than NewIterator, whose 64 MiB default would let every
// compressed input inflate for a long time. Run it with
//
//	go test ./record -run '^$' -fuzz '^FuzzDecodeBatch$' -fuzztime 5m
//
// Inputs that once failed, and a spread of the corpus the fuzzer built, are
// kept in testdata/fuzz/FuzzDecodeBatch and run by every plain `go test`.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(goldenBatch(f))
	f.Add(goldenBatch(f)[:HeaderSize])
	f.Add([]byte{})
	for _, c := range codecs {
		f.Add(compressedBatch(f, c, 1))
		f.Add(compressedBatch(f, c, 20))
	}
	// One Reader for every input, as a broker keeps one per connection: the
	// fuzz function runs inputs one at a time in each process.
	reader := Reader{MaxRecordBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = PeekSize(b)
		h, verr := Validate(b)
		if verr == nil && h.Size() > len(b) {
			t.Fatalf("Validate accepted a batch of %d bytes from %d", h.Size(), len(b))
		}
		it, err := reader.Records(b)
		if err != nil {
			return
		}
		h, err = ReadHeader(b)
		if err != nil {
			t.Fatalf("Records accepted a batch whose header does not decode: %v", err)
		}
		n := int32(0)
		for it.Next() {
			r := it.Record()
			_ = r.EncodedSize()
			n++
		}
		if it.Err() == nil && n != h.NumRecords {
			t.Fatalf("iterated %d records, header says %d", n, h.NumRecords)
		}
	})
}
