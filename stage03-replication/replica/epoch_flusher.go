package replica

import (
	"errors"
	"sync"
	"sync/atomic"
)

// epochFlushers is how many leader epoch checkpoints epochFlushLoop writes
// at once: each write waits for two fsyncs (the file, its directory), and
// a file system commits concurrent fsyncs together, so a LeaderAndIsr that
// made thousands of leaders is written several times faster than one file
// after another.
const epochFlushers = 16

// epochFlusher holds the leader epoch caches whose new entries MakeLeader
// left in memory: a LeaderAndIsr hands them over in one batch, and
// epochFlushLoop writes them. Until then a leader's first append writes
// its own (AppendAsLeaderMinISR), so no batch reaches a log before its
// epoch's entry reaches the checkpoint.
type epochFlusher struct {
	mu      sync.Mutex
	pending []*LeaderEpochCache // Protected by mu.
	wake    chan struct{}       // capacity 1: pending grew
}

func (e *epochFlusher) add(caches []*LeaderEpochCache) {
	if len(caches) == 0 {
		return
	}
	e.mu.Lock()
	e.pending = append(e.pending, caches...)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *epochFlusher) take() []*LeaderEpochCache {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.pending
	e.pending = nil
	return out
}

// epochFlushLoop writes the leader epoch checkpoints LeaderAndIsr left in
// memory, as soon as it hands them over; Close writes what is left.
func (m *Manager) epochFlushLoop() {
	defer m.done.Done()
	for {
		select {
		case <-m.stop:
			return
		case <-m.epochs.wake:
			if err := m.flushEpochs(m.epochs.take()); err != nil {
				// The entries stay in memory: the leader's next append
				// tries again, and fails if the disk still does.
				m.logger.Error("leader epoch checkpoint", "err", err)
			}
		}
	}
}

// flushEpochs writes caches, epochFlushers at a time, and returns what
// failed.
func (m *Manager) flushEpochs(caches []*LeaderEpochCache) error {
	var (
		next atomic.Int64
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range min(epochFlushers, len(caches)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(caches)); i = next.Add(1) - 1 {
				if err := caches[i].Flush(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
