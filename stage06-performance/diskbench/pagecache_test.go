package diskbench_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage06-performance/diskbench"
)

// The log BenchmarkReadHotCold reads, and its segment size. Tests make
// them small.
var (
	readLogBytes     int64 = 256 << 20
	readSegmentBytes int64 = 64 << 20
)

// BenchmarkReadHotCold is §2.1.3: a log of 16 KiB batches (batch.size's
// default) of 1 KiB records read in order with ReadLog, which is the log's
// own read path (Log.Read, then pread of the region, 1 MiB a fetch as
// max.partition.fetch.bytes), once cold and once hot in each round.
//
// Cold: every file of the log was fdatasynced and dropped from the page
// cache with posix_fadvise(POSIX_FADV_DONTNEED) first; mincore(2) tells
// what was still resident after that: "log-resident", the fraction of the
// .log files (0 when the drop worked), and "index-resident-KiB", the index
// pages that stayed because the log has them mapped and its lookups
// touched them. Hot: the same read right after, from the pages the cold
// read brought in. "slowest-cold-MB/s" is the slowest cold round: on a
// virtual disk the host may cache the file too, and a miss in our page
// cache is then served from the host's memory, faster after the first.
//
//	go test -run '^$' -bench ReadHotCold -benchtime 3x -count 3 ./diskbench
func BenchmarkReadHotCold(b *testing.B) {
	cfg := commitlog.DefaultConfig()
	cfg.SegmentBytes = readSegmentBytes
	dir := filepath.Join(b.TempDir(), "read-0")
	l := buildLog(b, dir, cfg, readLogBytes, 16<<10, 1<<10)
	size := l.Size()
	buf := make([]byte, 1<<20)
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		b.Fatal(err)
	}

	// One read first, as a broker serving the log has done: it loads the
	// segments, whose indexes the log then keeps mapped.
	if _, err := diskbench.ReadLog(l, buf); err != nil {
		b.Fatal(err)
	}

	var cold, hot, slowestCold time.Duration
	var logResident, logTotal, indexResident int64
	b.SetBytes(2 * size)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, path := range files {
			if err := diskbench.Evict(path); errors.Is(err, errors.ErrUnsupported) {
				b.Skip("no way to drop pages from the page cache here:", err)
			} else if err != nil {
				b.Fatal(err)
			}
		}
		for _, path := range files {
			res, total, err := diskbench.Resident(path)
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasSuffix(path, ".log") {
				logResident, logTotal = logResident+res, logTotal+total
			} else {
				indexResident += res
			}
		}
		b.StartTimer()
		for i, d := range []*time.Duration{&cold, &hot} {
			start := time.Now()
			n, err := diskbench.ReadLog(l, buf)
			took := time.Since(start)
			*d += took
			if i == 0 {
				slowestCold = max(slowestCold, took)
			}
			if err != nil {
				b.Fatal(err)
			}
			if n != size {
				b.Fatalf("read %d bytes of a %d-byte log", n, size)
			}
		}
	}
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/cold.Seconds(), "cold-MB/s")
	b.ReportMetric(mb/hot.Seconds(), "hot-MB/s")
	b.ReportMetric(float64(size)/1e6/slowestCold.Seconds(), "slowest-cold-MB/s")
	b.ReportMetric(cold.Seconds()/hot.Seconds(), "hot/cold")
	b.ReportMetric(float64(logResident)/float64(logTotal), "log-resident")
	b.ReportMetric(float64(indexResident)/1024/float64(b.N), "index-resident-KiB")
}

// Evict empties the page cache of a file, as Resident sees it.
func TestEvictLeavesNoPageResident(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	res, size, err := diskbench.Resident(path)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if size != 1<<20 || res != size {
		t.Fatalf("a file just written: %d of %d bytes resident, want all of 1 MiB", res, size)
	}
	if err := diskbench.Evict(path); err != nil {
		t.Fatal(err)
	}
	if res, _, err = diskbench.Resident(path); err != nil {
		t.Fatal(err)
	}
	if res != 0 {
		t.Fatalf("%d bytes still resident after Evict", res)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if res, _, err = diskbench.Resident(path); err != nil || res != size {
		t.Fatalf("after reading the file: %d of %d bytes resident (%v)", res, size, err)
	}
}

// ReadLog reads every batch once, across segments.
func TestReadLogReadsEveryByte(t *testing.T) {
	cfg := commitlog.DefaultConfig()
	cfg.SegmentBytes = 256 << 10
	l := buildLog(t, filepath.Join(t.TempDir(), "read-0"), cfg, 1<<20, 16<<10, 1<<10)
	if len(l.Segments()) < 4 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	for _, bufSize := range []int{16 << 10, 40 << 10, 1 << 20} {
		n, err := diskbench.ReadLog(l, make([]byte, bufSize))
		if err != nil {
			t.Fatal(err)
		}
		if n != l.Size() {
			t.Errorf("with a %d-byte buffer: read %d bytes of %d", bufSize, n, l.Size())
		}
	}
	if _, err := diskbench.ReadLog(l, make([]byte, 8<<10)); err == nil {
		t.Error("a buffer smaller than a batch: no error")
	}
}
