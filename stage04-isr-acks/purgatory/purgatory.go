package purgatory

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, as Kafka's.
const (
	// DefaultPurgeInterval is how many completed operations may linger in
	// watch lists before the reaper sweeps them out (Kafka's
	// *.purgatory.purge.interval.requests: 1000).
	DefaultPurgeInterval = 1000
	// reaperMaxSleep is the longest the reaper sleeps without looking at
	// the watch lists (Kafka's advanceClock(200L)).
	reaperMaxSleep = 200 * time.Millisecond
	// shards split the watch lists so that operations on different keys
	// rarely share a lock (Kafka: 512 watcher lists).
	shards = 64
)

// Options are a purgatory's settings.
type Options struct {
	// PurgeInterval: DefaultPurgeInterval if 0.
	PurgeInterval int
	// Now is the clock, in milliseconds; a monotonic clock if nil. A
	// purgatory with a Now of its own runs no reaper: the test drives
	// time with Advance.
	Now func() int64
}

// Purgatory holds operations until they complete or expire (Kafka's
// DelayedOperationPurgatory). K is what operations watch: a partition.
type Purgatory[K comparable] struct {
	name          string
	now           func() int64
	timer         *timer
	purgeInterval int64
	seed          maphash.Seed
	watchers      [shards]watcherShard[K]
	// watched counts operations added to watch lists and not yet swept
	// out (completed ones linger until checked or purged).
	watched atomic.Int64

	stop chan struct{} // closed by Shutdown
	done chan struct{} // closed when the reaper has stopped
}

// watcherShard is a share of the watch lists, by key hash.
type watcherShard[K comparable] struct {
	mu    sync.Mutex
	lists map[K][]*delayed // operations watching each key, oldest first. Protected by mu.
}

// New starts a purgatory and, unless opts.Now is set, its reaper: the
// goroutine that expires operations whose deadlines pass and sweeps
// completed ones out of the watch lists.
func New[K comparable](name string, opts Options) *Purgatory[K] {
	if opts.PurgeInterval <= 0 {
		opts.PurgeInterval = DefaultPurgeInterval
	}
	reaper := opts.Now == nil
	if reaper {
		start := time.Now()
		opts.Now = func() int64 { return time.Since(start).Milliseconds() }
	}
	p := &Purgatory[K]{name: name, now: opts.Now, timer: newTimer(opts.Now()), purgeInterval: int64(opts.PurgeInterval),
		seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range p.watchers {
		p.watchers[i].lists = map[K][]*delayed{}
	}
	if reaper {
		go p.reap()
	} else {
		close(p.done)
	}
	return p
}

// Name is the purgatory's name (Produce, Fetch).
func (p *Purgatory[K]) Name() string { return p.name }

func (p *Purgatory[K]) shard(key K) *watcherShard[K] {
	return &p.watchers[maphash.Comparable(p.seed, key)%shards]
}

// build 04.G: the purgatory: try, else watch by key; complete on a check; expire; purge
// tests: TestOperationThatCanCompleteCompletesAtOnce, TestOperationCompletesWhenAKeyItWatchesIsChecked, TestPurgeSweepsOperationsCompletedThroughAnotherKey, TestShutdownExpiresWhatIsPending

// TryCompleteElseWatch completes op now if it can; otherwise it watches op
// under every key and starts its timeout. It reports whether op completed
// here. As in Kafka, op is tried again after it is watched: a change that
// came between the first try and the watch would otherwise be missed,
// since the CheckAndComplete it caused did not see op yet.
func (p *Purgatory[K]) TryCompleteElseWatch(op Operation, timeout time.Duration, keys ...K) bool {
	d := newDelayed(op, p.now()+timeout.Milliseconds())
	d.mu.Lock()
	done := op.TryComplete()
	if !done {
		for _, k := range keys {
			p.watch(k, d)
		}
		// break 04.b2: watch without trying again
		// predict: the partition's high watermark moves after the first try and before the watch: when is the waiting produce answered?
		// tests: TestAChangeBetweenTheFirstTryAndTheWatchIsNotLost, TestOperationCompletesWhenAKeyItWatchesIsChecked
		done = op.TryComplete()
		// broken:
		// _ = done // no second try
		// end break
	}
	if done {
		d.completed.Store(true)
	}
	d.mu.Unlock()
	if done {
		d.finish(false)
		return true
	}
	if !p.timer.add(d.entry) {
		d.expire() // due already (a timeout under one tick), or shut down
	} else if d.completed.Load() {
		d.entry.remove() // completed while being added: do not keep its deadline
	}
	return false
}

func (p *Purgatory[K]) watch(key K, d *delayed) {
	s := p.shard(key)
	s.mu.Lock()
	s.lists[key] = append(s.lists[key], d)
	s.mu.Unlock()
	p.watched.Add(1)
}

// CheckAndComplete tries every operation watching key, after a change
// that may let them complete (an append, a new high watermark, a leader
// change). It returns how many it completed. Operations are tried without
// the watch list's lock held, so they may be slow or watch other keys.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	s := p.shard(key)
	s.mu.Lock()
	ops := s.lists[key]
	if len(ops) == 0 {
		s.mu.Unlock()
		return 0
	}
	snapshot := append([]*delayed(nil), ops...)
	s.mu.Unlock()

	completed, finished := 0, 0
	for _, d := range snapshot {
		if d.completed.Load() {
			finished++
		} else if d.tryComplete() {
			completed++
			finished++
		}
	}
	if finished > 0 {
		p.sweep(s, key)
	}
	return completed
}

