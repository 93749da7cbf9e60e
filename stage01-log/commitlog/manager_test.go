package commitlog

import (
	"os"
	"path/filepath"
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
