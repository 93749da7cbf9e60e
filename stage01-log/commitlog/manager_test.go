package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func openTestManager(t *testing.T, dir string, cfg ManagerConfig) *Manager {
	t.Helper()
	m, err := OpenManager(dir, cfg, ManagerOptions{Logger: quietLogger})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func managerConfig() ManagerConfig {
	cfg := DefaultManagerConfig()
	cfg.Log = smallConfig()
	return cfg
}

func TestManagerFindsItsLogsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	var want [][]byte
	for p := range 3 {
		l, err := m.Create(TopicPartition{"orders", int32(p)}, managerConfig().Log)
		require.NoError(t, err)
		for i := range 10 {
			b := makeBatch(t, i, 2, 100, 0)
			_, _, err := l.Append(b)
			require.NoError(t, err)
			if p == 1 {
				want = append(want, b)
			}
		}
	}
	_, err := m.Create(TopicPartition{"orders", 0}, managerConfig().Log)
	require.ErrorIs(t, err, ErrLogExists)
	require.NoError(t, m.Close())
	require.FileExists(t, filepath.Join(dir, CleanShutdownFile))

	m = openTestManager(t, dir, managerConfig())
	require.NoFileExists(t, filepath.Join(dir, CleanShutdownFile), "a crash from now on must recover")
	require.Equal(t, []TopicPartition{{"orders", 0}, {"orders", 1}, {"orders", 2}}, m.Partitions())
	l, ok := m.Get(TopicPartition{"orders", 1})
	require.True(t, ok)
	require.Equal(t, want, readAll(t, l, 0))
}

func TestManagerWritesCheckpointsOnClose(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	l, err := m.Create(TopicPartition{"t", 0}, managerConfig().Log)
	require.NoError(t, err)
	for i := range 5 {
		_, _, err := l.Append(makeBatch(t, i, 2, 10, 0))
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())
	points, err := ReadOffsetCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{{"t", 0}: 10}, points)
	starts, err := ReadOffsetCheckpoint(filepath.Join(dir, LogStartOffsetCheckpointFile))
	require.NoError(t, err)
	require.Equal(t, map[TopicPartition]int64{{"t", 0}: 0}, starts)
}

func TestManagerRecoversAfterACrash(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	l, err := m.Create(TopicPartition{"t", 0}, managerConfig().Log)
	require.NoError(t, err)
	for i := range 40 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
		require.NoError(t, err)
	}
	end := l.EndOffset()
	// The process dies: no Close, no marker. A torn write is left behind.
	segs := l.Segments()
	f, err := os.OpenFile(segs[len(segs)-1].Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(makeBatch(t, 99, 2, 100, 0)[:50])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	m.lock.Close() // what the kernel does when the process dies

	m2, err := OpenManager(dir, managerConfig(), ManagerOptions{Logger: quietLogger})
	require.NoError(t, err)
	defer m2.Close()
	l2, ok := m2.Get(TopicPartition{"t", 0})
	require.True(t, ok)
	require.Equal(t, end, l2.EndOffset())
	require.Equal(t, segs[len(segs)-1].Size, l2.Segments()[len(segs)-1].Size, "the torn tail is cut off")
}

func TestManagerLocksItsDirectory(t *testing.T) {
	dir := t.TempDir()
	openTestManager(t, dir, managerConfig())
	_, err := OpenManager(dir, managerConfig(), ManagerOptions{Logger: quietLogger})
	require.ErrorContains(t, err, "in use by another process")
}

func TestManagerDeleteRemovesTheLog(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	tp := TopicPartition{"gone", 0}
	_, err := m.Create(tp, managerConfig().Log)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "old-0.123-delete"), 0o755))
	require.NoError(t, m.Delete(tp))
	_, ok := m.Get(tp)
	require.False(t, ok)
	require.NoDirExists(t, filepath.Join(dir, "gone-0"))
	require.NoError(t, m.Close())

	openTestManager(t, dir, managerConfig())
	require.NoDirExists(t, filepath.Join(dir, "old-0.123-delete"), "an interrupted deletion is finished at start-up")
}

