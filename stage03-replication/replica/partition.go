package replica

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Role is what this broker is for a partition.
type Role int

const (
	None     Role = iota // not told yet (after a restart, before LeaderAndIsr)
	Leader               // takes produce requests and serves fetches
	Follower             // copies its leader's log
)

func (r Role) String() string { return [...]string{"none", "leader", "follower"}[r] }

// Errors of replica operations, each matching a Kafka error code.
var (
	ErrNotLeader      = errors.New("replica: not the leader of this partition")
	ErrStaleEpoch     = errors.New("replica: leader epoch is not newer than the current one")
	ErrFencedEpoch    = errors.New("replica: the request's leader epoch is older than the partition's")
	ErrUnknownEpoch   = errors.New("replica: the request's leader epoch is newer than the partition's")
	ErrNotReplica     = errors.New("replica: this broker is not a replica of the partition")
	ErrUnknownReplica = errors.New("replica: fetch from a broker that is not a replica")
	// ErrNotEnoughReplicas: an acks=all append refused because the ISR is
	// smaller than min.insync.replicas (stage 04); nothing was appended.
	ErrNotEnoughReplicas = errors.New("replica: fewer in-sync replicas than required")
)

// ErrorCode maps a replica error to Kafka's error code.
func ErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, ErrFencedEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, ErrUnknownEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, ErrStaleEpoch):
		return kerr.StaleControllerEpoch.Code
	case errors.Is(err, ErrNotReplica), errors.Is(err, ErrUnknownReplica):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, commitlog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, ErrPolicyViolation):
		return kerr.PolicyViolation.Code
	}
	return store.AppendErrorCode(err)
}

// ReplicaState is what a leader knows of one follower, learned from its
// fetches (Kafka's Replica).
type ReplicaState struct {
	// LogEndOffset is the follower's log end offset: the offset it last
	// fetched from, since a follower fetches from its own end.
	// Invariant: -1 until the follower has fetched from this leader.
	LogEndOffset int64
	// LogStartOffset is the follower's log start offset, as its last
	// fetch said: the low watermark (DeleteRecords) waits for it.
	// Invariant: -1 until the follower has fetched from this leader.
	LogStartOffset int64
	// LastFetchTime is when that fetch arrived.
	LastFetchTime time.Time
	// LastCaughtUpTime is the last time the follower had everything the
	// leader had (stage 04's ISR shrinks on it).
	LastCaughtUpTime time.Time
	// lastFetchLeaderLEO is the leader's log end at the previous fetch:
	// a fetch that reaches it shows the follower was caught up then.
	lastFetchLeaderLEO int64
}

// LeaderAndIsrState is one partition's state in a LeaderAndIsr request.
type LeaderAndIsrState struct {
	ControllerEpoch int32
	Leader          int32
	LeaderEpoch     int32
	ISR             []int32
	PartitionEpoch  int32 // the state znode's version (zkVersion)
	Replicas        []int32
}

// Partition is this broker's replica of one partition (Kafka's
// kafka.cluster.Partition): the stage 02 partition (its log and append
// signal) plus what replication needs.
type Partition struct {
	*store.Partition
	Epochs   *LeaderEpochCache
	localID  int32
	quorum   Quorum
	lagMax   time.Duration // Options.LagTimeMax
	listener Listener
	logger   *slog.Logger
	now      func() time.Time

	// HWAdvanced is raised when the high watermark moves: consumers' long
	// polls and acks=all producers wait on it.
	HWAdvanced store.Signal

	mu              sync.RWMutex
	role            Role                    // Protected by mu.
	leaderID        int32                   // -1 if unknown. Protected by mu.
	leaderEpoch     int32                   // -1 before the first LeaderAndIsr. Protected by mu.
	partitionEpoch  int32                   // Protected by mu.
	controllerEpoch int32                   // Protected by mu.
	replicas        []int32                 // the assignment, in order. Protected by mu.
	isr             []int32                 // as the controller last said (stage 04 maintains it). Protected by mu.
	remotes         map[int32]*ReplicaState // leader only: each follower. Protected by mu.
	// epochStartOffset is where this leader's epoch starts: its log end
	// when it became leader (leader only). Protected by mu.
	epochStartOffset int64
	// highWatermark: Invariant: never moves backwards while this broker
	// leads, and never exceeds the log end offset. A follower takes its
	// leader's, bounded by its own log, which may move it back. Protected
	// by mu.
	highWatermark int64
}

