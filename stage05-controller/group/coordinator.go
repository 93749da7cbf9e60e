package group

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/purgatory"
)

// Config is the coordinator's configuration, with Kafka's broker keys and
// defaults (DefaultConfig).
type Config struct {
	// Partitions is offsets.topic.num.partitions (50): fixed once the
	// topic exists, since it decides where every group lives.
	Partitions int32
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms (6 s) and group.max.session.timeout.ms
	// (30 min): the session timeouts a member may ask for.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s): the
	// first rebalance of an empty group waits this long, and again while
	// members keep joining (up to the rebalance timeout), so that a group
	// starting many consumers at once rebalances once, not once each.
	InitialRebalanceDelay time.Duration
	// MaxSize is group.max.size (Integer.MAX_VALUE): members per group.
	MaxSize int
	// MaxRecordBytes is the largest batch __consumer_offsets takes: its
	// max.message.bytes, which the topic inherits from the broker's
	// message.max.bytes (1048588). A group's metadata record carries every
	// member's protocol metadata, so it bounds what a group's members may
	// hold (JoinGroup answers GROUP_MAX_SIZE_REACHED past it) and so what
	// the coordinator keeps per group. 0 or less: no bound.
	MaxRecordBytes int
	// CommitTimeout is offsets.commit.timeout.ms (5 s): how long an offset
	// commit or group write waits for the ISR (acks=all).
	CommitTimeout time.Duration
	// MetadataMaxBytes is offset.metadata.max.bytes (4096): the longest
	// metadata string an offset commit may carry.
	MetadataMaxBytes int
	// LoadBufferBytes is offsets.load.buffer.size (5 MiB): how much of the
	// partition loading reads at a time.
	LoadBufferBytes int
	// OffsetsRetention is offsets.retention.ms (7 days): how long a
	// committed offset outlives its group's last member, or its last
	// commit (ExpireOffsets). 0 keeps offsets for ever.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheck is offsets.retention.check.interval.ms (10
	// min): how often expired offsets are looked for.
	OffsetsRetentionCheck time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{Partitions: 50, MinSessionTimeout: 6 * time.Second, MaxSessionTimeout: 30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second, MaxSize: 1<<31 - 1, MaxRecordBytes: 1048588, CommitTimeout: 5 * time.Second,
		MetadataMaxBytes: 4096, LoadBufferBytes: 5 << 20, OffsetsRetention: 7 * 24 * time.Hour, OffsetsRetentionCheck: 10 * time.Minute}
}

// newMemberJoinTimeout is how long a new member's JoinGroup may wait in a
// rebalance before the member is dropped (Kafka's NewMemberJoinTimeoutMs):
// its socket is muted meanwhile, so a client that gave up and retried
// would otherwise leave defunct members behind.
const newMemberJoinTimeout = 5 * time.Minute

// Writer appends to __consumer_offsets as its leader: the broker's produce
// path with acks=all (stage 04's Server.AppendRecords). done gets the
// produce error code (0 once the ISR has the batch), exactly once,
// possibly on another goroutine.
type Writer interface {
	Append(partition int32, batch []byte, timeout time.Duration, done func(code int16))
}

// Options are the parts of a Coordinator that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger     // slog.Default if nil
	Now    func() time.Time // time.Now if nil
}

// ownership is this broker's hold on one partition of __consumer_offsets,
// from one Elected to the next Resigned: each load installs its groups
// only into the ownership it was started for (compared by pointer), so a
// load that outlived its leadership installs nothing. Its fields are
// protected by Coordinator.mu.
type ownership struct {
	epoch   int32 // the newest leader epoch it was elected in
	loading bool  // its groups are being read from the log
	// failed: the load could not read the log; the partition answers
	// NOT_COORDINATOR until an election in a newer epoch loads it again
	// (Kafka's CoordinatorRuntime: LOADING -> FAILED, and FAILED ->
	// LOADING on a newer epoch).
	failed bool
	// decided are the transactions whose markers reached the partition
	// while it loaded (CompleteTxn): the load, whose read may have ended
	// before them, applies them as it installs the groups.
	decided []decidedTxn
}

