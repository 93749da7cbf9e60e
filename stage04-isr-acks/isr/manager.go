package isr

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// Options are the parts of a Manager that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger     // slog.Default if nil
	Now    func() time.Time // time.Now if nil; must be the partitions' clock
	// Propagation says when the ISR changes this leader made are
	// written to /isr_change_notification; a zero field takes Kafka's
	// value (DefaultIsrChangePropagation).
	Propagation IsrChangePropagationConfig
}

// Manager keeps the ISR of every partition this broker leads (Kafka's
// Partition.maybeShrinkIsr and maybeExpandIsr, the ReplicaManager task
// that runs the first every replica.lag.time.max.ms / 2, and the
// ZkIsrManager that writes the changes):
//
//   - Shrink, on a timer, removes the followers that have not caught up for
//     replica.lag.time.max.ms (OutOfSync);
//   - MaybeExpand, after each follower fetch, adds a follower that has
//     reached the high watermark and the start of the leader's epoch
//     (CanJoin).
//
// Neither writes anything itself: each queues the change for the writer, a
// goroutine of its own, and returns. A follower's fetch, which calls
// MaybeExpand, never waits for ZooKeeper, and a slow write holds up no
// other partition's fetches (Kafka 2.7 moved the write off the fetch path
// the same way, with AlterIsr). A partition has at most one change queued
// or being written at a time (Kafka's pending ISR state): the next follower
// fetch or shrink check after it looks again.
//
// The writer writes each change to the StateStore, conditional on the
// partition epoch (the state's version) the change was computed from, and
// installs it in the partition only if the write succeeded; the change is
// then recorded for the controller, which hears of a batch of them
// (notify.go). A write that finds another version means the controller
// changed the state meanwhile: the leader stops changing that partition's
// ISR until the controller's LeaderAndIsr brings a new partition epoch, as
// Kafka up to 2.6 does ("Cached zkVersion not equal to that in zookeeper,
// skip updating ISR").
//
// Locks: mu and notifyMu guard maps and are never held while calling out
// (the store, a partition, the listener); a change holds no lock of this
// Manager while it is written and installed.
type Manager struct {
	brokerID    int32
	replicas    *replica.Manager
	store       StateStore
	lagMax      time.Duration
	propagation IsrChangePropagationConfig
	logger      *slog.Logger
	now         func() time.Time

	// mu guards the bookkeeping of changes in flight. Held for map and
	// slice operations only.
	mu sync.Mutex
	// pending holds each partition's change that is queued or being
	// written. Invariant: at most one a partition; the writer removes it
	// once the change is written and installed, or dropped. Protected by mu.
	pending map[commitlog.TopicPartition]*isrChange
	// queue holds the changes waiting for the writer, oldest first.
	// Protected by mu.
	queue []*isrChange
	// fenced holds, for each partition whose write found a stale version,
	// the partition and the partition epoch that failed. Protected by mu.
	fenced map[commitlog.TopicPartition]fence
	// closed: Close was called; nothing more is queued. Protected by mu.
	closed bool
	// wake holds a token when the queue may have something for the writer.
	wake chan struct{}

	// notifyMu guards the changes not yet told to the controller
	// (Kafka's isrChangeSet). Never held across a store call.
	notifyMu sync.Mutex
	// isrChanges: the partitions whose ISR changed since the last
	// notification. Protected by notifyMu.
	isrChanges map[commitlog.TopicPartition]struct{}
	// lastIsrChange and lastPropagation: when a change was last recorded,
	// and when a notification was last written (m.now). Protected by
	// notifyMu.
	lastIsrChange, lastPropagation time.Time

	// shrinks and expands count the ISR changes this leader made, one per
	// partition changed (Kafka's IsrShrinksPerSec and IsrExpandsPerSec
	// meters; final's metrics read them).
	shrinks, expands atomic.Uint64

	closeOnce sync.Once
	stop      chan struct{}  // closed by Close
	loops     sync.WaitGroup // the shrink timer, the writer, the notifier
}

// isrChange is one ISR change on its way to the store.
type isrChange struct {
	p      *replica.Partition
	v      replica.LeaderView // what the change was computed from
	isr    []int32            // the new ISR
	shrink bool
	msg    string // why, for the log
	args   []any
}

// fence is a partition whose leader wrote from a stale partition epoch.
type fence struct {
	p     *replica.Partition // a partition deleted and created again is another
	epoch int32
}

// NewManager returns a manager for the partitions of replicas; Start runs
// its periodic shrink, its writer and its notifier.
func NewManager(brokerID int32, replicas *replica.Manager, store StateStore, lagMax time.Duration, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	now := opts.Now()
	return &Manager{brokerID: brokerID, replicas: replicas, store: store, lagMax: lagMax,
		propagation: opts.Propagation.orDefaults(), logger: opts.Logger.With("component", "isr"), now: opts.Now,
		pending: map[commitlog.TopicPartition]*isrChange{}, fenced: map[commitlog.TopicPartition]fence{},
		wake: make(chan struct{}, 1), isrChanges: map[commitlog.TopicPartition]struct{}{},
		lastIsrChange: now, lastPropagation: now, stop: make(chan struct{})}
}

