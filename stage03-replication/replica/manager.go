package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// HighWatermarkCheckpointFile holds, in each log directory, the high
// watermark of every partition (Kafka's replication-offset-checkpoint).
const HighWatermarkCheckpointFile = "replication-offset-checkpoint"

// ErrStaleController: a controller request from an older controller epoch
// (Kafka's STALE_CONTROLLER_EPOCH): a controller that lost its office
// without knowing it.
var ErrStaleController = errors.New("replica: request from an older controller epoch")

// Options are the parts of a Manager that are not Kafka configuration.
type Options struct {
	Quorum   Quorum   // which followers count for the high watermark; AllReplicas if nil
	Listener Listener // told of appends, high watermarks, state changes; NopListener if nil
	// LagTimeMax is replica.lag.time.max.ms as the high watermark sees
	// it (stage 04): a follower outside the quorum that caught up within
	// it bounds the high watermark too, as in Kafka 2.x's
	// maybeIncrementLeaderHW, so that a follower catching up to rejoin the
	// ISR is not outrun by a high watermark only the leader holds (it
	// rejoins when it reaches the high watermark). 0: only the quorum.
	LagTimeMax time.Duration
	Logger     *slog.Logger     // slog.Default if nil
	Now        func() time.Time // time.Now if nil
}

// Manager is Kafka's ReplicaManager: it holds this broker's replicas, turns
// the controller's LeaderAndIsr and StopReplica requests into leaders and
// followers, runs one fetcher per leader broker for its followers, and
// checkpoints the high watermarks.
type Manager struct {
	cfg    Config
	store  *store.Store
	opts   Options
	logger *slog.Logger

	mu              sync.Mutex
	partitions      map[commitlog.TopicPartition]*Partition // Protected by mu.
	controllerEpoch int32                                   // highest seen. Protected by mu.
	fetchers        map[int32]*fetcher                      // by leader id. Protected by mu.
	checkpointed    map[commitlog.TopicPartition]int64      // high watermarks read at start. Protected by mu.

	// pauseMu guards paused, resumed and requesting: fetchers wait while
	// paused is set (PauseFetching); resumed is closed and replaced when it
	// is cleared; requesting counts the fetchers' requests in flight, and
	// idle is signalled when it falls to 0. Not mu: LeaderAndIsr holds mu
	// while it waits for a fetcher to stop, and a fetcher checks for a
	// pause.
	pauseMu    sync.Mutex
	paused     bool
	resumed    chan struct{}
	requesting int
	idle       *sync.Cond

	stop chan struct{}
	done sync.WaitGroup
}

// NewManager starts a replica manager over store. Partitions get roles only
// when LeaderAndIsr arrives; until then their logs wait, as in Kafka after a
// restart.
func NewManager(cfg Config, store *store.Store, opts Options) (*Manager, error) {
	if opts.Quorum == nil {
		opts.Quorum = AllReplicas{}
	}
	if opts.Listener == nil {
		opts.Listener = NopListener{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	hws, err := commitlog.ReadOffsetCheckpoint(filepath.Join(store.Dir(), HighWatermarkCheckpointFile))
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, store: store, opts: opts, logger: opts.Logger.With("broker", cfg.BrokerID),
		partitions: map[commitlog.TopicPartition]*Partition{}, fetchers: map[int32]*fetcher{},
		checkpointed: hws, resumed: make(chan struct{}), stop: make(chan struct{})}
	m.idle = sync.NewCond(&m.pauseMu)
	m.done.Add(1)
	go m.checkpointLoop()
	return m, nil
}

// Config is the replication configuration.
func (m *Manager) Config() Config { return m.cfg }

// Partition returns this broker's replica of a partition, if it has one
// with a role.
func (m *Manager) Partition(topic string, partition int32) (*Partition, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.partitions[commitlog.TopicPartition{Topic: topic, Partition: partition}]
	return p, ok
}

// Partitions lists the replicas this broker holds, by topic and number.
func (m *Manager) Partitions() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Partition, 0, len(m.partitions))
	for _, p := range m.partitions {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Partition) int { return a.TopicPartition.Compare(b.TopicPartition) })
	return out
}

// ControllerEpoch is the highest controller epoch seen.
func (m *Manager) ControllerEpoch() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.controllerEpoch
}

// CheckControllerEpoch records a controller request's epoch, refusing an
// older one.
func (m *Manager) CheckControllerEpoch(epoch int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkControllerEpochLocked(epoch)
}

func (m *Manager) checkControllerEpochLocked(epoch int32) error {
	if epoch < m.controllerEpoch {
		return fmt.Errorf("%w: %d, this broker has seen %d", ErrStaleController, epoch, m.controllerEpoch)
	}
	m.controllerEpoch = epoch
	return nil
}