// decidedTxn is a transaction's marker: its producer and the decision.
type decidedTxn struct {
	pid    int64
	commit bool
}

// Coordinator is the group coordinator of one broker: it serves the groups
// of the __consumer_offsets partitions this broker leads.
type Coordinator struct {
	cfg    Config
	out    Writer
	logger *slog.Logger
	now    func() time.Time

	joins      *purgatory.Purgatory[string] // DelayedJoin, by group id
	heartbeats *purgatory.Purgatory[string] // DelayedHeartbeat, by memberKey

	mu     sync.RWMutex
	owned  map[int32]*ownership // Protected by mu.
	groups map[string]*Group    // Protected by mu.
	closed bool                 // Protected by mu.
	loads  sync.WaitGroup
	stop   chan struct{} // closed by Close: ends the expiry loop
	expiry sync.WaitGroup
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config, out Writer, opts Options) *Coordinator {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Coordinator{cfg: cfg, out: out, logger: opts.Logger, now: opts.Now,
		joins:      purgatory.New[string]("Rebalance", purgatory.Options{}),
		heartbeats: purgatory.New[string]("Heartbeat", purgatory.Options{}),
		owned:      map[int32]*ownership{}, groups: map[string]*Group{}, stop: make(chan struct{})}
	if cfg.OffsetsRetention > 0 && cfg.OffsetsRetentionCheck > 0 {
		c.expiry.Go(func() {
			t := time.NewTicker(cfg.OffsetsRetentionCheck)
			defer t.Stop()
			for {
				select {
				case <-c.stop:
					return
				case <-t.C:
					c.ExpireOffsets()
				}
			}
		})
	}
	return c
}

// Purgatories are the coordinator's purgatories, Rebalance (parked
// JoinGroups) and Heartbeat (members' session timers), for Kafka's
// PurgatorySize metric, which final's metrics read.
func (c *Coordinator) Purgatories() []*purgatory.Purgatory[string] {
	return []*purgatory.Purgatory[string]{c.joins, c.heartbeats}
}

// Close stops the coordinator: groups are unloaded (parked requests
// answer NOT_COORDINATOR) and the purgatories stop.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	parts := slices.Collect(maps.Keys(c.owned))
	c.mu.Unlock()
	close(c.stop)
	c.expiry.Wait()
	for _, p := range parts {
		c.Resigned(p)
	}
	c.loads.Wait()
	c.joins.Shutdown()
	c.heartbeats.Shutdown()
}

// Partitions is offsets.topic.num.partitions.
func (c *Coordinator) Partitions() int32 { return c.cfg.Partitions }

// Elected tells the coordinator that this broker now leads partition p of
// __consumer_offsets in leader epoch epoch, with log l: it reads the
// partition's groups and offsets from the log on its own goroutine, and
// answers COORDINATOR_LOAD_IN_PROGRESS for them until it is done (Kafka's
// onElection and loadGroupsAndOffsets). Every load ends in one of two
// answers, never in loading for ever:
//
//	the log was read            the groups are served, even if newer
//	                            elections (an ISR change bumps the
//	                            epoch, same leader) came meanwhile
//	reading the log failed      NOT_COORDINATOR, until an election in a
//	                            newer epoch loads again
//	Resigned came meanwhile     NOT_COORDINATOR at once; the load, when
//	                            it ends, installs nothing
//
// A call for a partition it serves or loads already, in a newer leader
// epoch, only records the epoch.
func (c *Coordinator) Elected(p, epoch int32, l *commitlog.Log) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if o := c.owned[p]; o != nil && !(o.failed && epoch > o.epoch) {
		// Already served (or loading): a new leader epoch with the same
		// leader (the controller shrank or grew the ISR) changes nothing
		// here, and a reload would replace the live groups, their
		// rebalances and parked requests, with what the log holds (Kafka's
		// addLoadingPartition skips an owned partition, and a load in
		// progress goes on: "Already loading").
		o.epoch = max(o.epoch, epoch)
		c.mu.Unlock()
		return
	}
	o := &ownership{epoch: epoch, loading: true}
	c.owned[p] = o
	c.loads.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.loads.Done()
		start := c.now()
		found, end, err := c.read(l)
		if err != nil {
			// Kafka's old GroupMetadataManager logged the error and served
			// whatever it had read; its CoordinatorRuntime (3.6+) fails
			// the partition instead, and so does this: a group served
			// half-read would hand consumers no committed offset (and
			// auto.offset.reset) for partitions the log does hold.
			c.failLoad(p, o, err)
			return
		}
		n, offsets, ok := c.install(p, o, found)
		if !ok {
			c.logger.Info("dropped a load: the partition was resigned meanwhile", "partition", p, "epoch", epoch)
			return
		}
		c.logger.Info("loaded groups", "partition", p, "epoch", epoch, "groups", n, "offsets", offsets,
			"log_end", end, "took", c.now().Sub(start).Round(time.Millisecond))
	}()
}

