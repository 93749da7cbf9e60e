package group

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// BenchmarkLoad measures how long a coordinator that becomes leader of a
// partition of __consumer_offsets takes to load 100,000 committed offsets
// (1,000 groups of 100 partitions each, one commit record each, in
// batches of 100 as a consumer's commit writes them) from its log, from
// Elected until the groups answer, against the baseline of the same run:
// reading the same log's bytes and walking its batch headers, without
// decoding a record.
//
//	go test -run '^$' -bench BenchmarkLoad -benchtime 5x ./group/
func BenchmarkLoad(b *testing.B) {
	l, err := commitlog.Open(b.TempDir(), commitlog.DefaultConfig(), commitlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	for g := range 1000 {
		id := fmt.Sprintf("group-%d", g)
		var keys, values [][]byte
		for p := range int32(100) {
			tp := commitlog.TopicPartition{Topic: "events", Partition: p}
			keys = append(keys, offsetKey(id, tp))
			values = append(values, offsetValue(Offset{Offset: int64(g) * 100, LeaderEpoch: 3, CommitTime: now.UnixMilli(), ExpireTime: -1}))
		}
		if _, _, err := l.Append(batchOf(now, keys, values)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("load", func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.Partitions = 1
		for range b.N {
			c := New(cfg, nil, Options{Logger: slog.New(slog.DiscardHandler)})
			c.Elected(0, 1, l)
			for c.Owns("group-0") != 0 {
				time.Sleep(100 * time.Microsecond)
			}
			c.Close()
		}
		b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "offsets/s")
		b.SetBytes(l.Size())
	})
	b.Run("read-only", func(b *testing.B) {
		for range b.N {
			end := l.EndOffset()
			for offset := l.StartOffset(); offset < end; {
				r, err := l.ReadUpTo(offset, 5<<20, end)
				if err != nil {
					b.Fatal(err)
				}
				data, err := r.Bytes()
				if err != nil {
					b.Fatal(err)
				}
				for len(data) >= record.HeaderSize { // batch headers only: no record is decoded
					h, err := record.ReadHeader(data)
					if err != nil || h.Size() > len(data) {
						break
					}
					offset, data = h.NextOffset(), data[h.Size():]
				}
			}
		}
		b.SetBytes(l.Size())
	})
}