// sweep drops completed operations from key's watch list.
func (p *Purgatory[K]) sweep(s *watcherShard[K], key K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.sweepLocked(s, key)
}

func (p *Purgatory[K]) sweepLocked(s *watcherShard[K], key K) {
	ops := s.lists[key]
	kept := ops[:0]
	for _, d := range ops {
		if !d.completed.Load() {
			kept = append(kept, d)
		}
	}
	clear(ops[len(kept):]) // let the dropped ones be collected
	p.watched.Add(-int64(len(ops) - len(kept)))
	if len(kept) == 0 {
		delete(s.lists, key)
	} else {
		s.lists[key] = kept
	}
}

// Watched is the number of operations in watch lists, counting completed
// ones not yet swept out (Kafka's PurgatorySize metric).
func (p *Purgatory[K]) Watched() int64 { return p.watched.Load() }

// Delayed is the number of operations waiting for their deadline (Kafka's
// NumDelayedOperations).
func (p *Purgatory[K]) Delayed() int64 { return p.timer.size() }

// Advance expires every operation whose deadline is at or before the
// clock's now, and sweeps the watch lists if enough completed operations
// linger there. The reaper calls it; a test with its own clock calls it.
// It returns how many operations expired.
func (p *Purgatory[K]) Advance() int {
	n := 0
	for _, d := range p.timer.advance(p.now()) {
		if d.expire() {
			n++
		}
	}
	if p.watched.Load()-p.timer.size() > p.purgeInterval {
		p.purge()
	}
	return n
}

// purge sweeps completed operations out of every watch list: operations
// watching several keys are completed through one of them and linger in
// the others' lists until this sweep.
func (p *Purgatory[K]) purge() {
	for i := range p.watchers {
		s := &p.watchers[i]
		s.mu.Lock()
		for key := range s.lists {
			p.sweepLocked(s, key)
		}
		s.mu.Unlock()
	}
}

// reap expires operations as their deadlines pass (Kafka's
// ExpiredOperationReaper): it sleeps until the earliest non-empty bucket is
// due, or a bucket becomes due earlier, or 200 ms have passed.
func (p *Purgatory[K]) reap() {
	defer close(p.done)
	sleep := time.NewTimer(reaperMaxSleep)
	defer sleep.Stop()
	for {
		wait := reaperMaxSleep
		if next, ok := p.timer.queue.next(); ok {
			wait = min(wait, time.Duration(next-p.now())*time.Millisecond)
		}
		if wait > 0 {
			sleep.Reset(wait)
			select {
			case <-p.stop:
				return
			case <-p.timer.queue.changed:
			case <-sleep.C:
			}
		}
		p.Advance()
	}
}

// Shutdown stops the reaper and expires every pending operation, so each
// is answered (a produce with REQUEST_TIMED_OUT, a fetch with what it
// has) rather than left hanging while the broker stops.
func (p *Purgatory[K]) Shutdown() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	for _, d := range p.timer.close() {
		d.expire()
	}
}

// end build
