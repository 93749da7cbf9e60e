package commitlog

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Benchmarks for the chapter's table. Run them all with
//
//	make bench            (or: cd stage01-log && go test -run '^$' -bench . -benchmem ./commitlog)
//
// Absolute numbers depend on the machine; the figures that travel are the
// ratios to a baseline measured in the same run.

var batchSizes = []struct {
	name string
	size int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"1MiB", 1 << 20}}

// batchOfSize encodes one batch of about size bytes (100-byte records, like
// Kafka's own benchmark).
func batchOfSize(tb testing.TB, size int) []byte {
	n := max(1, (size-record.HeaderSize)/110)
	b := record.NewBatch(time.Now().UnixMilli())
	for i := range n {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: make([]byte, 100)})
	}
	out, err := record.AppendBatch(nil, b)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkAppendVsRawWrite is the chapter's headline: Log.Append of a batch
// next to os.File.Write of the same bytes to a plain file, interleaved in
// chunks so both see the same machine. Append does more (CRC check, offset
// assignment, index entries, roll checks); the ratio says what that costs.
func BenchmarkAppendVsRawWrite(b *testing.B) {
	for _, bs := range batchSizes {
		b.Run(bs.name, func(b *testing.B) {
			batch := batchOfSize(b, bs.size)
			dir := b.TempDir()
			l, err := Open(filepath.Join(dir, "bench-0"), DefaultConfig(), Options{Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			raw, err := os.Create(filepath.Join(dir, "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()

			const chunk = 32
			var inLog, inRaw time.Duration
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for done := 0; done < b.N; done += chunk {
				n := min(chunk, b.N-done)
				start := time.Now()
				for range n {
					if _, _, err := l.Append(batch); err != nil {
						b.Fatal(err)
					}
				}
				mid := time.Now()
				for range n {
					if _, err := raw.Write(batch); err != nil {
						b.Fatal(err)
					}
				}
				inLog += mid.Sub(start)
				inRaw += time.Since(mid)
			}
			mb := float64(b.N) * float64(len(batch)) / 1e6
			b.ReportMetric(mb/inLog.Seconds(), "log-MB/s")
			b.ReportMetric(mb/inRaw.Seconds(), "raw-MB/s")
			b.ReportMetric(inRaw.Seconds()/inLog.Seconds(), "log/raw")
		})
	}
}

// BenchmarkAppend measures Log.Append alone, for ns/op and allocations.
func BenchmarkAppend(b *testing.B) {
	for _, bs := range batchSizes {
		b.Run(bs.name, func(b *testing.B) {
			batch := batchOfSize(b, bs.size)
			l, err := Open(filepath.Join(b.TempDir(), "bench-0"), DefaultConfig(), Options{Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchLog fills a log with batches of about 1 KiB (so the index has an
// entry every four batches) up to size bytes, and closes it cleanly.
func benchLog(b *testing.B, size int64, cfg Config) (dir string, end int64) {
	dir = filepath.Join(b.TempDir(), "bench-0")
	l, err := Open(dir, cfg, Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	batch := batchOfSize(b, 1<<10)
	for l.Size() < size {
		if _, _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	end = l.EndOffset()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, end
}

// BenchmarkIndexLookup measures the mmapped offset index's binary search
// alone, in a full-size segment's index.
func BenchmarkIndexLookup(b *testing.B) {
	dir, end := benchLog(b, 256<<20, DefaultConfig())
	l, err := Open(dir, DefaultConfig(), Options{CleanShutdown: true, Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	idx := l.activeSegment().offsets
	rng := rand.New(rand.NewPCG(1, 1))
	b.ResetTimer()
	for range b.N {
		idx.lookup(rng.Int64N(end))
	}
	b.ReportMetric(float64(idx.entries), "entries")
}

// BenchmarkReadLookup measures Log.Read at a random offset: the index lookup
// plus the forward scan to the batch, the whole cost of finding where a
// fetch starts.
func BenchmarkReadLookup(b *testing.B) {
	dir, end := benchLog(b, 256<<20, DefaultConfig())
	l, err := Open(dir, DefaultConfig(), Options{CleanShutdown: true, Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Read(rng.Int64N(end), 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecovery measures a full recovery scan (every batch's CRC checked,
// both indexes rebuilt) of a 512 MiB log whose files are in the page cache,
// reported as seconds per GiB.
func BenchmarkRecovery(b *testing.B) {
	const size = 512 << 20
	cfg := DefaultConfig()
	dir, end := benchLog(b, size, cfg)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		l, err := Open(dir, cfg, Options{RecoveryPoint: 0, Logger: quietLogger})
		if err != nil {
			b.Fatal(err)
		}
		if l.EndOffset() != end {
			b.Fatalf("recovered to %d, want %d", l.EndOffset(), end)
		}
		b.StopTimer()
		l.Close()
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*float64(1<<30)/size, "s/GiB")
}