// TestManagerDeleteLetsAResponseInFlightFinish: deleting a topic while a
// fetch response is still being written from its log must not cut the
// response off: the files close file.delete.delay.ms later.
func TestManagerDeleteLetsAResponseInFlightFinish(t *testing.T) {
	dir := t.TempDir()
	cfg := managerConfig()
	cfg.Log.FileDeleteDelay = 100 * time.Millisecond
	m := openTestManager(t, dir, cfg)
	tp := TopicPartition{"doomed", 0}
	l, err := m.Create(tp, cfg.Log)
	require.NoError(t, err)
	for i := range 10 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
		require.NoError(t, err)
	}
	region, err := l.Read(0, 1<<20)
	require.NoError(t, err)
	want, err := region.Bytes()
	require.NoError(t, err)

	require.NoError(t, m.Delete(tp))
	_, _, err = l.Append(makeBatch(t, 99, 1, 10, 0))
	require.ErrorIs(t, err, ErrClosed, "a deleted log takes no appends")
	got, err := region.Bytes()
	require.NoError(t, err, "the response in flight still reads its region")
	require.Equal(t, want, got)

	require.Eventually(t, func() bool {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if e.IsDir() {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the directory goes after file.delete.delay.ms")
	_, err = region.Bytes()
	require.Error(t, err, "and the file is closed")
}

func TestManagerRunsRetentionInTheBackground(t *testing.T) {
	cfg := managerConfig()
	cfg.Log.RetentionBytes = 0
	cfg.Log.FileDeleteDelay = time.Millisecond
	cfg.RetentionCheckInterval = 10 * time.Millisecond
	m := openTestManager(t, t.TempDir(), cfg)
	l, err := m.Create(TopicPartition{"t", 0}, cfg.Log)
	require.NoError(t, err)
	for i := range 40 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return l.StartOffset() > 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestRetentionStopsAtTheLimitAndReportsTheNewStart: a replicated
// partition's retention may not pass its high watermark (RetentionLimit),
// and whoever keeps state by offset learns the new log start
// (StartOffsetAdvanced).
func TestRetentionStopsAtTheLimitAndReportsTheNewStart(t *testing.T) {
	cfg := managerConfig()
	cfg.Log.RetentionBytes = 0
	cfg.Log.FileDeleteDelay = time.Millisecond
	var advanced []int64
	limit := int64(50)
	m, err := OpenManager(t.TempDir(), cfg, ManagerOptions{Logger: quietLogger,
		RetentionLimit:      func(TopicPartition, *Log) int64 { return limit },
		StartOffsetAdvanced: func(_ TopicPartition, _ *Log, start int64) { advanced = append(advanced, start) }})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	l, err := m.Create(TopicPartition{"t", 0}, cfg.Log)
	require.NoError(t, err)
	for i := range 40 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
		require.NoError(t, err)
	}
	_, err = m.DeleteOldSegments()
	require.NoError(t, err)
	require.Positive(t, l.StartOffset())
	require.LessOrEqual(t, l.StartOffset(), limit, "nothing at or past the limit is deleted")
	require.Equal(t, []int64{l.StartOffset()}, advanced)
	n, err := m.DeleteOldSegments()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, advanced, 1, "told only when the start moves")
}

// TestDamageFoundOnStartStaysWithItsPartition: a clean-shutdown marker
// promises the logs are whole, but a disk or a hand can break one after.
// The damaged tail is recovered away (a torn batch, garbage, a wrong
// magic), the log that cannot be opened at all goes offline with its
// reason, and every other partition serves as before.
func TestDamageFoundOnStartStaysWithItsPartition(t *testing.T) {
	damages := map[string]func(t *testing.T, segment string){
		"torn batch": func(t *testing.T, segment string) {
			appendToFile(t, segment, makeBatch(t, 99, 3, 100, 0)[:80])
		},
		"garbage": func(t *testing.T, segment string) {
			appendToFile(t, segment, []byte("this is not a record batch, but bytes someone wrote here at the end"))
		},
		"unsupported magic": func(t *testing.T, segment string) {
			b := makeBatch(t, 99, 1, 10, 0)
			b[16] = 7
			appendToFile(t, segment, b)
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := managerConfig()
			m := openTestManager(t, dir, cfg)
			ends := map[TopicPartition]int64{}
			for _, tp := range []TopicPartition{{"good", 0}, {"hurt", 0}, {"broken", 0}} {
				l, err := m.Create(tp, cfg.Log)
				require.NoError(t, err)
				for i := range 10 {
					_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
					require.NoError(t, err)
				}
				ends[tp] = l.EndOffset()
			}
			require.NoError(t, m.Close())
			require.FileExists(t, filepath.Join(dir, CleanShutdownFile))

			segs, err := filepath.Glob(filepath.Join(dir, "hurt-0", "*.log"))
			require.NoError(t, err)
			damage(t, segs[len(segs)-1]) // the active segment
			require.NoError(t, os.WriteFile(filepath.Join(dir, "broken-0", "not-an-offset.log"), nil, 0o644))

			m = openTestManager(t, dir, cfg)
			for _, tp := range []TopicPartition{{"good", 0}, {"hurt", 0}} {
				l, ok := m.Get(tp)
				require.True(t, ok, "%s serves", tp)
				require.Equal(t, ends[tp], l.EndOffset(), "%s keeps every whole batch", tp)
				_, _, err := l.Append(makeBatch(t, 50, 1, 10, 0))
				require.NoError(t, err)
				require.Len(t, readAll(t, l, 0), 11)
			}
			_, ok := m.Get(TopicPartition{"broken", 0})
			require.False(t, ok)
			offline := m.Offline()
			require.Len(t, offline, 1)
			require.ErrorIs(t, offline[TopicPartition{"broken", 0}], ErrOffline)
			require.ErrorContains(t, offline[TopicPartition{"broken", 0}], "not-an-offset.log is not named by a base offset")
			_, err = m.Create(TopicPartition{"broken", 0}, cfg.Log)
			require.ErrorIs(t, err, ErrOffline, "an offline partition is not created over")
		})
	}
}

func appendToFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestATopicDeletedAndCreatedAgainKeepsItsNewLog: deleting a topic and
// creating it again within file.delete.delay.ms puts a new log at the old
// log's directory name; the old log closing later must not touch it.
func TestATopicDeletedAndCreatedAgainKeepsItsNewLog(t *testing.T) {
	cfg := managerConfig()
	cfg.Log.FileDeleteDelay = 20 * time.Millisecond
	dir := t.TempDir()
	m := openTestManager(t, dir, cfg)
	tp := TopicPartition{"again", 0}
	l, err := m.Create(tp, cfg.Log)
	require.NoError(t, err)
	_, _, err = l.Append(makeBatch(t, 0, 1, 10, 0)) // one small batch: no index entry
	require.NoError(t, err)
	require.NoError(t, m.Delete(tp))
	l, err = m.Create(tp, cfg.Log)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), deleteDirSuffix) {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the old log's directory is removed")
	for i := range 40 {
		_, _, err := l.Append(makeBatch(t, i, 2, 100, 0))
		require.NoError(t, err)
	}
	require.Len(t, readAll(t, l, 0), 40)
}

// TestConcurrentCheckpointsLeaveWholeFiles: checkpoints are written from
// several goroutines (the background loop, the cleaner after a round, a
// caller of Checkpoint). Every write goes through the same temporary
// file, so two at once used to truncate and overwrite each other's file,
// fail each other's rename, or rename an older snapshot over a newer one.
// With the writers serialized, every write succeeds, a reader always
// finds a whole file, and the recovery point it reads never goes back.
func TestConcurrentCheckpointsLeaveWholeFiles(t *testing.T) {
	dir := t.TempDir()
	m := openTestManager(t, dir, managerConfig())
	var logs []*Log
	for p := range 40 {
		l, err := m.Create(TopicPartition{"a-topic-with-a-long-name-so-that-the-files-are-long", int32(p)}, managerConfig().Log)
		require.NoError(t, err)
		logs = append(logs, l)
	}
	tp0 := TopicPartition{"a-topic-with-a-long-name-so-that-the-files-are-long", 0}
	path := filepath.Join(dir, RecoveryPointCheckpointFile)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	wg.Add(1)
	go func() { // the recovery point of tp0 only moves up
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := logs[0].Append(makeBatch(t, i, 1, 10, 0)); err != nil {
				report(err)
				return
			}
			if err := logs[0].Flush(); err != nil {
				report(err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // a reader of the file, as a restart would read it
		defer wg.Done()
		last := int64(-1)
		for {
			select {
			case <-stop:
				return
			default:
			}
			points, err := ReadOffsetCheckpoint(path)
			if err != nil {
				report(fmt.Errorf("a reader found a torn checkpoint: %w", err))
				return
			}
			if len(points) == 0 {
				continue // not written yet
			}
			if len(points) != len(logs) {
				report(fmt.Errorf("a reader found %d partitions in the checkpoint, want %d", len(points), len(logs)))
				return
			}
			if points[tp0] < last {
				report(fmt.Errorf("the recovery point went back from %d to %d: an older snapshot replaced a newer one", last, points[tp0]))
				return
			}
			last = points[tp0]
		}
	}()
	var writers sync.WaitGroup
	for range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for range 25 {
				if err := m.Checkpoint(); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	points, err := ReadOffsetCheckpoint(path)
	require.NoError(t, err)
	require.Len(t, points, len(logs))
}
