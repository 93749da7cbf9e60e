package diskbench_test

import (
	"flag"
	"runtime"
	"testing"
)

// Every benchmark runs, on small files and twice, under go test: a
// benchmark that no longer works fails the stage's tests, not the next
// person who measures.
func TestBenchmarksRun(t *testing.T) {
	sizes := []*int64{&writeCacheBytes, &writeSyncBytes, &readLogBytes, &readSegmentBytes, &lookupSegmentBytes}
	saved := make([]int64, len(sizes))
	for i, p := range sizes {
		saved[i] = *p
	}
	benchtime := flag.Lookup("test.benchtime")
	oldBenchtime := benchtime.Value.String()
	t.Cleanup(func() {
		for i, p := range sizes {
			*p = saved[i]
		}
		benchtime.Value.Set(oldBenchtime)
	})
	writeCacheBytes, writeSyncBytes = 1<<20, 1<<20
	readLogBytes, readSegmentBytes = 2<<20, 1<<20
	lookupSegmentBytes = 1 << 20
	if err := benchtime.Value.Set("2x"); err != nil {
		t.Fatal(err)
	}

	for _, bm := range []struct {
		name string
		f    func(*testing.B)
	}{
		{"WritePageCache", BenchmarkWritePageCache},
		{"WriteFdatasync", BenchmarkWriteFdatasync},
		{"ReadHotCold", BenchmarkReadHotCold},
		{"IndexSearch", BenchmarkIndexSearch},
		{"FindBatch", BenchmarkFindBatch},
	} {
		r := testing.Benchmark(bm.f)
		if r.N == 0 && (runtime.GOOS == "linux" || bm.name != "ReadHotCold") {
			t.Errorf("Benchmark%s failed", bm.name) // ReadHotCold skips where pages cannot be dropped
			continue
		}
		t.Logf("Benchmark%s: %v", bm.name, r)
	}
}