// newPartition wraps a stage 02 partition. hw is the high watermark from
// the checkpoint, capped at the log end.
func newPartition(p *store.Partition, localID int32, hw int64, opts Options) (*Partition, error) {
	epochs, err := OpenLeaderEpochCache(p.Log.Dir())
	if err != nil {
		return nil, err
	}
	// The log may have been recovered shorter than the cache remembers.
	if err := epochs.TruncateFromEnd(p.Log.EndOffset()); err != nil {
		return nil, err
	}
	return &Partition{Partition: p, Epochs: epochs, localID: localID, quorum: opts.Quorum, lagMax: opts.LagTimeMax, listener: opts.Listener,
		logger: opts.Logger.With("partition", p.TopicPartition.String()), now: opts.Now,
		leaderID: -1, leaderEpoch: -1, highWatermark: min(hw, p.Log.EndOffset())}, nil
}

// Role is this broker's role for the partition.
func (p *Partition) Role() Role {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.role
}

// Leader returns the leader's id and epoch as this broker knows them.
func (p *Partition) Leader() (id, epoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leaderID, p.leaderEpoch
}

// Replicas returns the assignment and the ISR as the controller last said.
func (p *Partition) Replicas() (replicas, isr []int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.replicas), slices.Clone(p.isr)
}

// HighWatermark is the partition's high watermark.
func (p *Partition) HighWatermark() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.highWatermark
}

// Remote returns a copy of the leader's state for a follower.
func (p *Partition) Remote(id int32) (ReplicaState, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.remotes[id]
	if !ok {
		return ReplicaState{}, false
	}
	return *r, true
}

// checkStateLocked refuses a LeaderAndIsr state that is not newer than
// what the partition already has: Kafka ignores partition states whose
// leader epoch is not greater than its own.
func (p *Partition) checkStateLocked(s LeaderAndIsrState) error {
	// Also after StopReplica (role None): the epoch is still the newest
	// this replica has seen. A new partition starts at -1.
	if s.LeaderEpoch <= p.leaderEpoch {
		return fmt.Errorf("%w: %d, the partition is at %d", ErrStaleEpoch, s.LeaderEpoch, p.leaderEpoch)
	}
	if !slices.Contains(s.Replicas, p.localID) {
		return fmt.Errorf("%w: %v", ErrNotReplica, s.Replicas)
	}
	return nil
}

func (p *Partition) applyStateLocked(s LeaderAndIsrState, role Role) {
	p.role, p.leaderID, p.leaderEpoch = role, s.Leader, s.LeaderEpoch
	p.partitionEpoch, p.controllerEpoch = s.PartitionEpoch, s.ControllerEpoch
	p.replicas, p.isr = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	p.wakeWaitersLocked()
}

// wakeWaitersLocked wakes everything waiting on this replica: after a role
// or epoch change an acks=all producer must learn it lost its leader (as
// Kafka completes delayed produces in makeFollowers) and a long poll must
// answer with the new error, not wait out its timeout.
func (p *Partition) wakeWaitersLocked() {
	p.HWAdvanced.Notify()
	p.Appended.Notify()
}

// build 03.C: the partition's replication: leader and follower, appends, follower fetch state, the high watermark, truncation
// tests: TestLeaderHighWatermarkWaitsForEveryReplicaAndNeverGoesBack, TestLeaderStampsAndRecordsItsEpoch, TestFollowerLearnsEpochsFromBatchesAndTakesTheLeadersHighWatermark, TestLastCaughtUpTimeFollowsKafkasRule, TestAppendUnderMinISRWritesNothing, TestFollowerHighWatermarkFollowsTheLeaderEvenBackwards

