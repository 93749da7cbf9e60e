package record

import (
	"testing"
)

// FuzzDecodeBatch feeds arbitrary bytes to everything that decodes a batch.
// Decoding must never panic, and whatever it accepts must be consistent:
// an iterator that finishes without error has produced exactly recordsCount
// records. Run it with
//
//	go test ./record -run '^$' -fuzz FuzzDecodeBatch -fuzztime 5m
//
// Inputs that once failed are kept in testdata/fuzz/FuzzDecodeBatch and run
// by every plain `go test`.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(goldenBatch(f))
	f.Add(goldenBatch(f)[:HeaderSize])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = PeekSize(b)
		h, verr := Validate(b)
		if verr == nil && h.Size() > len(b) {
			t.Fatalf("Validate accepted a batch of %d bytes from %d", h.Size(), len(b))
		}
		it, err := NewIterator(b)
		if err != nil {
			return
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
