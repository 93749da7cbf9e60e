package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// kv is a record to produce to a compacted log; a nil value is a tombstone,
// a nil key a keyless record.
type kv struct{ key, value []byte }

func put(key, value string) kv { return kv{[]byte(key), []byte(value)} }
func tombstone(key string) kv  { return kv{key: []byte(key)} }

// consumed is a record as a consumer reads it back.
type consumed struct {
	offset     int64
	key, value string
	tombstone  bool
}

// compactConfig is smallConfig with cleanup.policy=compact.
func compactConfig() Config {
	cfg := smallConfig()
	cfg.CleanupPolicy = CleanupCompact
	return cfg
}

// cleanerHarness is a Manager with one compacted partition, a test clock, a
// high watermark the test sets, and no background cleaner: the test runs
// each round with Clean.
type cleanerHarness struct {
	t     *testing.T
	dir   string
	tp    TopicPartition
	cfg   ManagerConfig
	clock *testClock
	hw    atomic.Int64 // the cleaning limit; -1: the log end offset
	m     *Manager
	l     *Log
}

func newCleanerHarness(t *testing.T, cfg Config) *cleanerHarness {
	mc := DefaultManagerConfig()
	mc.Log = cfg
	mc.CleanerEnable = false
	h := &cleanerHarness{t: t, dir: t.TempDir(), tp: TopicPartition{"compacted", 0}, cfg: mc, clock: newTestClock()}
	h.hw.Store(-1)
	h.openManager()
	var err error
	h.l, err = h.m.Create(h.tp, cfg)
	require.NoError(t, err)
	return h
}

func (h *cleanerHarness) openManager() {
	h.t.Helper()
	m, err := OpenManager(h.dir, h.cfg, ManagerOptions{Logger: quietLogger, Now: h.clock.Now,
		RetentionLimit: func(_ TopicPartition, l *Log) int64 {
			if hw := h.hw.Load(); hw >= 0 {
				return hw
			}
			return l.EndOffset()
		}})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { m.Close() })
	h.m = m
	if l, ok := m.Get(h.tp); ok {
		h.l = l
	}
}

// restart closes the Manager cleanly and opens it again.
func (h *cleanerHarness) restart() {
	h.t.Helper()
	require.NoError(h.t, h.m.Close())
	h.openManager()
}

// produce appends one batch of the records, uncompressed, at the clock's time.
func (h *cleanerHarness) produce(recs ...kv) (first, last int64) {
	h.t.Helper()
	return h.produceBatch(record.NewBatch(h.clock.Now().UnixMilli()), recs...)
}

// produceBatch appends the records in b (whose header fields the caller chose).
func (h *cleanerHarness) produceBatch(b *record.Batch, recs ...kv) (first, last int64) {
	h.t.Helper()
	for i, r := range recs {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: r.key, Value: r.value})
	}
	data, err := record.AppendBatch(nil, b)
	require.NoError(h.t, err)
	first, last, err = h.l.Append(data)
	require.NoError(h.t, err)
	return first, last
}

// fill produces n records, one batch of perBatch at a time, over keys
// key-0 .. key-(keys-1) in turn, with values naming the record's number.
func (h *cleanerHarness) fill(n, perBatch, keys int) {
	h.t.Helper()
	for i := 0; i < n; i += perBatch {
		var recs []kv
		for j := i; j < min(i+perBatch, n); j++ {
			recs = append(recs, put(fmt.Sprintf("key-%d", j%keys), fmt.Sprintf("value-%d-%s", j, "padding-padding-padding")))
		}
		h.produce(recs...)
	}
}

func (h *cleanerHarness) roll() { require.NoError(h.t, h.l.Roll()) }

func (h *cleanerHarness) clean() CleanStats {
	h.t.Helper()
	stats, err := h.m.Clean()
	require.NoError(h.t, err)
	return stats
}

func (h *cleanerHarness) cleanPartition() CleanStats {
	h.t.Helper()
	stats, err := h.m.CleanPartition(h.tp)
	require.NoError(h.t, err)
	return stats
}

// consume reads the whole log from its start through Read, as a consumer
// does, decoding every record; it checks that offsets strictly increase.
func consume(t *testing.T, l *Log) []consumed {
	t.Helper()
	var out []consumed
	last := int64(-1)
	for _, batch := range readBatches(t, l) {
		h, err := record.Validate(batch)
		require.NoError(t, err)
		it, err := record.NewIterator(batch)
		require.NoError(t, err)
		for it.Next() {
			r := it.Record()
			off := h.BaseOffset + int64(r.OffsetDelta)
			require.Greater(t, off, last, "offsets strictly increase")
			require.LessOrEqual(t, off, h.LastOffset())
			last = off
			out = append(out, consumed{offset: off, key: string(r.Key), value: string(r.Value), tombstone: r.Value == nil})
		}
		require.NoError(t, it.Err())
	}
	return out
}

// table is what a consumer rebuilds from a compacted log: each key's
// latest value, deleted keys absent.
func table(records []consumed) map[string]string {
	out := map[string]string{}
	for _, r := range records {
		if r.tombstone {
			delete(out, r.key)
		} else {
			out[r.key] = r.value
		}
	}
	return out
}

// keysBelow counts how often each key appears below offset.
func keysBelow(records []consumed, offset int64) map[string]int {
	out := map[string]int{}
	for _, r := range records {
		if r.offset < offset {
			out[r.key]++
		}
	}
	return out
}

// copyDir copies the regular files of src into a new directory: what a
// crash at this instant would leave on disk (the files were fsynced or are
// in the page cache, which a process crash keeps).
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(dst, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		require.NoError(t, errors.Join(in.Close(), out.Close()))
	}
	return dst
}

// segmentBytes reads the .log files of a directory by name.
func segmentBytes(t *testing.T, l *Log) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for _, s := range l.Segments() {
		data, err := os.ReadFile(s.Path)
		require.NoError(t, err)
		out[s.BaseOffset] = data
	}
	return out
}

// readBatches reads every batch of the log from its start through Read.
// Unlike readAll it allows gaps: after cleaning, the batch a read returns
// may start after the offset asked for.
func readBatches(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		r, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		data, err := r.Bytes()
		require.NoError(t, err)
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			h, err := record.Validate(data)
			if err != nil {
				break // a partial batch at the end of the region
			}
			require.GreaterOrEqual(t, h.LastOffset(), off)
			out = append(out, append([]byte(nil), data[:h.Size()]...))
			off = h.NextOffset()
			data = data[h.Size():]
		}
	}
	return out
}

// headers decodes the header of each batch.
func headers(t *testing.T, batches [][]byte) []record.BatchHeader {
	t.Helper()
	var out []record.BatchHeader
	for _, b := range batches {
		h, err := record.Validate(b)
		require.NoError(t, err)
		out = append(out, h)
	}
	return out
}