// failLoad marks o failed after its load could not read the log, if this
// broker still holds the partition through o.
func (c *Coordinator) failLoad(p int32, o *ownership, err error) {
	c.mu.Lock()
	current := c.owned[p] == o && !c.closed
	if current {
		o.loading, o.failed = false, true
	}
	epoch := o.epoch
	c.mu.Unlock()
	if current {
		c.logger.Error("loading groups failed: answering NOT_COORDINATOR until elected in a newer epoch",
			"partition", p, "epoch", epoch, "err", err)
	}
}

// read reads every record of a partition's log, from its start to its
// end at the time of the call.
func (c *Coordinator) read(l *commitlog.Log) (*loaded, int64, error) {
	found := &loaded{groups: map[string]*kmsg.GroupMetadataValue{}, offsets: map[string]map[commitlog.TopicPartition]Offset{}}
	reader := record.GetReader(0)
	defer record.PutReader(reader)
	end := l.EndOffset()
	for offset := l.StartOffset(); offset < end; {
		region, err := l.ReadUpTo(offset, c.cfg.LoadBufferBytes, end)
		if err != nil {
			return nil, end, err
		}
		data, err := region.Bytes()
		if err != nil {
			return nil, end, err
		}
		if len(data) == 0 {
			break
		}
		next := offset
		for len(data) >= record.LogOverhead {
			_, size, err := record.PeekSize(data)
			if err != nil || size > len(data) {
				break
			}
			h, err := record.ReadHeader(data)
			if err != nil {
				return nil, end, err
			}
			switch {
			case h.Attributes.Control():
				// A transaction's marker: its offsets count, or not.
				if m, err := record.ReadMarker(&h, data[:size]); err != nil {
					c.logger.Warn("skipping a control batch of __consumer_offsets", "offset", h.BaseOffset, "err", err)
				} else {
					found.completeTxn(m.ProducerID, m.Commit)
				}
			default:
				it, err := reader.Records(data[:size])
				if err != nil {
					return nil, end, err
				}
				for it.Next() {
					r := it.Record()
					apply := found.apply
					if h.Attributes.Transactional() {
						apply = func(key, value []byte) error { return found.applyTxn(h.ProducerID, key, value) }
					}
					if err := apply(r.Key, r.Value); err != nil {
						c.logger.Warn("skipping a record of __consumer_offsets", "offset", h.BaseOffset+int64(r.OffsetDelta), "err", err)
					}
				}
				if err := it.Err(); err != nil {
					return nil, end, err
				}
			}
			next = h.NextOffset()
			data = data[size:]
		}
		if next == offset {
			return nil, end, fmt.Errorf("no progress reading from offset %d: a batch larger than offsets.load.buffer.size (%d)?", offset, c.cfg.LoadBufferBytes)
		}
		offset = next
	}
	return found, end, nil
}

