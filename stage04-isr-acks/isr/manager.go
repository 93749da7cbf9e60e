package isr

import (
	"errors"
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
}

// Manager keeps the ISR of every partition this broker leads (Kafka's
// Partition.maybeShrinkIsr and maybeExpandIsr, and the ReplicaManager task
// that runs the first every replica.lag.time.max.ms / 2):
//
//   - Shrink, on a timer, removes the followers that have not caught up for
//     replica.lag.time.max.ms (OutOfSync);
//   - MaybeExpand, after each follower fetch, adds a follower that has
//     reached the high watermark and the start of the leader's epoch
//     (CanJoin).
//
// Each change is written to the StateStore first, conditional on the
// partition epoch (the state's version) the leader holds, and installed in
// the partition only if the write succeeded; then the controller is
// notified. A write that finds another version means the controller
// changed the state meanwhile: the leader stops changing that partition's
// ISR until the controller's LeaderAndIsr brings a new partition epoch, as
// Kafka up to 2.6 does ("Cached zkVersion not equal to that in zookeeper,
// skip updating ISR").
type Manager struct {
	brokerID int32
	replicas *replica.Manager
	store    StateStore
	lagMax   time.Duration
	logger   *slog.Logger
	now      func() time.Time

	// mu serializes ISR changes: a change reads the partition, writes the
	// store and installs the result, and two at once would write from the
	// same version and one would fail for nothing.
	mu sync.Mutex
	// fenced holds, for each partition whose write found a stale version,
	// the partition epoch that failed. Protected by mu.
	fenced map[commitlog.TopicPartition]int32

	// shrinks and expands count the ISR changes this leader made, one per
	// partition changed (Kafka's IsrShrinksPerSec and IsrExpandsPerSec
	// meters; final's metrics read them).
	shrinks, expands atomic.Uint64

	started   atomic.Bool
	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{} // closed when the shrink loop has ended
}

// NewManager returns a manager for the partitions of replicas; Start runs
// its periodic shrink.
func NewManager(brokerID int32, replicas *replica.Manager, store StateStore, lagMax time.Duration, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{brokerID: brokerID, replicas: replicas, store: store, lagMax: lagMax,
		logger: opts.Logger.With("component", "isr"), now: opts.Now,
		fenced: map[commitlog.TopicPartition]int32{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start checks every replica.lag.time.max.ms / 2 for followers to remove
// (Kafka's isr-expiration task), so a follower leaves between lagMax and
// 1.5 × lagMax after it last caught up.
func (m *Manager) Start() {
	m.started.Store(true)
	go func() {
		defer close(m.done)
		t := time.NewTicker(max(m.lagMax/2, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.Shrink()
			}
		}
	}()
}

// Close stops the periodic shrink and waits for it.
func (m *Manager) Close() {
	m.closeOnce.Do(func() { close(m.stop) })
	if m.started.Load() {
		<-m.done
	}
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

// Shrink removes the out-of-sync followers from the ISR of every partition
// this broker leads. It returns the partitions it changed.
func (m *Manager) Shrink() []commitlog.TopicPartition {
	var changed []commitlog.TopicPartition
	for _, p := range m.replicas.Partitions() {
		v, ok := p.LeaderView()
		if !ok {
			continue
		}
		out := OutOfSync(m.brokerID, v.ISR, v.Followers, v.LogEndOffset, m.now(), m.lagMax)
		if len(out) == 0 {
			continue
		}
		if m.change(p, v, Without(v.ISR, out), "shrinking the ISR: followers out of sync", "out", out,
			"lag_max", m.lagMax, "leader_log_end", v.LogEndOffset, "hw", v.HighWatermark) {
			changed = append(changed, p.TopicPartition)
		}
	}
	return changed
}

// MaybeExpand adds follower to p's ISR if it has caught up. It is called
// after every follower fetch, so it returns quickly when there is nothing
// to do.
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
	m.change(p, v, With(v.ISR, follower), "expanding the ISR: follower caught up", "follower", follower,
		"follower_log_end", f.LogEndOffset, "hw", v.HighWatermark)
}

// Shrinks is the number of ISR shrinks this broker made as a leader, one
// per partition (Kafka: IsrShrinksPerSec).
func (m *Manager) Shrinks() uint64 { return m.shrinks.Load() }

// Expands is the number of ISR expansions, likewise (IsrExpandsPerSec).
func (m *Manager) Expands() uint64 { return m.expands.Load() }

// change writes isr as p's new ISR, computed from v, and installs it,
// logging why (msg and args) once it is going to try. It reports whether
// the ISR changed.
func (m *Manager) change(p *replica.Partition, v replica.LeaderView, isr []int32, msg string, args ...any) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	tp := p.TopicPartition
	if epoch, ok := m.fenced[tp]; ok {
		if epoch == v.PartitionEpoch {
			return false // waiting for the controller
		}
		delete(m.fenced, tp) // a new state came: try again
	}
	// Another change may have run since v was read: start from the
	// partition as it is now, and give up if the change no longer applies.
	now, ok := p.LeaderView()
	if !ok || now.LeaderEpoch != v.LeaderEpoch || now.PartitionEpoch != v.PartitionEpoch {
		return false
	}
	m.logger.Info(msg, append([]any{"partition", tp, "isr", v.ISR, "new_isr", isr}, args...)...)
	state := PartitionState{ControllerEpoch: v.ControllerEpoch, Leader: m.brokerID, LeaderEpoch: v.LeaderEpoch, ISR: isr}
	version, err := m.store.UpdatePartitionState(tp, state, v.PartitionEpoch)
	if errors.Is(err, ErrBadVersion) {
		// As Kafka's checkLeaderAndIsrZkData: if what is stored is what
		// this leader meant to write (a retried write whose first attempt
		// landed), the write succeeded, at the version stored.
		if stored, v2, rerr := m.store.PartitionState(tp); rerr == nil && stored.Equal(state) {
			version, err = v2, nil
		}
	}
	switch {
	case errors.Is(err, ErrBadVersion):
		m.fenced[tp] = v.PartitionEpoch
		m.logger.Warn("the partition state changed under this leader; not changing the ISR until the controller says",
			"partition", tp, "partition_epoch", v.PartitionEpoch, "err", err)
		return false
	case err != nil:
		m.logger.Error("cannot write the ISR", "partition", tp, "err", err)
		return false
	}
	if !p.UpdateISR(v.LeaderEpoch, v.PartitionEpoch, isr, version) {
		// A LeaderAndIsr arrived between our write and now: its state is
		// newer than ours, and wins.
		return false
	}
	// Counted as soon as the partition has it, so that nobody reads the
	// new ISR and an old count.
	if len(isr) < len(v.ISR) {
		m.shrinks.Add(1)
	} else {
		m.expands.Add(1)
	}
	if err := m.store.NotifyIsrChange([]commitlog.TopicPartition{tp}); err != nil {
		m.logger.Error("cannot notify the controller of an ISR change", "partition", tp, "err", err)
	}
	return true
}
