package broker

import (
	"testing"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// BenchmarkValidateProducedBatch is LogValidator's pass over a producer's
// batch of 1,000 uncompressed 100-byte records (chapter 6's ceiling load):
// the header, each record's varints, the max timestamp.
//
//	go test -run '^$' -bench ValidateProducedBatch -benchmem ./broker/
func BenchmarkValidateProducedBatch(b *testing.B) {
	raw := thousandRecords(b)
	br := &Broker{cfg: Config{MessageMaxBytes: 1 << 20}}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if code, msg := br.ValidateProducedBatch(raw, false); code != 0 {
			b.Fatal(code, msg)
		}
	}
}

// thousandRecords is a producer's batch of 1,000 records of 100 bytes.
func thousandRecords(tb testing.TB) []byte {
	batch := record.NewBatch(1_700_000_000_000)
	for i := range 1000 {
		batch.Records = append(batch.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: make([]byte, 100)})
	}
	raw, err := record.AppendBatch(nil, batch)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// TestValidatingABatchAllocatesNothing: LogValidator's pass over a batch of
// a thousand uncompressed records allocates nothing, per record or per
// batch (the reader and its iterator come from a pool).
func TestValidatingABatchAllocatesNothing(t *testing.T) {
	raw := thousandRecords(t)
	br := &Broker{cfg: Config{MessageMaxBytes: 1 << 20}}
	br.ValidateProducedBatch(raw, false) // the pool's first reader
	allocs := testing.AllocsPerRun(100, func() {
		if code, msg := br.ValidateProducedBatch(raw, false); code != 0 {
			t.Fatal(code, msg)
		}
	})
	// The race detector's sync.Pool drops some of what it is given.
	if allocs > 0 && !raceEnabled {
		t.Fatalf("%.1f allocations a batch", allocs)
	}
}