// LeaderAndIsr applies the controller's decisions: for each partition, this
// broker becomes leader or follower at the given leader epoch. A state whose
// leader epoch is not newer than the partition's is ignored (its error says
// so), as Kafka does. leaders maps leader ids to "host:port". It returns an
// error per partition, or ErrStaleController for the whole request.
func (m *Manager) LeaderAndIsr(controllerEpoch int32, states map[commitlog.TopicPartition]LeaderAndIsrState, leaders map[int32]string) (map[commitlog.TopicPartition]error, error) {
	var changed []*Partition
	defer func() { m.tell(changed) }() // after the unlock below
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkControllerEpochLocked(controllerEpoch); err != nil {
		return nil, err
	}
	results := map[commitlog.TopicPartition]error{}
	for tp, s := range states {
		p, err := m.partitionLocked(tp, s)
		if err != nil {
			results[tp] = err
			continue
		}
		// Stop fetching before the role changes, so that no answer from
		// the old leader can be applied under the new role. A state that
		// turns out stale is put back as it was.
		old, oldFetch := m.fetchStateLocked(tp)
		m.removeFetchLocked(tp)
		if s.Leader == m.cfg.BrokerID {
			err = p.MakeLeader(s)
		} else if err = p.MakeFollower(s); err == nil {
			addr, ok := leaders[s.Leader]
			if ok {
				m.addFetchLocked(tp, p, s.Leader, s.LeaderEpoch, addr)
			} else {
				m.logger.Warn("follower of a leader with no address; not fetching", "partition", tp, "leader", s.Leader)
			}
		}
		if err != nil && oldFetch != nil {
			m.addFetchLocked(tp, old.p, oldFetch.leaderID, old.epoch, oldFetch.addr)
		}
		if err == nil {
			changed = append(changed, p)
		}
		results[tp] = err
	}
	return results, nil
}

// partitionLocked returns the replica of tp, creating it (and its log) when
// the controller assigns it here for the first time.
func (m *Manager) partitionLocked(tp commitlog.TopicPartition, s LeaderAndIsrState) (*Partition, error) {
	if p, ok := m.partitions[tp]; ok {
		return p, nil
	}
	isReplica := false
	for _, id := range s.Replicas {
		isReplica = isReplica || id == m.cfg.BrokerID
	}
	if !isReplica {
		return nil, fmt.Errorf("%w: %s replicas %v", ErrNotReplica, tp, s.Replicas)
	}
	bp, ok := m.store.Partition(tp.Topic, tp.Partition)
	if !ok {
		var err error
		if bp, err = m.store.CreatePartition(tp); err != nil {
			return nil, err
		}
	}
	p, err := newPartition(bp, m.cfg.BrokerID, m.checkpointed[tp], m.opts)
	if err != nil {
		return nil, err
	}
	m.partitions[tp] = p
	return p, nil
}

// StopReplica stops this broker's replicas of partitions, deleting their
// logs if asked (when a partition moves away or its topic is deleted).
func (m *Manager) StopReplica(controllerEpoch int32, tps []commitlog.TopicPartition, deleteLogs bool) (map[commitlog.TopicPartition]error, error) {
	var changed []*Partition
	defer func() { m.tell(changed) }() // after the unlock below
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkControllerEpochLocked(controllerEpoch); err != nil {
		return nil, err
	}
	results := map[commitlog.TopicPartition]error{}
	for _, tp := range tps {
		m.removeFetchLocked(tp)
		if p, ok := m.partitions[tp]; ok {
			p.Stop()
			changed = append(changed, p)
		}
		if deleteLogs {
			delete(m.partitions, tp)
			delete(m.checkpointed, tp)
			if _, ok := m.store.Partition(tp.Topic, tp.Partition); ok {
				results[tp] = m.store.DeletePartition(tp)
				continue
			}
		}
		results[tp] = nil
	}
	return results, nil
}

func (m *Manager) addFetchLocked(tp commitlog.TopicPartition, p *Partition, leader, epoch int32, addr string) {
	f, ok := m.fetchers[leader]
	if ok && f.addr != addr {
		// The leader broker moved: a new fetcher takes over every
		// partition of the old one, which truncate again first.
		f.shutdown()
		nf := newFetcher(m, leader, addr)
		for otp, st := range f.states() {
			nf.add(otp, st.p, st.epoch)
		}
		f = nf
		m.fetchers[leader] = f
	} else if !ok {
		f = newFetcher(m, leader, addr)
		m.fetchers[leader] = f
	}
	f.add(tp, p, epoch)
}

// fetchStateLocked returns tp's fetch state and fetcher, if it is fetched.
// One lookup per fetcher (one per leader): a LeaderAndIsr for thousands of
// partitions used to copy every fetcher's whole map for each of them.
func (m *Manager) fetchStateLocked(tp commitlog.TopicPartition) (*fetchState, *fetcher) {
	for _, f := range m.fetchers {
		if st, ok := f.state(tp); ok {
			return st, f
		}
	}
	return nil, nil
}