// MakeLeader makes this broker the partition's leader at s.LeaderEpoch. The
// epoch starts at the log end offset: the first offset this leader will
// assign (Kafka's maybeAssignEpochStartOffset). The followers' log end
// offsets are unknown until they fetch.
func (p *Partition) MakeLeader(s LeaderAndIsrState) error {
	p.mu.Lock()
	if err := p.checkStateLocked(s); err != nil {
		p.mu.Unlock()
		return err
	}
	// In memory only: no fsync under the lock, nor one per partition in
	// a LeaderAndIsr. The Manager writes the checkpoint in the background,
	// and the first append of this epoch waits for it (AppendAsLeader).
	p.Epochs.assignUnflushed(s.LeaderEpoch, p.Log.EndOffset())
	p.applyStateLocked(s, Leader)
	p.epochStartOffset = p.Log.EndOffset()
	now := p.now()
	p.remotes = map[int32]*ReplicaState{}
	for _, id := range s.Replicas {
		if id != p.localID {
			// As Kafka's resetLastCaughtUpTime: an ISR member is taken to
			// be caught up now; any other replica never was, until it
			// fetches.
			caughtUp := time.Time{}
			if slices.Contains(s.ISR, id) {
				caughtUp = now
			}
			p.remotes[id] = &ReplicaState{LogEndOffset: -1, LogStartOffset: -1, lastFetchLeaderLEO: -1, LastFetchTime: now, LastCaughtUpTime: caughtUp}
		}
	}
	p.logger.Info("became leader", "epoch", s.LeaderEpoch, "replicas", s.Replicas, "isr", s.ISR, "log_end", p.Log.EndOffset(), "hw", p.highWatermark)
	p.maybeIncrementHWLocked()
	p.mu.Unlock()
	return nil // the Manager tells the listener (StateChanged) once it holds no lock
}

// MakeFollower makes this broker a follower of s.Leader at s.LeaderEpoch.
// The caller (re)starts fetching, which first truncates by epoch.
func (p *Partition) MakeFollower(s LeaderAndIsrState) error {
	p.mu.Lock()
	if err := p.checkStateLocked(s); err != nil {
		p.mu.Unlock()
		return err
	}
	p.applyStateLocked(s, Follower)
	p.remotes = nil
	p.logger.Info("became follower", "leader", s.Leader, "epoch", s.LeaderEpoch, "log_end", p.Log.EndOffset(), "hw", p.highWatermark)
	p.mu.Unlock()
	return nil // the Manager tells the listener
}

// Stop forgets the partition's role (StopReplica).
func (p *Partition) Stop() {
	p.mu.Lock()
	p.role, p.remotes = None, nil
	p.wakeWaitersLocked()
	p.mu.Unlock()
	// The Manager tells the listener.
}

// LeaderView is what a leader knows of its partition at one moment: the
// input of stage 04's ISR rules.
type LeaderView struct {
	LeaderEpoch     int32
	PartitionEpoch  int32 // the state's version the ISR was last written at
	ControllerEpoch int32
	Replicas        []int32
	ISR             []int32
	LogEndOffset    int64
	HighWatermark   int64
	// EpochStartOffset is where this leader's epoch starts: a follower
	// that has reached it has truncated to this leader's log.
	EpochStartOffset int64
	Followers        map[int32]ReplicaState
}

// LeaderView returns a copy of the leader's state, or false if this broker
// does not lead the partition.
func (p *Partition) LeaderView() (LeaderView, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.role != Leader {
		return LeaderView{}, false
	}
	v := LeaderView{LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ControllerEpoch: p.controllerEpoch,
		Replicas: slices.Clone(p.replicas), ISR: slices.Clone(p.isr), LogEndOffset: p.Log.EndOffset(),
		HighWatermark: p.highWatermark, EpochStartOffset: p.epochStartOffset,
		Followers: make(map[int32]ReplicaState, len(p.remotes))}
	for id, r := range p.remotes {
		v.Followers[id] = *r
	}
	return v, true
}

// InISR reports whether this broker leads the partition and id is in its
// ISR, copying nothing: stage 04 asks it after every follower fetch, and
// looks further (LeaderView) only for a follower outside the ISR.
func (p *Partition) InISR(id int32) (leads, in bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.role == Leader, slices.Contains(p.isr, id)
}

// UpdateISR installs an ISR that this leader changed and wrote to the
// partition state store (stage 04), where the write created version
// partitionEpoch. It applies only if the partition is still led here at
// leaderEpoch and still at basedOn, the partition epoch the change was
// computed from: otherwise the controller's LeaderAndIsr came in between,
// and its state wins. The high watermark is recomputed at once, so a slow
// follower's leaving lets it advance. It reports whether it applied.
func (p *Partition) UpdateISR(leaderEpoch, basedOn int32, isr []int32, partitionEpoch int32) bool {
	p.mu.Lock()
	if p.role != Leader || p.leaderEpoch != leaderEpoch || p.partitionEpoch != basedOn {
		p.mu.Unlock()
		return false
	}
	p.logger.Info("ISR changed", "from", p.isr, "to", isr, "partition_epoch", partitionEpoch, "hw", p.highWatermark)
	p.isr, p.partitionEpoch = slices.Clone(isr), partitionEpoch
	advanced := p.maybeIncrementHWLocked()
	p.HWAdvanced.Notify() // waiting acks=all producers re-check the ISR size
	p.mu.Unlock()
	p.listener.StateChanged(p)
	if advanced {
		p.listener.HighWatermarkAdvanced(p)
	}
	return true
}

