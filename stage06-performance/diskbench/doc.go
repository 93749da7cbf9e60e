// Package diskbench measures the disk side of seed §2.1 against its
// alternatives, on the same machine in the same run: stage 01's commitlog
// is the Kafka way, and each benchmark puts next to it what Kafka chose not
// to do.
//
//	§2.1.2 sequential writes   BenchmarkWritePageCache, BenchmarkWriteFdatasync:
//	                           the same 4 KiB blocks written in order and in a
//	                           random order over a preallocated file, appended
//	                           to a new file, and appended with Log.Append
//	§2.1.3 the page cache      BenchmarkReadHotCold: a log read through
//	                           Log.Read from the page cache, and after its
//	                           pages were dropped (Evict, checked by Resident)
//	§2.1.4 sparse index        BenchmarkFindBatch: the batch holding an offset
//	§2.1.7 mmap                found through the index, or by scanning the
//	                           segment; BenchmarkIndexSearch: the index's
//	                           binary search in a mapping or with pread(2)
//
// The package holds only what the benchmarks share: page cache control
// (Linux: fdatasync, posix_fadvise, mincore; elsewhere an error that says
// it is unsupported), the write patterns, an offset index read by mapping
// or by pread, and a reader that walks a log the way a fetch does. Run the
// benchmarks with
//
//	cd stage06-performance
//	go test -run '^$' -bench 'Write|ReadHotCold' -benchtime 3x -count 3 ./diskbench
//	go test -run '^$' -bench 'IndexSearch|FindBatch' -count 3 ./diskbench
//
// (the first kind makes one round an iteration, about a second each; the
// second makes one lookup an iteration). Each reports its figures with
// b.ReportMetric, so one line holds both sides and their ratio; the
// figures that travel are the ratios.
package diskbench
