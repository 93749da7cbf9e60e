package commitlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// quietLogger drops log output; tests assert on behaviour, not logs.
var quietLogger = slog.New(slog.NewTextHandler(nopWriter{}, nil))

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// testClock is a clock tests move by hand instead of sleeping.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// smallConfig makes segments and index intervals small so tests roll often.
func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.SegmentIndexBytes = 1024
	return cfg
}

// makeBatch encodes a batch of n records whose values say which batch and
// record they are, with timestamp ts.
func makeBatch(t testing.TB, id, n, valueSize int, ts int64) []byte {
	b := record.NewBatch(ts)
	for i := range n {
		v := []byte(fmt.Sprintf("batch-%d-record-%d-", id, i))
		v = append(v, bytes.Repeat([]byte{'x'}, max(0, valueSize-len(v)))...)
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Key: []byte(fmt.Sprint(i)), Value: v})
	}
	out, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

// logHarness opens logs in a temp directory with a test clock.
type logHarness struct {
	t     *testing.T
	dir   string
	cfg   Config
	clock *testClock
}

func newLogHarness(t *testing.T, cfg Config) *logHarness {
	return &logHarness{t: t, dir: filepath.Join(t.TempDir(), "topic-0"), cfg: cfg, clock: newTestClock()}
}

func (h *logHarness) open(opts Options) *Log {
	h.t.Helper()
	opts.Now, opts.Logger = h.clock.Now, quietLogger
	l, err := Open(h.dir, h.cfg, opts)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { l.Close() })
	return l
}

// appendBatches appends count batches of n records and returns each batch's
// bytes as written (with offsets assigned).
func (h *logHarness) appendBatches(l *Log, count, n, valueSize int) [][]byte {
	h.t.Helper()
	var out [][]byte
	for i := range count {
		b := makeBatch(h.t, i, n, valueSize, h.clock.Now().UnixMilli())
		_, _, err := l.Append(b)
		require.NoError(h.t, err)
		out = append(out, b)
	}
	return out
}

// readAll reads the whole log from offset from through Read and returns the
// batches, checking each is valid and that offsets continue.
func readAll(t *testing.T, l *Log, from int64) [][]byte {
	t.Helper()
	var out [][]byte
	for off := from; off < l.EndOffset(); {
		r, err := l.Read(off, 1<<20)
		require.NoError(t, err)
		data, err := r.Bytes()
		require.NoError(t, err)
		for len(data) > 0 {
			h, err := record.Validate(data)
			if err != nil {
				break // a partial batch at the end of the region
			}
			require.LessOrEqual(t, h.BaseOffset, off)
			out = append(out, append([]byte(nil), data[:h.Size()]...))
			off = h.NextOffset()
			data = data[h.Size():]
		}
	}
	return out
}

// segmentFiles lists the files of a log directory by name.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// batchAt reads the header of the batch that holds offset.
func (l *Log) batchAt(offset int64) (record.BatchHeader, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := l.segmentIndexFor(offset)
	if i < 0 {
		return record.BatchHeader{}, ErrOffsetOutOfRange
	}
	_, h, found, err := l.segments[i].translateOffset(offset)
	if err == nil && !found {
		err = ErrOffsetOutOfRange
	}
	return h, err
}

// loadedSegments counts segments whose files are open and mapped.
func (l *Log) loadedSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, s := range l.segments {
		if s.loaded.Load() {
			n++
		}
	}
	return n
}