func (m *Manager) removeFetchLocked(tp commitlog.TopicPartition) {
	for id, f := range m.fetchers {
		if f.remove(tp) == 0 {
			f.shutdown()
			delete(m.fetchers, id)
		}
	}
}

// tell tells the listener that the partitions changed state. Called with
// no lock held: a listener may look partitions up.
func (m *Manager) tell(changed []*Partition) {
	for _, p := range changed {
		m.opts.Listener.StateChanged(p)
	}
}

// RetentionLimit is where retention must stop for a partition: its high
// watermark, so that records not yet on every in-sync replica are never
// deleted on the leader, and a follower deletes no more than its leader has
// committed. A partition not yet told its role keeps the high watermark
// of its last checkpoint. It is the store's Options.RetentionLimit.
func (m *Manager) RetentionLimit(tp commitlog.TopicPartition, l *commitlog.Log) int64 {
	m.mu.Lock()
	p, ok := m.partitions[tp]
	hw, checkpointed := m.checkpointed[tp]
	m.mu.Unlock()
	switch {
	case ok:
		return p.HighWatermark()
	case checkpointed:
		return hw
	}
	return l.StartOffset() // nothing known: delete nothing
}

// StartOffsetAdvanced forgets the leader epochs that ended before a
// partition's new log start, after retention deleted its head (Kafka's
// leaderEpochCache.truncateFromStart). It is the store's
// Options.StartOffsetAdvanced.
func (m *Manager) StartOffsetAdvanced(tp commitlog.TopicPartition, _ *commitlog.Log, start int64) {
	m.mu.Lock()
	p, ok := m.partitions[tp]
	m.mu.Unlock()
	if !ok {
		return
	}
	if err := p.Epochs.TruncateFromStart(start); err != nil {
		m.logger.Error("leader epoch cache", "partition", tp, "err", err)
	}
	m.opts.Listener.LogStartAdvanced(p, start)
}

// PauseFetching stops (true) or restarts (false) every fetcher of this
// broker: its followers stop copying their leaders, as if the network
// between them were cut, while their connections stay open. Kafka has no
// such switch; tests and the demo use it to make a follower fall behind
// and leave the ISR (stage 04). A pause returns once no fetcher has a
// request in flight (a long-poll fetch ends within
// replica.fetch.wait.max.ms), so from then on this broker copies nothing.
func (m *Manager) PauseFetching(pause bool) {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if m.paused != pause {
		m.paused = pause
		if !pause {
			close(m.resumed)
			m.resumed = make(chan struct{})
		}
		m.logger.Info("replica fetching", "paused", pause)
	}
	for pause && m.requesting > 0 {
		m.idle.Wait()
	}
}

// fetchPaused returns nil if fetching may go on, or a channel closed when
// it resumes.
func (m *Manager) fetchPaused() <-chan struct{} {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if !m.paused {
		return nil
	}
	return m.resumed
}

// beginRequest counts a fetcher's request as in flight, unless fetching
// is paused (false: the fetcher must wait). endRequest ends it.
func (m *Manager) beginRequest() bool {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if m.paused {
		return false
	}
	m.requesting++
	return true
}

func (m *Manager) endRequest() {
	m.pauseMu.Lock()
	defer m.pauseMu.Unlock()
	if m.requesting--; m.requesting == 0 {
		m.idle.Broadcast()
	}
}

// CheckpointHighWatermarks writes every partition's high watermark.
func (m *Manager) CheckpointHighWatermarks() error {
	m.mu.Lock()
	hws := make(map[commitlog.TopicPartition]int64, len(m.partitions)+len(m.checkpointed))
	for tp, hw := range m.checkpointed {
		if _, ok := m.store.Partition(tp.Topic, tp.Partition); ok {
			hws[tp] = hw // a replica not yet told its role keeps its old value
		}
	}
	for tp, p := range m.partitions {
		hws[tp] = p.HighWatermark()
	}
	m.mu.Unlock()
	return commitlog.WriteOffsetCheckpoint(filepath.Join(m.store.Dir(), HighWatermarkCheckpointFile), hws)
}

func (m *Manager) checkpointLoop() {
	defer m.done.Done()
	t := time.NewTicker(m.cfg.HighWatermarkCheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if err := m.CheckpointHighWatermarks(); err != nil {
				m.logger.Error("high watermark checkpoint", "err", err)
			}
		}
	}
}

// Close stops the fetchers and writes the high watermarks.
func (m *Manager) Close() error {
	close(m.stop)
	m.done.Wait()
	m.mu.Lock()
	for id, f := range m.fetchers {
		f.shutdown()
		delete(m.fetchers, id)
	}
	m.mu.Unlock()
	return m.CheckpointHighWatermarks()
}