// install makes the loaded groups live, if this broker still holds the
// partition through o (no Resigned came since the load began): a group
// with members is Stable, and each member must heartbeat within its
// session timeout; one without is Empty. ok is false when it installed
// nothing.
func (c *Coordinator) install(p int32, o *ownership, found *loaded) (groups, offsets int, ok bool) {
	now := c.now()
	built := map[string]*Group{}
	for id, v := range found.groups {
		if v == nil {
			continue
		}
		g := newGroup(id, p, now)
		g.protoType, g.generation = v.ProtocolType, v.Generation
		if v.Protocol != nil {
			g.protocol = *v.Protocol
		}
		if v.CurrentStateTimestamp > 0 {
			g.stateTime = time.UnixMilli(v.CurrentStateTimestamp)
		}
		for _, vm := range v.Members {
			m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
				rebalance: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond, session: time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
				protoType: v.ProtocolType, protocols: []protocol{{name: g.protocol, metadata: vm.Subscription}}, assignment: vm.Assignment}
			g.add(m)
		}
		if v.Leader != nil && g.members[*v.Leader] != nil {
			g.leader = *v.Leader
		}
		if len(g.members) > 0 {
			g.state = Stable
		}
		built[id] = g
	}
	for id, offs := range found.offsets {
		if len(offs) == 0 {
			continue
		}
		if built[id] == nil {
			built[id] = newGroup(id, p, now)
		}
		built[id].offsets = offs
		offsets += len(offs)
	}
	for pid, txn := range found.txns { // open transactions: their markers will come
		for id, offs := range txn {
			if built[id] == nil {
				built[id] = newGroup(id, p, now)
			}
			g := built[id]
			if g.txnOffsets == nil {
				g.txnOffsets = map[int64]map[commitlog.TopicPartition]Offset{}
			}
			g.txnOffsets[pid] = offs
		}
	}
	c.mu.Lock()
	if c.owned[p] != o || c.closed {
		c.mu.Unlock()
		return 0, 0, false
	}
	for _, d := range o.decided {
		for _, g := range built {
			g.completeTxnLocked(d.pid, d.commit) // not visible yet: no lock needed
		}
	}
	o.decided = nil
	for _, g := range built {
		c.groups[g.id] = g
	}
	o.loading = false
	c.mu.Unlock()
	for _, g := range built {
		g.lock()
		for _, m := range g.members {
			c.scheduleHeartbeat(g, m, m.session)
		}
		g.unlock()
	}
	return len(built), offsets, true
}

// Resigned tells the coordinator that this broker no longer leads
// partition p of __consumer_offsets: its groups are dropped, and requests
// parked in them answer NOT_COORDINATOR, so that their clients look the
// coordinator up again (Kafka's onResignation).
func (c *Coordinator) Resigned(p int32) {
	c.mu.Lock()
	if c.owned[p] == nil {
		c.mu.Unlock()
		return
	}
	delete(c.owned, p)
	var dropped []*Group
	for id, g := range c.groups {
		if g.partition == p {
			dropped = append(dropped, g)
			delete(c.groups, id)
		}
	}
	c.mu.Unlock()
	for _, g := range dropped {
		g.lock()
		c.unloaded(g)
		g.unlock()
	}
	if len(dropped) > 0 {
		c.logger.Info("unloaded groups", "partition", p, "groups", len(dropped))
	}
}

// unloaded marks a group Dead and answers its parked requests with
// NOT_COORDINATOR (Kafka's onGroupUnloaded).
func (c *Coordinator) unloaded(g *Group) {
	g.transition(Dead, c.now())
	for _, m := range g.members {
		if m.awaitingJoin != nil {
			c.answerJoin(g, m, joinError(m.id, kerr.NotCoordinator.Code))
		}
		if m.awaitingSync != nil {
			c.answerSync(g, m, syncError(kerr.NotCoordinator.Code))
		}
		c.clearHeartbeat(g, m)
	}
	// Nothing in the purgatories may keep the dropped group, members and
	// all: the rebalance in progress is over, and its DelayedJoin
	// completes now rather than at the rebalance timeout; so do the
	// expiries of member ids handed out (MEMBER_ID_REQUIRED) rather than
	// at their session timeout.
	for id := range g.pending {
		delete(g.pending, id)
		key := memberKey(g.id, id)
		g.later(func() { c.heartbeats.CheckAndComplete(key) })
	}
	g.join = nil
	c.wakeJoin(g)
}

