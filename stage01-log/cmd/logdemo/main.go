// Command logdemo shows the stage 01 log at work: it writes batches into a
// partition log, rolling segments, then crashes in the middle of an append
// (a child process really exits half-way through writing a batch), reopens
// the log, and prints what recovery found and kept. Finally it shuts down
// cleanly and reopens once more, skipping recovery.
//
//	go run ./stage01-log/cmd/logdemo [-dir DIR] [-batches N] [-segment-bytes N]
//
// The log directory is left behind so you can read it with dumplog.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// childEnv tells a re-executed logdemo to play the process that crashes;
// its value is "dir,batches,segment.bytes".
const childEnv = "LOGDEMO_CRASHING_WRITER"

var tp = commitlog.TopicPartition{Topic: "orders", Partition: 0}

func main() {
	dir := flag.String("dir", "", "log directory (default: a new temporary directory)")
	batches := flag.Int("batches", 200, "batches to write before the crash")
	segmentBytes := flag.Int64("segment-bytes", 16<<10, "segment.bytes, small so the log rolls often")
	flag.Parse()

	if maybeCrashingWriter() {
		return
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "logdemo-")
		check(err)
		*dir = d
	}
	if err := run(os.Stdout, *dir, demoConfig(*segmentBytes), *batches); err != nil {
		fmt.Fprintln(os.Stderr, "logdemo:", err)
		os.Exit(1)
	}
}

func demoConfig(segmentBytes int64) commitlog.ManagerConfig {
	cfg := commitlog.DefaultManagerConfig()
	cfg.Log.SegmentBytes = segmentBytes
	cfg.Log.IndexIntervalBytes = 1024
	return cfg
}

// maybeCrashingWriter plays the child if this process is one.
func maybeCrashingWriter() bool {
	v := os.Getenv(childEnv)
	if v == "" {
		return false
	}
	var dir string
	var batches int
	var segmentBytes int64
	_, err := fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%s %d %d", &dir, &batches, &segmentBytes)
	check(err)
	crashingWriter(dir, demoConfig(segmentBytes), batches)
	return true
}

func run(w io.Writer, dir string, cfg commitlog.ManagerConfig, batches int) error {
	out = w
	step(1, "A child process writes %d batches of 5 records to %s, segment.bytes=%d", batches, tp, cfg.Log.SegmentBytes)
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", childEnv, dir, batches, cfg.Log.SegmentBytes))
	child.Stdout, child.Stderr = w, os.Stderr
	err := child.Run()
	printf("   the child exited: %v\n", err)

	step(2, "What the crash left on disk")
	logDir := filepath.Join(dir, tp.String())
	showDir(dir, logDir)
	segs := listSegments(logDir)
	lastBefore := fileSize(segs[len(segs)-1])

	step(3, "Reopening: no %s marker, so the log is recovered from its recovery point", commitlog.CleanShutdownFile)
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	start := time.Now()
	m, err := commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{Logger: logger})
	if err != nil {
		return err
	}
	l, _ := m.Get(tp)
	printf("   opened in %v: offsets [%d, %d) in %d segments\n", time.Since(start).Round(time.Microsecond),
		l.StartOffset(), l.EndOffset(), len(l.Segments()))
	lastAfter := fileSize(segs[len(segs)-1])
	printf("   recovery kept every whole batch and cut %d torn bytes from %s\n",
		lastBefore-lastAfter, filepath.Base(segs[len(segs)-1]))

	step(4, "The log is appendable where the torn batch began")
	first, last, err := l.Append(orderBatch(batches))
	if err != nil {
		return err
	}
	printf("   appended offsets %d..%d\n", first, last)
	if err := printTail(l, 3); err != nil {
		return err
	}

	step(5, "Clean shutdown writes the checkpoints, then the marker")
	if err := m.Close(); err != nil {
		return err
	}
	showFile(filepath.Join(dir, commitlog.RecoveryPointCheckpointFile))
	printf("   %s exists: %v\n", commitlog.CleanShutdownFile, exists(filepath.Join(dir, commitlog.CleanShutdownFile)))

	step(6, "Reopening after a clean shutdown: no recovery, nothing scanned")
	start = time.Now()
	m, err = commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{Logger: logger})
	if err != nil {
		return err
	}
	l, _ = m.Get(tp)
	printf("   opened in %v: offsets [%d, %d)\n", time.Since(start).Round(time.Microsecond), l.StartOffset(), l.EndOffset())
	if err := m.Close(); err != nil {
		return err
	}

	printf("\nRead the segments yourself:\n   go run ./stage01-log/cmd/dumplog --print-data-log --files %s\n",
		strings.Join(listSegments(logDir)[:1], ","))
	return nil
}

