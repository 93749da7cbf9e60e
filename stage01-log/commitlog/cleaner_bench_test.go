package commitlog

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// BenchmarkClean measures one cleaning round of a 64 MiB log of 100-byte
// values (random bytes, which zstd cannot shrink much) under 10,000 keys
// (about 55 versions of each), uncompressed and zstd: MB/s counts the log's
// bytes before cleaning. Each round cleans a
// fresh copy of the log, made outside the timer. Run it with
//
//	cd stage01-log && go test -run '^$' -bench Clean -benchtime 5x ./commitlog
func BenchmarkClean(b *testing.B) {
	for _, codec := range []record.Codec{record.CodecNone, record.CodecZstd} {
		b.Run(codec.String(), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 16 << 20
			cfg.CleanupPolicy = CleanupCompact
			template := filepath.Join(b.TempDir(), "bench-0")
			l, err := Open(template, cfg, Options{Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for n := 0; l.Size() < 64<<20; n++ {
				batch := record.NewBatch(time.Now().UnixMilli())
				batch.Attributes = batch.Attributes.WithCodec(codec)
				for i := range 100 {
					key := fmt.Sprintf("key-%08d", (n*100+i*7919)%10_000)
					value := make([]byte, 100)
					for j := range value {
						value[j] = byte(rng.IntN(64)) // 6 bits of entropy a byte: zstd saves about a quarter
					}
					batch.Records = append(batch.Records, record.Record{OffsetDelta: int32(i), Key: []byte(key), Value: value})
				}
				data, err := record.AppendBatch(nil, batch)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := l.Append(data); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Roll(); err != nil {
				b.Fatal(err)
			}
			size := l.Size()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ResetTimer()
			var stats CleanStats
			for range b.N {
				b.StopTimer()
				l, err := Open(copyDir(b, template), cfg, Options{Logger: quietLogger, CleanShutdown: true})
				if err != nil {
					b.Fatal(err)
				}
				c, err := l.cleanableRange(l.EndOffset(), time.Now())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				stats = CleanStats{}
				if err := l.clean(c, DefaultManagerConfig().CleanerDedupeBufferSize, nil, &stats); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(stats.RecordsKept), "records-kept")
			b.ReportMetric(float64(stats.RecordsRead), "records-read")
			b.ReportMetric(float64(stats.BytesWritten)/float64(size), "size-after/before")
		})
	}
}
