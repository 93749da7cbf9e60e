package diskbench_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage06-performance/diskbench"
)

// The segment the lookup benchmarks search. Tests make it small.
var lookupSegmentBytes int64 = 256 << 20

// lookupFixture is one closed segment of 1 KiB batches of 100-byte records
// (an index entry every fifth batch at index.interval.bytes=4096), its
// .index file opened both ways, and its .log file.
type lookupFixture struct {
	log        *commitlog.Log
	seg        commitlog.SegmentInfo
	mmapped    *diskbench.MmapIndex
	preads     *diskbench.PreadIndex
	file       *os.File // the segment's .log file
	indexBytes int64
	end        int64 // the segment's next offset
}

func newLookupFixture(tb testing.TB, size int64) *lookupFixture {
	l := buildLog(tb, filepath.Join(tb.TempDir(), "lookup-0"), commitlog.DefaultConfig(), size, 1<<10, 100)
	x := &lookupFixture{log: l, seg: l.Segments()[0], end: l.EndOffset()}
	var err error
	if x.mmapped, err = diskbench.OpenMmapIndex(indexPath(x.seg.Path), x.seg.BaseOffset); err != nil {
		tb.Fatal(err)
	}
	if x.preads, err = diskbench.OpenPreadIndex(indexPath(x.seg.Path), x.seg.BaseOffset); err != nil {
		tb.Fatal(err)
	}
	if x.file, err = os.Open(x.seg.Path); err != nil {
		tb.Fatal(err)
	}
	fi, err := os.Stat(indexPath(x.seg.Path))
	if err != nil {
		tb.Fatal(err)
	}
	x.indexBytes = fi.Size()
	tb.Cleanup(func() { x.mmapped.Close(); x.preads.Close(); x.file.Close() })
	// Every page of both files in the page cache: the lookups compare
	// ways of reading memory, not the disk.
	if _, err := diskbench.ReadLog(l, make([]byte, 1<<20)); err != nil {
		tb.Fatal(err)
	}
	if _, err := os.ReadFile(indexPath(x.seg.Path)); err != nil {
		tb.Fatal(err)
	}
	// And every page of the mapping in our page tables, as in a broker
	// that has served the segment for a while: a first touch of a mapped
	// page is a minor fault, microseconds in a virtual machine.
	for t := x.seg.BaseOffset; t < x.end; t += max(1, (x.end-x.seg.BaseOffset)/8192) {
		x.mmapped.Lookup(t)
	}
	return x
}

// BenchmarkIndexSearch is §2.1.7: the offset index's binary search (about
// 16 probes in a 256 MiB segment's index) over the mapped .index file, as
// commitlog searches it, and the same search reading each probed entry
// with pread(2), interleaved in chunks of 256 lookups of the same random
// offsets, new ones for each chunk. The allocations per lookup are counted
// apart (AllocsPerRun), and "getpid-ns" is the cost of the cheapest system
// call here, the floor under each pread. "index/segment" is the .index
// file's size as a fraction of the .log's.
//
//	go test -run '^$' -bench IndexSearch -count 3 ./diskbench
func BenchmarkIndexSearch(b *testing.B) {
	x := newLookupFixture(b, lookupSegmentBytes)
	rng := rand.New(rand.NewPCG(1, 1))
	targets := make([]int64, 256)
	for i := range targets {
		targets[i] = x.seg.BaseOffset + rng.Int64N(x.end-x.seg.BaseOffset)
	}
	preadLookup := func(t int64) {
		if _, _, err := x.preads.Lookup(t); err != nil {
			b.Fatal(err)
		}
	}
	mmapAllocs := testing.AllocsPerRun(100, func() { x.mmapped.Lookup(targets[0]) })
	preadAllocs := testing.AllocsPerRun(100, func() { preadLookup(targets[0]) })
	syscallNs := syscallCost()

	var inMmap, inPread time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += len(targets) {
		n := min(len(targets), b.N-done)
		b.StopTimer()
		for i := range targets[:n] {
			targets[i] = x.seg.BaseOffset + rng.Int64N(x.end-x.seg.BaseOffset)
		}
		b.StartTimer()
		start := time.Now()
		for _, t := range targets[:n] {
			x.mmapped.Lookup(t)
		}
		mid := time.Now()
		for _, t := range targets[:n] {
			preadLookup(t)
		}
		inMmap += mid.Sub(start)
		inPread += time.Since(mid)
	}
	b.ReportMetric(float64(inMmap.Nanoseconds())/float64(b.N), "mmap-ns/lookup")
	b.ReportMetric(float64(inPread.Nanoseconds())/float64(b.N), "pread-ns/lookup")
	b.ReportMetric(inPread.Seconds()/inMmap.Seconds(), "pread/mmap")
	b.ReportMetric(mmapAllocs, "mmap-allocs/lookup")
	b.ReportMetric(preadAllocs, "pread-allocs/lookup")
	b.ReportMetric(syscallNs, "getpid-ns")
	b.ReportMetric(float64(x.mmapped.Entries()), "entries")
	b.ReportMetric(float64(x.indexBytes)/float64(x.seg.Size), "index/segment")
}