// Owns reports this broker's hold on the partition of groupID: NONE when
// it serves the group, COORDINATOR_LOAD_IN_PROGRESS while it loads the
// partition, NOT_COORDINATOR when it does not lead it or could not load it.
func (c *Coordinator) Owns(groupID string) int16 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ownsLocked(PartitionFor(groupID, c.cfg.Partitions))
}

func (c *Coordinator) ownsLocked(p int32) int16 {
	switch o := c.owned[p]; {
	case c.closed || o == nil || o.failed:
		return kerr.NotCoordinator.Code
	case o.loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// errNoGroup: the group does not exist (and was not to be created).
var errNoGroup = errors.New("no such group")

// lookup returns the locked group groupID, creating an empty one if create
// is set, or the error code that answers for it: INVALID_GROUP_ID for an
// empty id, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, and nil with
// code 0 when the group does not exist and create is not set.
func (c *Coordinator) lookup(groupID string, create bool) (*Group, int16) {
	if groupID == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	p := PartitionFor(groupID, c.cfg.Partitions)
	c.mu.Lock()
	if code := c.ownsLocked(p); code != 0 {
		c.mu.Unlock()
		return nil, code
	}
	g := c.groups[groupID]
	if g == nil && create {
		g = newGroup(groupID, p, c.now())
		c.groups[groupID] = g
	}
	c.mu.Unlock()
	if g == nil {
		return nil, 0
	}
	g.lock()
	return g, 0
}

// forget removes a Dead group from the coordinator.
func (c *Coordinator) forget(g *Group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.mu.Unlock()
}

// snapshot returns the groups this broker serves now.
func (c *Coordinator) snapshot() (groups []*Group, loading bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, o := range c.owned {
		loading = loading || o.loading
	}
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *Group) int { return strings.Compare(a.id, b.id) })
	return groups, loading
}

// store appends keys and values to the group's partition with acks=all
// and calls done with the error code a client should get, on the
// appender's goroutine and without the group's lock (Kafka's
// GroupMetadataManager.appendForGroup, with storeOffsets' error mapping:
// offset commits, and the tombstones of deletions and expiry).
func (c *Coordinator) store(g *Group, keys, values [][]byte, done func(code int16)) {
	c.appendBatch(g, batchOf(c.now(), keys, values), func(code int16) { done(commitErrorCode(code)) })
}

// storeGroup appends the group's metadata record (groupValue), as store
// does, with storeGroup's error mapping.
func (c *Coordinator) storeGroup(g *Group, value []byte, done func(code int16)) {
	batch := batchOf(c.now(), [][]byte{groupKey(g.id)}, [][]byte{value})
	c.appendBatch(g, batch, func(code int16) { done(groupErrorCode(code)) })
}

func (c *Coordinator) appendBatch(g *Group, batch []byte, done func(code int16)) {
	p := g.partition
	g.later(func() { c.out.Append(p, batch, c.cfg.CommitTimeout, done) })
}

// commitErrorCode maps a produce error to what an offset commit's client
// can act on, as Kafka does (storeOffsets).
func commitErrorCode(code int16) int16 {
	switch code {
	case 0:
		return 0
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return kerr.InvalidCommitOffsetSize.Code
	}
	return kerr.UnknownServerError.Code
}

// groupErrorCode maps a produce error to what a SyncGroup or JoinGroup
// client can act on, as Kafka's GroupMetadataManager.storeGroup does: a
// timed-out write makes the group rebalance, and a record too large for
// the topic (the leader's assignments, which no bound at JoinGroup can
// foresee) is UNKNOWN_SERVER_ERROR: INVALID_COMMIT_OFFSET_SIZE names an
// offset commit, and would mislead.
func groupErrorCode(code int16) int16 {
	switch code {
	case 0:
		return 0
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.RequestTimedOut.Code:
		return kerr.RebalanceInProgress.Code
	}
	return kerr.UnknownServerError.Code
}