// checkLeaderLocked checks that this broker leads at the epoch a client
// names (KIP-320; -1 names none). The epoch comes first, as in Kafka's
// Partition.getLocalLog: a client that knows a newer epoch than this broker
// gets UNKNOWN_LEADER_EPOCH even from a broker that just stopped leading.
func (p *Partition) checkLeaderLocked(clientEpoch int32) error {
	if err := checkEpoch(clientEpoch, p.leaderEpoch); err != nil {
		return err
	}
	if p.role != Leader {
		return ErrNotLeader
	}
	return nil
}

func checkEpoch(clientEpoch, epoch int32) error {
	switch code := store.CheckLeaderEpoch(clientEpoch, epoch); {
	case code == kerr.FencedLeaderEpoch.Code:
		return ErrFencedEpoch
	case code == kerr.UnknownLeaderEpoch.Code:
		return ErrUnknownEpoch
	}
	return nil
}

// AppendAsLeader appends a producer's batch, stamped with the leader epoch,
// and returns its offsets. Followers are woken to fetch it.
func (p *Partition) AppendAsLeader(batch []byte) (first, last int64, err error) {
	return p.AppendAsLeaderMinISR(batch, 0)
}

// AppendAsLeaderMinISR is AppendAsLeader for an acks=all produce under
// min.insync.replicas (stage 04): while the ISR has fewer than minISR
// members, the append is refused with ErrNotEnoughReplicas and nothing is
// written. The check and the append happen under one lock, so no ISR change
// slips between them (Kafka's appendRecordsToLeader holds its
// leaderIsrUpdateLock the same way).
func (p *Partition) AppendAsLeaderMinISR(batch []byte, minISR int) (first, last int64, err error) {
	// A batch of an epoch is written only once the epoch's entry is in
	// the checkpoint file (MakeLeader leaves it in memory): flush, with
	// no lock held, until the cache is flushed under the read lock too
	// (a LeaderAndIsr may have come in between).
	for {
		if err := p.Epochs.Flush(); err != nil {
			return 0, 0, err
		}
		p.mu.RLock()
		if p.Epochs.Flushed() {
			break // with the read lock held
		}
		p.mu.RUnlock()
	}
	if p.role != Leader {
		p.mu.RUnlock()
		return 0, 0, ErrNotLeader
	}
	if len(p.isr) < minISR {
		n := len(p.isr)
		p.mu.RUnlock()
		return 0, 0, fmt.Errorf("%w: %d in sync, min.insync.replicas is %d", ErrNotEnoughReplicas, n, minISR)
	}
	// Appending under the read lock keeps a leader change (which takes
	// the write lock) from interleaving with the append. Like Kafka, every
	// append first makes sure the cache knows where its epoch starts: a
	// no-op, since MakeLeader recorded it.
	epoch := p.leaderEpoch
	err = p.Epochs.Assign(epoch, p.Log.EndOffset())
	if err == nil {
		first, last, err = p.Log.AppendAsLeader(batch, epoch)
	}
	p.mu.RUnlock()
	if err != nil {
		return 0, 0, err
	}
	p.Appended.Notify()
	p.mu.Lock()
	advanced := p.maybeIncrementHWLocked() // a leader with no followers that count commits at once
	p.mu.Unlock()
	p.listener.Appended(p)
	if advanced {
		p.listener.HighWatermarkAdvanced(p)
	}
	return first, last, nil
}

// UpdateFollowerFetchState records a follower's fetch at fetchOffset: its
// log end offset is the offset it asks for, and its log start offset the
// one it tells (logStartOffset). The high watermark may advance, and the
// low watermark (LowWatermark).
func (p *Partition) UpdateFollowerFetchState(id int32, fetchOffset, logStartOffset int64, clientEpoch int32) error {
	advanced, err := p.updateFollowerFetchState(id, fetchOffset, logStartOffset, clientEpoch)
	if err != nil {
		return err
	}
	p.listener.FollowerFetched(p, id)
	if advanced {
		p.listener.HighWatermarkAdvanced(p)
	}
	return nil
}

