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
//
// Its locks, and what may be called while each is held, are listed in
// chapter 3, "Locks". In short: requests from clients look partitions up
// without a lock (partitions); the controller's requests are serialized by
// stateMu, which no client request takes, so that their slow parts
// (creating logs, stopping fetchers) stall nobody else; and no fsync is
// made under a lock a client request needs.
type Manager struct {
	cfg    Config
	store  *store.Store
	opts   Options
	logger *slog.Logger

	// stateMu serializes the changes of roles: LeaderAndIsr, StopReplica
	// and Close (Kafka's replicaStateChangeLock). It is held across
	// everything they do, creating and deleting logs and stopping fetches
	// (which waits for an answer being applied and told), and taken by
	// nothing that serves a client.
	stateMu  sync.Mutex
	fetchers map[int32]*fetcher // by leader id. Protected by stateMu.

	// partitions holds the replicas that have been given a role (Kafka's
	// allPartitions): read with no lock (Partition, RetentionLimit), put
	// and removed under stateMu.
	partitions pool[commitlog.TopicPartition, *Partition]
	// checkpointed holds the high watermarks read at start, for replicas
	// not yet told their role: read with no lock, removed under stateMu.
	checkpointed pool[commitlog.TopicPartition, int64]

	mu              sync.Mutex
	controllerEpoch int32 // highest seen. Protected by mu, which guards nothing else and is held for nothing else.

	// hwMu serializes the writers of the high watermark checkpoint (the
	// checkpoint loop, Close); it is held across the write and its fsync.
	hwMu sync.Mutex

	// epochs holds the leader epoch caches that LeaderAndIsr left to
	// write; epochFlushLoop writes them.
	epochs epochFlusher

	// pauseMu guards paused, resumed and requesting: fetchers wait while
	// paused is set (PauseFetching); resumed is closed and replaced when it
	// is cleared; requesting counts the fetchers' requests in flight, and
	// idle is signalled when it falls to 0. Not stateMu: LeaderAndIsr
	// holds stateMu while it waits for a fetcher to stop, and a fetcher
	// checks for a pause.
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
		fetchers: map[int32]*fetcher{}, resumed: make(chan struct{}), stop: make(chan struct{}),
		epochs: epochFlusher{wake: make(chan struct{}, 1)}}
	for tp, hw := range hws {
		m.checkpointed.put(tp, hw)
	}
	m.idle = sync.NewCond(&m.pauseMu)
	m.done.Add(2)
	go m.checkpointLoop()
	go m.epochFlushLoop()
	return m, nil
}

// Config is the replication configuration.
func (m *Manager) Config() Config { return m.cfg }

// Partition returns this broker's replica of a partition, if it has one
// with a role. It takes no lock: every Produce and Fetch looks up here.
func (m *Manager) Partition(topic string, partition int32) (*Partition, bool) {
	return m.partitions.get(commitlog.TopicPartition{Topic: topic, Partition: partition})
}

