package commitlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrLogExists: Create was asked for a partition that already has a log.
	ErrLogExists = errors.New("commitlog: log already exists")
	// ErrOffline: the partition's log could not be opened at start-up;
	// the error wrapping it says why. Kafka answers KAFKA_STORAGE_ERROR.
	ErrOffline = errors.New("commitlog: partition offline")
)

// lockFile keeps two processes from using one log directory (Kafka's .lock).
const lockFile = ".lock"

// deleteDirSuffix marks a partition directory being deleted.
const deleteDirSuffix = "-delete"

// ManagerOptions are the parts of a Manager that are not Kafka configuration.
type ManagerOptions struct {
	// RetentionLimit returns the offset retention may not delete past: the
	// partition's high watermark (stage 03). nil means the log end offset,
	// right for a partition with a single replica.
	RetentionLimit func(tp TopicPartition, l *Log) int64
	// CleanLimit returns the offset the log cleaner may not reach; nil
	// means RetentionLimit's. Stage 04 passes the last stable offset: a
	// record of a transaction not yet decided must not shadow an older
	// value of its key, since the transaction may still abort (Kafka's
	// cleaner stops at the first unstable offset too).
	CleanLimit func(tp TopicPartition, l *Log) int64
	// StartOffsetAdvanced, if set, is called after retention has moved a
	// log's start offset (deleted segments from its head), with no lock
	// held: stage 03 forgets the leader epochs that ended before it, as
	// Kafka's log truncates its leader-epoch cache from the start.
	StartOffsetAdvanced func(tp TopicPartition, l *Log, start int64)
	// TopicConfig returns the config for a partition's log when the Manager
	// opens it at start-up: the broker's defaults with the topic's own
	// overrides. nil means cfg.Log for every topic.
	TopicConfig func(topic string) Config
	// Now is the logs' clock; time.Now if nil.
	Now func() time.Time
	// Logger; slog.Default if nil.
	Logger *slog.Logger
}

// Manager owns one log directory, as Kafka's LogManager owns each of
// log.dirs: it opens every partition's log in it at start-up (recovering
// them after an unclean shutdown), creates and deletes logs, runs retention
// and time-based flushes in the background, writes the recovery point and
// log start offset checkpoints, and marks a clean shutdown on Close.
type Manager struct {
	dir  string
	cfg  ManagerConfig
	opts ManagerOptions
	lock *os.File // holds the flock on dir/.lock

	mu       sync.Mutex
	logs     map[TopicPartition]*Log  // Protected by mu.
	offline  map[TopicPartition]error // logs that failed to open, and why. Protected by mu.
	creating map[TopicPartition]bool  // logs being created by Create. Protected by mu.
	removing map[TopicPartition]bool  // logs out of logs but whose directory is not renamed yet. Protected by mu.
	deleting map[*Log]*pendingDelete  // deleted logs waiting out file.delete.delay.ms. Protected by mu.
	closed   bool                     // Protected by mu.
	// uncleanables are the logs a cleaning failed on, and why: the
	// cleaner leaves them alone until a restart. Protected by mu.
	uncleanables map[TopicPartition]error

	cleanerMu sync.Mutex // held for a cleaning round: rounds never overlap
	// checkpointMu serializes the writers of the directory's checkpoint
	// files (recovery point, log start offset, cleaner offsets): the
	// background loop, the cleaner after a round, Close, any caller of
	// Checkpoint. Each writer takes its snapshot and writes it with
	// checkpointMu held, so an older snapshot never replaces a newer
	// one, and two writes never share the temporary file. It is held
	// across the writes' fsyncs; mu is not, so Get, Create and Delete
	// never wait for a checkpoint.
	checkpointMu sync.Mutex

	stop chan struct{}  // closed by Close to end the background loop
	done sync.WaitGroup // the background loop
}

