package diskbench_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage06-performance/diskbench"
)

// The bytes each write mode writes per round. Tests make them small.
var (
	writeCacheBytes int64 = 256 << 20
	writeSyncBytes  int64 = 64 << 20
)

// BenchmarkWritePageCache is §2.1.2 as the writer sees it: the same 4 KiB
// blocks written in order ("seq") and in a random order ("rand") over a
// preallocated file, appended to a new file ("append"), and appended as
// 4 KiB batches with commitlog's Log.Append ("log"), every one ending in
// the page cache. One round runs the four modes, in an order that rotates
// from round to round; before each, the files are fdatasynced and dropped
// from the page cache (untimed), so each mode starts from the same state.
//
//	go test -run '^$' -bench WritePageCache -benchtime 3x -count 3 ./diskbench
func BenchmarkWritePageCache(b *testing.B) { benchWrites(b, writeCacheBytes, 0) }

// BenchmarkWriteFdatasync is BenchmarkWritePageCache with an fdatasync
// every so many bytes written (Log.Flush for the log, which is fsync of the
// segment and of its two indexes, as Kafka's flush.messages would do):
// what reaches the device, in the order and the amounts the modes write
// it. Three intervals: every 4 KiB write (4 MiB a mode: it is slow), every
// MiB, and once at the end of 64 MiB.
//
//	go test -run '^$' -bench WriteFdatasync -benchtime 3x -count 3 ./diskbench
func BenchmarkWriteFdatasync(b *testing.B) {
	for _, c := range []struct {
		name      string
		size      int64
		syncEvery int
	}{
		{"every=4KiB", writeSyncBytes / 16, diskbench.BlockSize},
		{"every=1MiB", writeSyncBytes, 1 << 20},
		{"every=64MiB", writeSyncBytes, 64 << 20},
	} {
		b.Run(c.name, func(b *testing.B) { benchWrites(b, c.size, c.syncEvery) })
	}
}

// writeMode writes size bytes of 4 KiB blocks one way in round, and tells
// how long the writing took (setup and cleanup excluded).
type writeMode struct {
	name  string
	write func(b *testing.B, round int) time.Duration
}

func benchWrites(b *testing.B, size int64, syncEvery int) {
	block, err := diskbench.Batch(diskbench.BlockSize, 100)
	if err != nil {
		b.Fatal(err)
	}
	blocks := int(size / diskbench.BlockSize)
	dir := b.TempDir()
	prePath := filepath.Join(dir, "preallocated")
	pre, err := diskbench.Preallocate(prePath, size)
	if err != nil {
		b.Fatal(err)
	}
	defer pre.Close()
	sequential := diskbench.Sequential(blocks)

	// settle leaves nothing dirty and nothing of path cached, where the
	// system can drop pages.
	settle := func(path string) {
		if err := diskbench.Evict(path); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			b.Fatal(err)
		}
	}
	timed := func(f func()) time.Duration {
		b.StartTimer()
		start := time.Now()
		f()
		d := time.Since(start)
		b.StopTimer()
		return d
	}
	overwrite := func(order func(round int) []int) func(*testing.B, int) time.Duration {
		return func(b *testing.B, round int) time.Duration {
			o := order(round)
			return timed(func() {
				if err := diskbench.WriteBlocks(pre, o, block, syncEvery); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
	modes := []writeMode{
		{"seq", overwrite(func(int) []int { return sequential })},
		{"rand", overwrite(func(round int) []int { return diskbench.Shuffled(blocks, uint64(round)) })},
		{"append", func(b *testing.B, round int) time.Duration {
			path := filepath.Join(dir, "append")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			d := timed(func() {
				if err := diskbench.WriteBlocks(f, sequential, block, syncEvery); err != nil {
					b.Fatal(err)
				}
			})
			f.Close()
			os.Remove(path)
			return d
		}},
		{"log", func(b *testing.B, round int) time.Duration {
			logDir := filepath.Join(dir, "log-0")
			l, err := commitlog.Open(logDir, commitlog.DefaultConfig(), quiet)
			if err != nil {
				b.Fatal(err)
			}
			perSync := max(syncEvery/diskbench.BlockSize, 1)
			d := timed(func() {
				for i := range blocks {
					if _, _, err := l.Append(block); err != nil {
						b.Fatal(err)
					}
					if syncEvery > 0 && ((i+1)%perSync == 0 || i == blocks-1) {
						if err := l.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			l.Close()
			os.RemoveAll(logDir)
			return d
		}},
	}

	spent := make([]time.Duration, len(modes))
	b.SetBytes(size * int64(len(modes)))
	b.StopTimer()
	b.ResetTimer()
	for round := range b.N {
		for k := range modes {
			i := (k + round) % len(modes)
			settle(prePath) // whatever the mode before left dirty is written now, untimed
			spent[i] += modes[i].write(b, round)
		}
	}
	mb := float64(size) * float64(b.N) / 1e6
	for i, m := range modes {
		b.ReportMetric(mb/spent[i].Seconds(), m.name+"-MB/s")
	}
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "seq/rand")
	b.ReportMetric(spent[2].Seconds()/spent[3].Seconds(), "log/append")
}

// Both orders leave the same file: the benchmarks compare the order of the
// writes and nothing else.
func TestShuffledWritesLeaveTheSameFile(t *testing.T) {
	dir := t.TempDir()
	block, err := diskbench.Batch(diskbench.BlockSize, 100)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 64
	var files [][]byte
	for i, order := range [][]int{diskbench.Sequential(blocks), diskbench.Shuffled(blocks, 7)} {
		path := filepath.Join(dir, string(rune('a'+i)))
		f, err := diskbench.Preallocate(path, blocks*diskbench.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := diskbench.WriteBlocks(f, order, block, 16*diskbench.BlockSize); err != nil {
			t.Fatal(err)
		}
		f.Close()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
	}
	if want := bytes.Repeat(block, blocks); !bytes.Equal(files[0], want) || !bytes.Equal(files[1], want) {
		t.Fatal("sequential and shuffled writes left different files")
	}
	if order := diskbench.Shuffled(blocks, 7); order[0] == 0 && order[1] == 1 && order[2] == 2 {
		t.Fatalf("shuffled order starts in order: %v", order[:8])
	}
}

func TestBatchHasExactlyTheSizeAsked(t *testing.T) {
	for _, c := range []struct{ size, value int }{{4096, 100}, {1024, 100}, {16 << 10, 1024}, {200, 100}} {
		batch, err := diskbench.Batch(c.size, c.value)
		if err != nil {
			t.Fatalf("Batch(%d, %d): %v", c.size, c.value, err)
		}
		if len(batch) != c.size {
			t.Errorf("Batch(%d, %d) is %d bytes", c.size, c.value, len(batch))
		}
	}
}