// crashingWriter runs in the child: it appends, checkpoints the recovery
// point half-way (as Kafka's periodic checkpoint would), then writes half a
// batch straight into the active segment and exits without closing anything.
func crashingWriter(dir string, cfg commitlog.ManagerConfig, batches int) {
	m, err := commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{Logger: slog.New(slog.DiscardHandler)})
	check(err)
	l, err := m.Create(tp, cfg.Log)
	check(err)
	for i := range batches {
		_, _, err := l.Append(orderBatch(i))
		check(err)
		if i == batches/2 {
			// Kafka checkpoints recovery points every 60 s. Here: once,
			// after the flush that follows a roll has moved the point.
			for deadline := time.Now().Add(5 * time.Second); l.RecoveryPoint() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			check(m.Checkpoint())
			data, err := os.ReadFile(filepath.Join(dir, commitlog.RecoveryPointCheckpointFile))
			check(err)
			printf("   [child] after batch %d, checkpointed the recovery point: %q\n", i, data)
		}
	}
	printf("   [child] wrote offsets [0, %d) in %d segments\n", l.EndOffset(), len(l.Segments()))

	segs := l.Segments()
	active := segs[len(segs)-1].Path
	torn := orderBatch(batches)
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	check(err)
	_, err = f.Write(torn[:len(torn)/3])
	check(err)
	printf("   [child] wrote %d of the %d bytes of the next batch into %s ... and dies\n",
		len(torn)/3, len(torn), filepath.Base(active))
	os.Exit(3) // no Close: no flush, no checkpoint, no clean-shutdown marker
}

// orderBatch is batch i: five orders with a key and a JSON value.
func orderBatch(i int) []byte {
	b := record.NewBatch(time.Now().UnixMilli())
	for j := range 5 {
		n := i*5 + j
		b.Records = append(b.Records, record.Record{
			OffsetDelta: int32(j),
			Key:         []byte(fmt.Sprintf("customer-%d", n%7)),
			Value:       []byte(fmt.Sprintf(`{"order":%d,"amount":%d.%02d}`, n, 10+n%90, n%100)),
		})
	}
	data, err := record.AppendBatch(nil, b)
	check(err)
	return data
}

// printTail prints the last n records of the log, read back through Read.
func printTail(l *commitlog.Log, n int64) error {
	from := l.EndOffset() - n
	region, err := l.Read(from, 1<<20)
	if err != nil {
		return err
	}
	data, err := region.Bytes()
	if err != nil {
		return err
	}
	printf("   Read(%d) returned %s position %d, %d bytes; its last records:\n",
		from, filepath.Base(region.File.Name()), region.Pos, region.Size)
	for len(data) > 0 {
		h, err := record.Validate(data)
		if err != nil {
			break
		}
		it, err := record.NewIterator(data)
		if err != nil {
			return err
		}
		for it.Next() {
			r := it.Record()
			if off := h.BaseOffset + int64(r.OffsetDelta); off >= from {
				printf("     offset %d key=%s value=%s\n", off, r.Key, r.Value)
			}
		}
		data = data[h.Size():]
	}
	return nil
}

// out is where the demo writes: stdout, or a test's buffer.
var out io.Writer = os.Stdout

func printf(format string, args ...any) { fmt.Fprintf(out, format, args...) }

func step(n int, format string, args ...any) {
	printf("\n== %d. %s\n", n, fmt.Sprintf(format, args...))
}

func showDir(dir, logDir string) {
	for _, d := range []string{dir, logDir} {
		entries, err := os.ReadDir(d)
		check(err)
		var names []string
		for _, e := range entries {
			if !e.IsDir() {
				names = append(names, e.Name())
			}
		}
		if d == logDir && len(names) > 6 {
			names = append(names[:3], append([]string{"..."}, names[len(names)-3:]...)...)
		}
		printf("   %s: %s\n", filepath.Base(d), strings.Join(names, " "))
	}
	showFile(filepath.Join(dir, commitlog.RecoveryPointCheckpointFile))
	printf("   %s exists: %v\n", commitlog.CleanShutdownFile, exists(filepath.Join(dir, commitlog.CleanShutdownFile)))
}

func showFile(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		printf("   %s: %v\n", filepath.Base(path), err)
		return
	}
	printf("   %s: %q\n", filepath.Base(path), data)
}

func listSegments(logDir string) []string {
	paths, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	check(err)
	return paths
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	check(err)
	return fi.Size()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "logdemo:", err)
		os.Exit(1)
	}
}