// OpenManager opens the log directory dir and every partition log in it.
func OpenManager(dir string, cfg ManagerConfig, opts ManagerOptions) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TopicConfig == nil {
		opts.TopicConfig = func(string) Config { return cfg.Log }
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log directory: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	m := &Manager{dir: dir, cfg: cfg, opts: opts, lock: lock, logs: map[TopicPartition]*Log{},
		offline: map[TopicPartition]error{}, creating: map[TopicPartition]bool{}, removing: map[TopicPartition]bool{}, deleting: map[*Log]*pendingDelete{},
		uncleanables: map[TopicPartition]error{}, stop: make(chan struct{})}
	if err := m.loadLogs(); err != nil {
		for _, l := range m.logs {
			l.Close()
		}
		lock.Close()
		return nil, err
	}
	m.done.Add(1)
	go m.background()
	if cfg.CleanerEnable {
		m.done.Add(1)
		go m.cleanerLoop()
	}
	return m, nil
}

// lockDir takes an exclusive flock on dir/.lock.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock log directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("log directory %s is in use by another process: %w", dir, err)
	}
	return f, nil
}

func (m *Manager) loadLogs() error {
	marker := filepath.Join(m.dir, CleanShutdownFile)
	_, err := os.Stat(marker)
	clean := err == nil
	recoveryPoints, err := ReadOffsetCheckpoint(filepath.Join(m.dir, RecoveryPointCheckpointFile))
	if err != nil {
		return err
	}
	startOffsets, err := ReadOffsetCheckpoint(filepath.Join(m.dir, LogStartOffsetCheckpointFile))
	if err != nil {
		return err
	}
	cleanerPoints, err := ReadOffsetCheckpoint(filepath.Join(m.dir, CleanerOffsetCheckpointFile))
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return fmt.Errorf("open log directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if strings.HasSuffix(e.Name(), deleteDirSuffix) {
			// A deletion a crash interrupted: finish it.
			if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
				return fmt.Errorf("remove deleted log %s: %w", e.Name(), err)
			}
			continue
		}
		tp, err := ParseTopicPartition(e.Name())
		if err != nil {
			m.opts.Logger.Warn("ignoring directory that is not a partition log", "dir", e.Name())
			continue
		}
		if !clean {
			m.opts.Logger.Info("recovering log after unclean shutdown", "partition", tp, "recovery_point", recoveryPoints[tp])
		}
		l, err := Open(filepath.Join(m.dir, e.Name()), m.opts.TopicConfig(tp.Topic), Options{
			RecoveryPoint:    recoveryPoints[tp],
			LogStartOffset:   startOffsets[tp],
			CleanShutdown:    clean,
			Now:              m.opts.Now,
			Logger:           m.opts.Logger,
			FirstDirtyOffset: cleanerPoints[tp],
		})
		if err != nil {
			// One log that cannot open must not keep the others from
			// serving: it goes offline, as Kafka takes a failed log
			// directory offline, and the operator is told why.
			m.opts.Logger.Error("partition offline: its log cannot be opened", "partition", tp, "err", err)
			m.offline[tp] = fmt.Errorf("%w: %s: %w", ErrOffline, tp, err)
			continue
		}
		m.logs[tp] = l
	}
	// From now on a crash must lead to recovery.
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove clean shutdown marker: %w", err)
	}
	return nil
}

// Dir is the log directory.
func (m *Manager) Dir() string { return m.dir }

// Get returns a partition's log.
func (m *Manager) Get(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Offline lists the partitions whose logs failed to open at start-up, with
// the reason (wrapping ErrOffline).
func (m *Manager) Offline() map[TopicPartition]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]error, len(m.offline))
	for tp, err := range m.offline {
		out[tp] = err
	}
	return out
}

// Partitions lists the partitions with a log, sorted.
func (m *Manager) Partitions() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartition, 0, len(m.logs))
	for tp := range m.logs {
		out = append(out, tp)
	}
	slices.SortFunc(out, TopicPartition.Compare)
	return out
}