// BenchmarkFindBatch is §2.1.4: finding the batch that holds a random
// offset, where every fetch starts. "log": commitlog's Log.Read (the
// mapped index, then a scan of at most one index interval, pooled window).
// "mmap" and "pread": this package's index lookup, either way, then
// FindBatch over an 8 KiB window from the entry found. "scan": no index,
// FindBatch from the segment's start with a 1 MiB window, all in the page
// cache. Each round looks up one offset by scanning and 64 each way with
// an index, in an order that rotates; figures are per lookup.
//
//	go test -run '^$' -bench FindBatch -count 3 ./diskbench
func BenchmarkFindBatch(b *testing.B) {
	x := newLookupFixture(b, lookupSegmentBytes)
	rng := rand.New(rand.NewPCG(2, 2))
	targets := make([]int64, 64)
	small, large := make([]byte, 8<<10), make([]byte, 1<<20)
	ways := []struct {
		name string
		find func(target int64)
	}{
		{"log", func(t int64) {
			if _, err := x.log.Read(t, 1<<20); err != nil {
				b.Fatal(err)
			}
		}},
		{"mmap", func(t int64) {
			_, pos := x.mmapped.Lookup(t)
			if _, _, err := diskbench.FindBatch(x.file, int64(pos), x.seg.Size, t, small); err != nil {
				b.Fatal(err)
			}
		}},
		{"pread", func(t int64) {
			_, pos, err := x.preads.Lookup(t)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := diskbench.FindBatch(x.file, int64(pos), x.seg.Size, t, small); err != nil {
				b.Fatal(err)
			}
		}},
	}
	scan := func(t int64) {
		if _, _, err := diskbench.FindBatch(x.file, 0, x.seg.Size, t, large); err != nil {
			b.Fatal(err)
		}
	}
	allocs := make([]float64, len(ways))
	for i, w := range ways {
		allocs[i] = testing.AllocsPerRun(100, func() { w.find(x.end / 2) })
	}
	scanAllocs := testing.AllocsPerRun(3, func() { scan(x.end / 2) })

	spent := make([]time.Duration, len(ways))
	var scanning time.Duration
	b.ResetTimer()
	for round := range b.N {
		for i := range targets {
			targets[i] = x.seg.BaseOffset + rng.Int64N(x.end-x.seg.BaseOffset)
		}
		start := time.Now()
		scan(targets[0])
		scanning += time.Since(start)
		// The scan leaves the CPU's caches full of the segment: the way
		// that runs first after it pays to refill them, so the order
		// rotates.
		for k := range ways {
			i := (k + round) % len(ways)
			start := time.Now()
			for _, t := range targets {
				ways[i].find(t)
			}
			spent[i] += time.Since(start)
		}
	}
	lookups := float64(b.N * len(targets))
	for i, w := range ways {
		b.ReportMetric(float64(spent[i].Nanoseconds())/lookups, w.name+"-ns/lookup")
		b.ReportMetric(allocs[i], w.name+"-allocs/lookup")
	}
	b.ReportMetric(scanAllocs, "scan-allocs/lookup")
	scanNs := float64(scanning.Nanoseconds()) / float64(b.N)
	b.ReportMetric(scanNs, "scan-ns/lookup")
	b.ReportMetric(scanNs/(float64(spent[0].Nanoseconds())/lookups), "scan/log")
}

// syscallCost is the time of the cheapest system call, getpid(2), in ns:
// the floor under every pread, which varies tenfold between machines
// (a virtual machine's exits, speculative-execution mitigations).
func syscallCost() float64 {
	const n = 20000
	start := time.Now()
	for range n {
		syscall.Getpid()
	}
	return float64(time.Since(start).Nanoseconds()) / n
}

// The three ways of finding a batch agree with Log.Read, offset by offset.
func TestLookupsAgreeWithTheLog(t *testing.T) {
	x := newLookupFixture(t, 1<<20)
	if x.mmapped.Entries() != x.preads.Entries() || x.mmapped.Entries() < 100 {
		t.Fatalf("index entries: mapped %d, pread %d; want the same, at least 100", x.mmapped.Entries(), x.preads.Entries())
	}
	window := make([]byte, 8<<10)
	for target := x.seg.BaseOffset; target < x.end; target += 7 {
		r, err := x.log.Read(target, 1)
		if err != nil {
			t.Fatal(err)
		}
		off, pos := x.mmapped.Lookup(target)
		poff, ppos, err := x.preads.Lookup(target)
		if err != nil || poff != off || ppos != pos {
			t.Fatalf("offset %d: mapped index says (%d, %d), pread index (%d, %d, %v)", target, off, pos, poff, ppos, err)
		}
		if off > target {
			t.Fatalf("offset %d: index entry %d is past it", target, off)
		}
		for _, from := range []int64{int64(pos), 0} {
			got, h, err := diskbench.FindBatch(x.file, from, x.seg.Size, target, window)
			if err != nil {
				t.Fatal(err)
			}
			if got != r.Pos || h.BaseOffset > target || h.LastOffset() < target {
				t.Fatalf("offset %d from %d: batch [%d, %d] at %d, Log.Read says position %d", target, from, h.BaseOffset, h.LastOffset(), got, r.Pos)
			}
		}
	}
	if _, _, err := diskbench.FindBatch(x.file, 0, x.seg.Size, x.end, window); err == nil {
		t.Error("FindBatch past the segment's end: no error")
	}
}