func (p *Partition) updateFollowerFetchState(id int32, fetchOffset, logStartOffset int64, clientEpoch int32) (advanced bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkLeaderLocked(clientEpoch); err != nil {
		return false, err
	}
	r, ok := p.remotes[id]
	if !ok {
		return false, fmt.Errorf("%w: broker %d, replicas %v", ErrUnknownReplica, id, p.replicas)
	}
	// The position is recorded only if the read can succeed (Kafka updates
	// it after reading): a fetch outside the log says nothing true about
	// the follower's log end.
	now, leaderLEO, start := p.now(), p.Log.EndOffset(), p.Log.StartOffset()
	if fetchOffset > leaderLEO || fetchOffset < start {
		return false, fmt.Errorf("%w: follower %d fetches at %d, the leader holds [%d, %d]",
			commitlog.ErrOffsetOutOfRange, id, fetchOffset, start, leaderLEO)
	}
	// Kafka's rule for "caught up": it fetched at the leader's end, or at
	// least up to where the leader ended at its previous fetch (it was
	// caught up then).
	if fetchOffset >= leaderLEO {
		r.LastCaughtUpTime = now
	} else if r.lastFetchLeaderLEO >= 0 && fetchOffset >= r.lastFetchLeaderLEO && r.LastFetchTime.After(r.LastCaughtUpTime) {
		r.LastCaughtUpTime = r.LastFetchTime
	}
	r.LogEndOffset, r.LastFetchTime, r.lastFetchLeaderLEO = fetchOffset, now, leaderLEO
	r.LogStartOffset = logStartOffset
	return p.maybeIncrementHWLocked(), nil
}

// maybeIncrementHWLocked recomputes the high watermark from the followers
// that count, raises HWAdvanced if it moved, and reports whether it did
// (the caller tells the listener once the lock is released).
func (p *Partition) maybeIncrementHWLocked() bool {
	if p.role != Leader {
		return false
	}
	// exercise 03.2: the leader's high watermark, from the followers that count
	// hint: the Quorum decides who counts; your part is gathering their log ends for HighWatermark and never moving the high watermark backwards
	// tests: TestLeaderHighWatermarkWaitsForEveryReplicaAndNeverGoesBack, TestQuorumDecidesWhoCountsForTheHighWatermark, TestAFollowerCatchingUpBoundsTheHighWatermark
	counted := p.quorum.Counted(p.localID, p.replicas, p.isr)
	leos := make([]int64, 0, len(counted))
	for _, id := range counted {
		if r, ok := p.remotes[id]; ok {
			leos = append(leos, r.LogEndOffset)
		} else {
			leos = append(leos, -1)
		}
	}
	leos = append(leos, p.caughtUpLatelyLocked(counted)...)
	if hw := HighWatermark(p.Log.EndOffset(), leos); hw > p.highWatermark {
		p.highWatermark = hw
		p.HWAdvanced.Notify()
		return true
	}
	return false
	// end exercise
}

// caughtUpLatelyLocked returns the log ends of the followers outside
// counted that caught up within Options.LagTimeMax (Kafka 2.x's rule, for
// stage 04): they bound the high watermark too, so that one catching up can
// reach it and rejoin the ISR. Without a LagTimeMax there are none.
func (p *Partition) caughtUpLatelyLocked(counted []int32) []int64 {
	if p.lagMax <= 0 {
		return nil
	}
	var leos []int64
	now := p.now()
	for id, r := range p.remotes {
		if r.LogEndOffset >= 0 && !slices.Contains(counted, id) && now.Sub(r.LastCaughtUpTime) <= p.lagMax {
			leos = append(leos, r.LogEndOffset) // caught up lately: it counts too
		}
	}
	return leos
}

// StillLeadsBatch reports whether this broker still leads the partition
// and its log still holds, at offset last, the batch it appended under
// epoch: what a waiting acks=all produce needs to go on waiting. A leader
// epoch bumped with the same leader (the controller changing the ISR)
// keeps the batch; a leadership lost and won back may have truncated it,
// and another leader's batch at that offset carries another epoch.
func (p *Partition) StillLeadsBatch(last int64, epoch int32) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.role == Leader && last < p.Log.EndOffset() && p.Epochs.EpochForOffset(last) == epoch
}