// Create creates an empty log for a partition. The directory's files are
// created without the Manager's lock held, so creating many partitions
// does not stall Get or the background work.
func (m *Manager) Create(tp TopicPartition, cfg Config) (*Log, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := m.logs[tp]; ok || m.creating[tp] {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrLogExists, tp)
	}
	if m.removing[tp] {
		// Its old directory still has the name: opening it would adopt
		// the old log, which the deletion then renames away.
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is being deleted", ErrLogExists, tp)
	}
	if err, ok := m.offline[tp]; ok {
		m.mu.Unlock()
		return nil, err
	}
	m.creating[tp] = true
	m.mu.Unlock()

	l, err := Open(filepath.Join(m.dir, tp.String()), cfg, Options{Now: m.opts.Now, Logger: m.opts.Logger})

	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creating, tp)
	if err != nil {
		return nil, err
	}
	if m.closed {
		return nil, errors.Join(ErrClosed, l.Close())
	}
	m.logs[tp] = l
	return l, nil
}

// pendingDelete is a deleted log whose files wait out file.delete.delay.ms.
type pendingDelete struct {
	dir   string // the renamed directory, "<topic>-<partition>.<id>-delete"
	timer *time.Timer
}

// Delete deletes a partition's log as Kafka's LogManager.asyncDelete does:
// the log stops taking appends and reads at once and its directory is
// renamed "<topic>-<partition>.<id>-delete" (a crash from here on finishes
// the deletion at the next start); its files are closed and removed after
// file.delete.delay.ms, so that a fetch response still being written from
// them completes.
func (m *Manager) Delete(tp TopicPartition) error {
	l := m.takeOut(tp)
	if l == nil {
		return nil
	}
	doomed := filepath.Join(m.dir, fmt.Sprintf("%s.%d%s", tp, time.Now().UnixNano(), deleteDirSuffix))
	err := os.Rename(l.Dir(), doomed)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.removing, tp) // the name is free (or, after an error, the log is gone anyway)
	if err != nil {
		return errors.Join(fmt.Errorf("delete log %s: %w", tp, err), l.release())
	}
	if m.closed { // Close ran meanwhile: do not leave the files to a timer
		return m.finishDelete(l, doomed)
	}
	pd := &pendingDelete{dir: doomed}
	pd.timer = time.AfterFunc(l.Config().FileDeleteDelay, func() {
		m.mu.Lock()
		_, pending := m.deleting[l]
		delete(m.deleting, l)
		m.mu.Unlock()
		if pending { // else Close got there first
			if err := m.finishDelete(l, doomed); err != nil {
				m.opts.Logger.Error("delete log", "dir", doomed, "err", err)
			}
		}
	})
	m.deleting[l] = pd
	return nil
}

// DeleteNow deletes a partition's log at once, files and directory, for a
// log that was never handed out (a topic creation rolled back); Delete is
// for every other case.
func (m *Manager) DeleteNow(tp TopicPartition) error {
	l := m.takeOut(tp)
	if l == nil {
		return nil
	}
	err := m.finishDelete(l, l.Dir())
	m.mu.Lock()
	delete(m.removing, tp)
	m.mu.Unlock()
	return err
}

// DeleteOffline removes the directory of a partition whose log is offline
// (it could not be opened), as a topic deletion does, freeing its name.
func (m *Manager) DeleteOffline(tp TopicPartition) error {
	m.mu.Lock()
	if _, ok := m.offline[tp]; !ok {
		m.mu.Unlock()
		return nil
	}
	delete(m.offline, tp)
	m.removing[tp] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.removing, tp)
		m.mu.Unlock()
	}()
	doomed := filepath.Join(m.dir, fmt.Sprintf("%s.%d%s", tp, time.Now().UnixNano(), deleteDirSuffix))
	if err := os.Rename(filepath.Join(m.dir, tp.String()), doomed); err != nil {
		return fmt.Errorf("delete offline log %s: %w", tp, err)
	}
	return os.RemoveAll(doomed)
}

// takeOut removes a partition's log from the Manager and retires it, for
// deletion; nil if there is none. Until the caller clears removing, Create
// refuses the partition.
func (m *Manager) takeOut(tp TopicPartition) *Log {
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	delete(m.uncleanables, tp)
	if ok {
		m.removing[tp] = true
	}
	m.mu.Unlock()
	if !ok {
		return nil
	}
	l.retire()
	return l
}

// finishDelete closes a deleted log's files and removes its directory.
func (m *Manager) finishDelete(l *Log, dir string) error {
	return errors.Join(l.release(), os.RemoveAll(dir))
}