// Partitions lists the replicas this broker holds, by topic and number.
func (m *Manager) Partitions() []*Partition {
	var out []*Partition
	for _, p := range m.partitions.all() {
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
//
// It holds stateMu only, so clients' requests go on meanwhile, and makes no
// fsync of its own: the new leaders' epochs are written to their
// checkpoints by epochFlushLoop, in the background and in parallel (or by
// a leader's first append, which waits for its own).
func (m *Manager) LeaderAndIsr(controllerEpoch int32, states map[commitlog.TopicPartition]LeaderAndIsrState, leaders map[int32]string) (map[commitlog.TopicPartition]error, error) {
	var changed []*Partition
	defer func() { m.tell(changed) }() // after the unlock below
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if err := m.CheckControllerEpoch(controllerEpoch); err != nil {
		return nil, err
	}
	results := map[commitlog.TopicPartition]error{}
	var idle []*fetcher               // left with nothing to fetch
	var unflushed []*LeaderEpochCache // new leaders' epochs, in memory only
	for tp, s := range states {
		p, created, err := m.partitionLocked(tp, s)
		if err != nil {
			results[tp] = err
			continue
		}
		// Stop fetching before the role changes, so that no answer from
		// the old leader can be applied under the new role, nor told
		// after it. A state that turns out stale is put back as it was.
		old, oldFetch := m.fetchStateLocked(tp)
		idle = append(idle, m.removeFetchLocked(tp)...)
		if s.Leader == m.cfg.BrokerID {
			if err = p.MakeLeader(s); err == nil && !p.Epochs.Flushed() {
				unflushed = append(unflushed, p.Epochs)
			}
		} else {
			err = p.MakeFollower(s)
		}
		if created {
			m.partitions.put(tp, p) // with its role, before its fetcher can tell of it
		}
		if err == nil && s.Leader != m.cfg.BrokerID {
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
	m.epochs.add(unflushed)
	shutdownFetchers(idle)
	return results, nil
}

// partitionLocked returns the replica of tp, creating it (and its log) when
// the controller assigns it here for the first time; created says so, and
// the caller publishes it once it has its role. Called with stateMu held.
func (m *Manager) partitionLocked(tp commitlog.TopicPartition, s LeaderAndIsrState) (p *Partition, created bool, err error) {
	if p, ok := m.partitions.get(tp); ok {
		return p, false, nil
	}
	isReplica := false
	for _, id := range s.Replicas {
		isReplica = isReplica || id == m.cfg.BrokerID
	}
	if !isReplica {
		return nil, false, fmt.Errorf("%w: %s replicas %v", ErrNotReplica, tp, s.Replicas)
	}
	bp, ok := m.store.Partition(tp.Topic, tp.Partition)
	if !ok {
		if bp, err = m.store.CreatePartition(tp); err != nil {
			return nil, false, err
		}
	}
	hw, _ := m.checkpointed.get(tp)
	if p, err = newPartition(bp, m.cfg.BrokerID, hw, m.opts); err != nil {
		return nil, false, err
	}
	return p, true, nil
}

// StopReplica stops this broker's replicas of partitions, deleting their
// logs if asked (when a partition moves away or its topic is deleted).
func (m *Manager) StopReplica(controllerEpoch int32, tps []commitlog.TopicPartition, deleteLogs bool) (map[commitlog.TopicPartition]error, error) {
	var changed []*Partition
	defer func() { m.tell(changed) }() // after the unlock below
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if err := m.CheckControllerEpoch(controllerEpoch); err != nil {
		return nil, err
	}
	results := map[commitlog.TopicPartition]error{}
	var idle []*fetcher
	for _, tp := range tps {
		idle = append(idle, m.removeFetchLocked(tp)...)
		p, ok := m.partitions.get(tp)
		if ok {
			p.Stop()
			changed = append(changed, p)
		}
		if deleteLogs {
			if ok {
				p.Epochs.deleted() // no checkpoint written into a deleted directory
			}
			m.partitions.remove(tp)
			m.checkpointed.remove(tp)
			if _, ok := m.store.Partition(tp.Topic, tp.Partition); ok {
				results[tp] = m.store.DeletePartition(tp)
				continue
			}
		}
		results[tp] = nil
	}
	shutdownFetchers(idle)
	return results, nil
}

// addFetchLocked fetches tp from leader at addr. Called with stateMu held.
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
// Called with stateMu held.
func (m *Manager) fetchStateLocked(tp commitlog.TopicPartition) (*fetchState, *fetcher) {
	for _, f := range m.fetchers {
		if st, ok := f.state(tp); ok {
			return st, f
		}
	}
	return nil, nil
}

// removeFetchLocked stops fetching tp: once it returns, nothing its fetcher
// applied is left untold, and nothing more will be applied. It returns the
// fetchers left with nothing to fetch, forgotten here: the caller shuts
// them down (shutdownFetchers), all at once. Called with stateMu held.
func (m *Manager) removeFetchLocked(tp commitlog.TopicPartition) []*fetcher {
	var idle []*fetcher
	for id, f := range m.fetchers {
		if f.remove(tp) == 0 {
			idle = append(idle, f)
			delete(m.fetchers, id)
		}
	}
	return idle
}

// shutdownFetchers stops fetchers and waits for them: each first, so that
// the waits overlap.
func shutdownFetchers(fs []*fetcher) {
	for _, f := range fs {
		f.cancel()
	}
	for _, f := range fs {
		<-f.done
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
// of its last checkpoint. It is the store's Options.RetentionLimit, and
// takes no lock.
func (m *Manager) RetentionLimit(tp commitlog.TopicPartition, l *commitlog.Log) int64 {
	if p, ok := m.partitions.get(tp); ok {
		return p.HighWatermark()
	}
	if hw, ok := m.checkpointed.get(tp); ok {
		return hw
	}
	return l.StartOffset() // nothing known: delete nothing
}

// StartOffsetAdvanced forgets the leader epochs that ended before a
// partition's new log start, after retention deleted its head (Kafka's
// leaderEpochCache.truncateFromStart), and tells the listener. It is the
// store's Options.StartOffsetAdvanced, and takes no lock.
func (m *Manager) StartOffsetAdvanced(tp commitlog.TopicPartition, _ *commitlog.Log, start int64) {
	p, ok := m.partitions.get(tp)
	if !ok {
		return
	}
	var n news
	p.logStartAdvanced(start, &n)
	n.tell()
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
	m.hwMu.Lock()
	defer m.hwMu.Unlock()
	hws := map[commitlog.TopicPartition]int64{}
	for tp, hw := range m.checkpointed.all() {
		hws[tp] = hw // a replica not yet told its role keeps its old value
	}
	for tp, p := range m.partitions.all() {
		hws[tp] = p.HighWatermark()
	}
	for tp := range hws {
		if _, ok := m.store.Partition(tp.Topic, tp.Partition); !ok {
			delete(hws, tp) // deleted meanwhile, or never here
		}
	}
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

// Close stops the fetchers and writes the leader epochs still in memory
// and the high watermarks.
func (m *Manager) Close() error {
	close(m.stop)
	m.done.Wait()
	m.stateMu.Lock()
	var all []*fetcher
	for id, f := range m.fetchers {
		all = append(all, f)
		delete(m.fetchers, id)
	}
	shutdownFetchers(all)
	m.stateMu.Unlock()
	return errors.Join(m.flushEpochs(m.epochs.take()), m.CheckpointHighWatermarks())
}
