package diskbench_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage06-performance/diskbench"
)

var quiet = commitlog.Options{Logger: slog.New(slog.DiscardHandler)}

// buildLog appends batches of batchSize bytes (values of valueSize bytes)
// to a new log in dir until it holds size bytes, rolls it (every segment
// holding data is then closed to appends, its indexes trimmed to their
// entries) and closes it cleanly. It returns the log reopened.
func buildLog(tb testing.TB, dir string, cfg commitlog.Config, size int64, batchSize, valueSize int) *commitlog.Log {
	tb.Helper()
	batch, err := diskbench.Batch(batchSize, valueSize)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := commitlog.Open(dir, cfg, quiet)
	if err != nil {
		tb.Fatal(err)
	}
	for l.Size() < size {
		if _, _, err := l.Append(batch); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		tb.Fatal(err)
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	opts := quiet
	opts.CleanShutdown = true
	if l, err = commitlog.Open(dir, cfg, opts); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// indexPath is the .index file beside a segment's .log file.
func indexPath(logPath string) string {
	return strings.TrimSuffix(logPath, filepath.Ext(logPath)) + ".index"
}