// snapshot returns the open logs.
func (m *Manager) snapshot() map[TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// DeleteOldSegments applies retention to every log; the background loop
// calls it every log.retention.check.interval.ms.
func (m *Manager) DeleteOldSegments() (int, error) {
	total := 0
	var errs []error
	for tp, l := range m.snapshot() {
		limit := l.EndOffset()
		if m.opts.RetentionLimit != nil {
			limit = m.opts.RetentionLimit(tp, l)
		}
		n, err := l.DeleteOldSegments(limit)
		total += n
		if n > 0 && m.opts.StartOffsetAdvanced != nil {
			m.opts.StartOffsetAdvanced(tp, l, l.StartOffset())
		}
		if err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, fmt.Errorf("retention for %s: %w", tp, err))
		}
	}
	return total, errors.Join(errs...)
}

// FlushDue flushes every log whose last flush is older than its flush.ms.
func (m *Manager) FlushDue() error {
	var errs []error
	for tp, l := range m.snapshot() {
		l.mu.RLock()
		due := l.cfg.FlushMs != Never && l.now().Sub(l.lastFlush) >= l.cfg.FlushMs
		l.mu.RUnlock()
		if due {
			if err := l.Flush(); err != nil && !errors.Is(err, ErrClosed) {
				errs = append(errs, fmt.Errorf("flush %s: %w", tp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Checkpoint writes the recovery point and log start offset of every log,
// and the cleaner's checkpoint of every compacted log (a truncation may
// have lowered it). Calls wait for each other (checkpointMu), never for
// the Manager's lock.
func (m *Manager) Checkpoint() error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	logs := m.snapshot()
	points := make(map[TopicPartition]int64, len(logs))
	starts := make(map[TopicPartition]int64, len(logs))
	for tp, l := range logs {
		points[tp], starts[tp] = l.RecoveryPoint(), l.StartOffset()
	}
	return errors.Join(
		WriteOffsetCheckpoint(filepath.Join(m.dir, RecoveryPointCheckpointFile), points),
		WriteOffsetCheckpoint(filepath.Join(m.dir, LogStartOffsetCheckpointFile), starts),
		m.writeCleanerCheckpointLocked())
}

// background runs retention, time-based flushes and checkpoints on Kafka's
// intervals until Close.
func (m *Manager) background() {
	defer m.done.Done()
	tick := func(d time.Duration) <-chan time.Time {
		if d <= 0 || d == Never {
			return nil // a nil channel never fires
		}
		t := time.NewTicker(d)
		go func() { <-m.stop; t.Stop() }()
		return t.C
	}
	retention := tick(m.cfg.RetentionCheckInterval)
	flush := tick(m.cfg.FlushCheckInterval)
	checkpoint := tick(min(m.cfg.RecoveryPointCheckpointInterval, m.cfg.LogStartOffsetCheckpointInterval))
	for {
		var err error
		select {
		case <-m.stop:
			return
		case <-retention:
			_, err = m.DeleteOldSegments()
		case <-flush:
			err = m.FlushDue()
		case <-checkpoint:
			err = m.Checkpoint()
		}
		if err != nil {
			m.opts.Logger.Error("log manager background task", "err", err)
		}
	}
}

// Close shuts the directory down cleanly: every log is flushed and closed,
// the checkpoints are written, and only then the clean shutdown marker, so
// that the next start can trust all of it and skip recovery.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.done.Wait()

	var errs []error
	logs := m.snapshot()
	for tp, l := range logs {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", tp, err))
		}
	}
	m.mu.Lock()
	deleting := m.deleting
	m.deleting = nil
	m.mu.Unlock()
	for l, pd := range deleting {
		pd.timer.Stop()
		errs = append(errs, m.finishDelete(l, pd.dir))
	}
	errs = append(errs, m.Checkpoint())
	if err := errors.Join(errs...); err != nil {
		m.lock.Close()
		return err // no marker: the next start recovers
	}
	f, err := os.Create(filepath.Join(m.dir, CleanShutdownFile))
	if err == nil {
		err = errors.Join(f.Close(), syncDir(m.dir))
	}
	return errors.Join(err, m.lock.Close())
}