// CheckLeader checks that this broker leads at clientEpoch (-1: any).
func (p *Partition) CheckLeader(clientEpoch int32) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.checkLeaderLocked(clientEpoch)
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as the leader: the largest
// epoch <= epoch this log knows and where it ends.
func (p *Partition) EndOffsetForEpoch(epoch, clientEpoch int32) (int32, int64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.checkLeaderLocked(clientEpoch); err != nil {
		return 0, 0, err
	}
	e, end := p.Epochs.EndOffsetFor(epoch, p.Log.EndOffset())
	return e, end, nil
}

// AppendAsFollower appends batches copied from the leader and takes the
// leader's high watermark, bounded by its own log (Kafka's
// updateHighWatermark): it may move back, if a new leader's is lower than
// what this replica learned from the old one. A partial batch at
// the end of records (the leader's read stops at its byte limit) is left for
// the next fetch. It returns the new log end offset.
func (p *Partition) AppendAsFollower(records []byte, leaderHW int64) (int64, error) {
	var n news
	defer func() { n.tell() }()
	return p.appendAsFollower(records, leaderHW, &n)
}

// appendAsFollower is AppendAsFollower, gathering what to tell in n: the
// fetcher tells it once the apply is done.
func (p *Partition) appendAsFollower(records []byte, leaderHW int64, n *news) (int64, error) {
	whole := wholeBatches(records)
	if len(whole) > 0 {
		// Each batch carries the epoch of the leader that appended it;
		// the cache learns where each epoch starts from them, and writes
		// it before the batches reach the log, as Kafka's append does: a
		// batch on disk whose epoch the checkpoint lacks would mislead
		// the truncation after a crash.
		changed := false
		for b := whole; len(b) > 0; {
			h, err := record.ReadHeader(b)
			if err != nil {
				return 0, err
			}
			changed = p.Epochs.assignUnflushed(h.PartitionLeaderEpoch, h.BaseOffset) || changed
			b = b[h.Size():]
		}
		if changed {
			if err := p.Epochs.Flush(); err != nil {
				return 0, err
			}
		}
		if _, _, err := p.Log.AppendAsFollower(whole); err != nil {
			return 0, err
		}
		p.Appended.Notify()
	}
	leo := p.Log.EndOffset()
	p.mu.Lock()
	hw := max(min(leaderHW, leo), p.Log.StartOffset())
	advanced := hw > p.highWatermark
	p.highWatermark = hw
	if advanced {
		p.HWAdvanced.Notify()
	}
	p.mu.Unlock()
	if len(whole) > 0 {
		n.add(func() { p.listener.Replicated(p, whole) })
		n.add(func() { p.listener.Appended(p) })
	}
	if advanced {
		n.add(func() { p.listener.HighWatermarkAdvanced(p) })
	}
	return leo, nil
}

// wholeBatches returns the prefix of records made of whole batches.
func wholeBatches(records []byte) []byte {
	n := 0
	for n < len(records) {
		_, size, err := record.PeekSize(records[n:])
		if err != nil || n+size > len(records) {
			break
		}
		n += size
	}
	return records[:n]
}

// TruncateTo removes the log's tail from offset, with the epochs that
// started there, as a follower does when its log diverged from its leader's.
func (p *Partition) TruncateTo(offset int64) error {
	var n news
	defer func() { n.tell() }()
	return p.truncateTo(offset, &n)
}

func (p *Partition) truncateTo(offset int64, n *news) error {
	if offset < 0 {
		return fmt.Errorf("replica: truncate %s to offset %d", p.TopicPartition, offset)
	}
	// The high watermark comes down first, so that nobody reads one past
	// the shortened log end.
	p.mu.Lock()
	p.highWatermark = min(p.highWatermark, offset)
	p.mu.Unlock()
	end, err := p.Log.TruncateTo(offset)
	if err != nil {
		return err
	}
	if err := p.Epochs.TruncateFromEnd(end); err != nil {
		return err
	}
	p.mu.Lock()
	p.highWatermark = min(p.highWatermark, end)
	p.mu.Unlock()
	n.add(func() { p.listener.Truncated(p, end) })
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, when
// the leader no longer has the offsets the follower needs.
func (p *Partition) TruncateFullyAndStartAt(offset int64) error {
	var n news
	defer func() { n.tell() }()
	return p.truncateFullyAndStartAt(offset, &n)
}

func (p *Partition) truncateFullyAndStartAt(offset int64, n *news) error {
	if err := p.Log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	if err := p.Epochs.Clear(); err != nil {
		return err
	}
	p.mu.Lock()
	p.highWatermark = offset
	p.mu.Unlock()
	n.add(func() { p.listener.Truncated(p, offset) })
	return nil
}

// end build