// Start runs, each on a goroutine of its own: the check for followers to
// remove every replica.lag.time.max.ms / 2 (Kafka's isr-expiration task),
// so a follower leaves between lagMax and 1.5 × lagMax after it last
// caught up; the writer of the changes; and the notifier
// (isr-change-propagation). Changes queued before Start wait for it.
func (m *Manager) Start() {
	m.loops.Add(3)
	go m.every(max(m.lagMax/2, time.Millisecond), func() { m.Shrink() })
	go m.every(m.propagation.CheckInterval, m.maybePropagateIsrChanges)
	go m.writeLoop()
}

// every runs f every d until Close.
func (m *Manager) every(d time.Duration, f func()) {
	defer m.loops.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// Close stops the timers and the writer and waits for them: a write in
// flight finishes (ZooKeeper may be slow: stage 05); queued changes are
// dropped, never written, so the store and the partitions agree. Changes
// not yet notified stay unnotified, as in Kafka, whose controller learns
// the ISRs of a stopping broker's partitions when it moves them.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		close(m.stop)
	})
	m.loops.Wait()
}

// Fenced lists the partitions whose last ISR write found a newer state
// than the leader's, and that wait for the controller's LeaderAndIsr.
func (m *Manager) Fenced() []commitlog.TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]commitlog.TopicPartition, 0, len(m.fenced))
	for tp := range m.fenced {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b commitlog.TopicPartition) int { return a.Compare(b) })
	return out
}

// build 04.H: the ISR manager: shrink on a timer, expand after a fetch, write the change behind a conditional update
// tests: TestIsrChangesAreNotifiedInOneBatchOnceTheyStopComing, TestIsrChangesThatKeepComingAreNotifiedWithinMaxDelay, TestALeaderAndIsrArrivingWhileAnISRChangeWaitsWins

// Shrink queues the removal of the out-of-sync followers from the ISR of
// every partition this broker leads. It returns the partitions whose
// change it queued.
func (m *Manager) Shrink() []commitlog.TopicPartition {
	var queued []commitlog.TopicPartition
	for _, p := range m.replicas.Partitions() {
		v, ok := p.LeaderView()
		if !ok {
			continue
		}
		out := OutOfSync(m.brokerID, v.ISR, v.Followers, v.LogEndOffset, m.now(), m.lagMax)
		if len(out) == 0 {
			continue
		}
		if m.submit(&isrChange{p: p, v: v, isr: Without(v.ISR, out), shrink: true,
			msg: "shrinking the ISR: followers out of sync", args: []any{"out", out,
				"lag_max", m.lagMax, "leader_log_end", v.LogEndOffset, "hw", v.HighWatermark}}) {
			queued = append(queued, p.TopicPartition)
		}
	}
	return queued
}

// MaybeExpand queues the addition of follower to p's ISR if it has caught
// up. It is called after every follower fetch, on the fetch request's
// handler: it returns quickly when there is nothing to do, and never
// waits for the store.
func (m *Manager) MaybeExpand(p *replica.Partition, follower int32) {
	if leads, in := p.InISR(follower); !leads || in {
		return // the usual case, with nothing copied
	}
	v, ok := p.LeaderView()
	if !ok || slices.Contains(v.ISR, follower) || !slices.Contains(v.Replicas, follower) {
		return
	}
	f, ok := v.Followers[follower]
	if !ok || !CanJoin(f.LogEndOffset, v.HighWatermark, v.EpochStartOffset) {
		return
	}
	m.submit(&isrChange{p: p, v: v, isr: With(v.ISR, follower),
		msg: "expanding the ISR: follower caught up", args: []any{"follower", follower,
			"follower_log_end", f.LogEndOffset, "hw", v.HighWatermark}})
}

// Shrinks is the number of ISR shrinks this broker made as a leader, one
// per partition (Kafka: IsrShrinksPerSec).
func (m *Manager) Shrinks() uint64 { return m.shrinks.Load() }

// Expands is the number of ISR expansions, likewise (IsrExpandsPerSec).
func (m *Manager) Expands() uint64 { return m.expands.Load() }

// submit queues c for the writer, unless its partition has a change
// queued or in flight already, or waits for the controller (fenced at the
// epoch c was computed from). It reports whether c was queued.
func (m *Manager) submit(c *isrChange) bool {
	tp := c.p.TopicPartition
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	if _, busy := m.pending[tp]; busy {
		return false // one at a time; the next fetch or check looks again
	}
	if f, ok := m.fenced[tp]; ok {
		if f.p == c.p && f.epoch == c.v.PartitionEpoch {
			return false // waiting for the controller
		}
		delete(m.fenced, tp) // a new state came (or a new partition): try again
	}
	m.pending[tp] = c
	m.queue = append(m.queue, c)
	select {
	case m.wake <- struct{}{}:
	default: // the writer has a token already
	}
	return true
}

// end build
