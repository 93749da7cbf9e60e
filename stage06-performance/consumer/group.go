package consumer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// member is the consumer's side of a consumer group (Kafka's
// ConsumerCoordinator): it finds the group's coordinator, joins, runs
// the assignor when it is the leader, syncs, heartbeats, rejoins when
// the coordinator says a rebalance began, and commits.
//
// The protocol is Kafka's classic eager one: before rejoining, a member
// commits and gives up all its partitions; the new assignment may give
// them back.
type member struct {
	c *Consumer

	// gen is the membership the last SyncGroup completed, or
	// noGeneration; commits carry it, the heartbeat replaces it.
	gen atomic.Pointer[generation]
	// subscription is the topics of Subscribe; set once.
	subscription atomic.Pointer[[]string]

	coordMu sync.Mutex // guards coord
	coord   *wire.Conn // the coordinator's connection, nil until found or after it failed

	// memberID is the id the coordinator gave this member, "" before
	// the first JoinGroup and after leaving; close's LeaveGroup sends it.
	memberID atomic.Pointer[string]
	// lastPoll is when the application last was in Poll (UnixNano), and
	// polling how many Polls are under way: the heartbeat loop leaves the
	// group when the application spent max.poll.interval.ms outside Poll
	// (KIP-62), as Kafka's heartbeat thread does.
	lastPoll atomic.Int64
	polling  atomic.Int32
	// polled wakes run, waiting after such a leave, at the next Poll.
	polled chan struct{}
	// committer orders the member's commits (commitLoop sends them).
	committer *committer

	ctx    context.Context // cancelled by close: stops run
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns (at once if it never ran)
	ran    atomic.Bool
}

// errPollTimeout ends a generation from our side: the application did
// not Poll within max.poll.interval.ms.
var errPollTimeout = errors.New("consumer: no Poll within max.poll.interval.ms")

// generation is one membership: what OffsetCommit and Heartbeat send.
type generation struct {
	id       int32  // the group's generation id; -1 outside a group (Assign with a group.id)
	memberID string // "" before the first JoinGroup
}

var noGeneration = &generation{id: -1}

func newMember(c *Consumer) *member {
	m := &member{c: c, done: make(chan struct{}), polled: make(chan struct{}, 1), committer: newCommitter()}
	m.ctx, m.cancel = context.WithCancel(c.ctx)
	m.gen.Store(noGeneration)
	m.memberID.Store(new(string))
	return m
}

// pollStarted records that the application is in Poll, and wakes run if
// it left the group for want of one.
func (m *member) pollStarted() {
	m.polling.Add(1)
	m.lastPoll.Store(time.Now().UnixNano())
	select {
	case m.polled <- struct{}{}:
	default:
	}
}

// pollEnded records that the application has records to work on.
func (m *member) pollEnded() {
	m.lastPoll.Store(time.Now().UnixNano())
	m.polling.Add(-1)
}

// stuck reports whether the application spent max.poll.interval.ms
// outside Poll.
func (m *member) stuck() bool {
	return m.polling.Load() == 0 && time.Since(time.Unix(0, m.lastPoll.Load())) > m.c.cfg.MaxPollInterval
}

func (m *member) subscribe(topics []string) bool {
	return m.subscription.CompareAndSwap(nil, &topics)
}

func (m *member) subscribed() bool { return m.subscription.Load() != nil }

func (m *member) topics() []string {
	if t := m.subscription.Load(); t != nil {
		return *t
	}
	return nil
}

// run is the membership loop: join, sync, heartbeat, until close.
func (m *member) run() {
	m.ran.Store(true)
	defer close(m.done)
	m.lastPoll.Store(time.Now().UnixNano())
	for m.ctx.Err() == nil {
		gen, parts, err := m.join(*m.memberID.Load())
		if err != nil {
			if m.ctx.Err() == nil {
				m.c.log.Info("joining the group failed", "group", m.c.cfg.GroupID, "err", err)
				m.c.sleep(m.c.cfg.RetryBackoff)
			}
			if errors.Is(err, kerr.UnknownMemberID) {
				m.memberID.Store(new(string))
			}
			continue
		}
		committed, err := m.fetchCommitted(m.ctx, parts)
		if err != nil {
			continue // rejoin: the coordinator may have moved
		}
		m.gen.Store(gen)
		m.c.publish(parts, committed)
		m.c.log.Info("assigned", "group", m.c.cfg.GroupID, "member", gen.memberID, "generation", gen.id, "partitions", len(parts))
		err = m.heartbeat(gen)
		if m.ctx.Err() != nil {
			return // close commits and leaves
		}
		if errors.Is(err, errPollTimeout) {
			m.leaveUntilPolled()
			continue
		}
		// A rebalance began (or the membership was lost): eager
		// protocol, give everything up before rejoining.
		m.revoke(!errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.IllegalGeneration))
		if errors.Is(err, kerr.UnknownMemberID) {
			m.memberID.Store(new(string))
		}
	}
}

// leaveUntilPolled is what a stuck application gets: its partitions go
// to the others now, uncommitted (it may be stuck in the middle of a
// record), and the member waits for the next Poll to join again.
func (m *member) leaveUntilPolled() {
	c := m.c
	c.log.Warn("leaving the group: no Poll within max.poll.interval.ms", "group", c.cfg.GroupID,
		"max.poll.interval.ms", c.cfg.MaxPollInterval.Milliseconds())
	left := m.lastPoll.Load()
	m.revoke(false)
	ctx, cancel := context.WithTimeout(m.ctx, c.cfg.RequestTimeout)
	if err := m.leave(ctx); err != nil {
		c.log.Info("leave group failed", "group", c.cfg.GroupID, "err", err)
	}
	cancel()
	for m.polling.Load() == 0 && m.lastPoll.Load() == left && m.ctx.Err() == nil {
		select { // a signal from before the leave only costs a re-check
		case <-m.polled:
		case <-m.ctx.Done():
		}
	}
}

// join runs JoinGroup and SyncGroup and returns the new generation and
// this member's partitions.
func (m *member) join(memberID string) (*generation, []TopicPartition, error) {
	c := m.c
	conn, err := m.coordinator(m.ctx)
	if err != nil {
		return nil, nil, err
	}
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = c.cfg.GroupID
	req.SessionTimeoutMillis = int32(c.cfg.SessionTimeout.Milliseconds())
	req.RebalanceTimeoutMillis = int32(c.cfg.MaxPollInterval.Milliseconds())
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = m.topics()
	for _, s := range c.cfg.AssignmentStrategies {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = assignorNamed(s).name, meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
	}
	var resp *kmsg.JoinGroupResponse
	for {
		req.MemberID = memberID
		// JoinGroup waits for every member: up to the rebalance timeout.
		ctx, cancel := context.WithTimeout(m.ctx, c.cfg.MaxPollInterval+c.cfg.RequestTimeout)
		resp, err = request[*kmsg.JoinGroupResponse](ctx, conn, req, 0)
		cancel()
		if err != nil {
			m.lostCoordinator(conn)
			return nil, nil, err
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code { // KIP-394: join again with the id
			memberID = resp.MemberID
			m.memberID.Store(&memberID)
			continue
		}
		if err := m.checkCode(conn, resp.ErrorCode); err != nil {
			return nil, nil, fmt.Errorf("join group %s: %w", c.cfg.GroupID, err)
		}
		break
	}
	gen := &generation{id: resp.Generation, memberID: resp.MemberID}
	m.memberID.Store(&gen.memberID)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = c.cfg.GroupID, gen.id, gen.memberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), resp.Protocol
	if resp.LeaderID == resp.MemberID {
		if sync.GroupAssignment, err = m.lead(resp); err != nil {
			return nil, nil, err
		}
	}
	sresp, err := request[*kmsg.SyncGroupResponse](m.ctx, conn, sync, 0)
	if err != nil {
		m.lostCoordinator(conn)
		return nil, nil, err
	}
	if err := m.checkCode(conn, sresp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("sync group %s: %w", c.cfg.GroupID, err)
	}
	var mine kmsg.ConsumerMemberAssignment
	var parts []TopicPartition
	if len(sresp.MemberAssignment) > 0 {
		if err := mine.ReadFrom(sresp.MemberAssignment); err != nil {
			return nil, nil, fmt.Errorf("sync group %s: the assignment: %w", c.cfg.GroupID, err)
		}
	}
	for _, t := range mine.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, TopicPartition{t.Topic, p})
		}
	}
	return gen, parts, nil
}

// lead is the group leader's part of a rebalance: read every member's
// subscription, learn the topics' partition counts, run the assignor the
// coordinator chose.
func (m *member) lead(resp *kmsg.JoinGroupResponse) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	if resp.Protocol == nil || assignorNamed(*resp.Protocol) == nil {
		return nil, fmt.Errorf("join group %s: the coordinator chose an unknown assignor %v", m.c.cfg.GroupID, resp.Protocol)
	}
	subs := map[string][]string{}
	var topics []string
	for _, mem := range resp.Members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(mem.ProtocolMetadata); err != nil {
			return nil, fmt.Errorf("join group %s: member %s's metadata: %w", m.c.cfg.GroupID, mem.MemberID, err)
		}
		subs[mem.MemberID] = meta.Topics
		topics = append(topics, meta.Topics...)
	}
	md, err := m.c.pool.Refresh(m.ctx, topics)
	if err != nil {
		return nil, err
	}
	counts := map[string]int32{}
	for _, t := range topics {
		if mt := md.Topics[t]; mt != nil && mt.Err == nil {
			counts[t] = int32(len(mt.Partitions))
		}
	}
	plan := assignorNamed(*resp.Protocol).assign(subs, counts)
	var out []kmsg.SyncGroupRequestGroupAssignment
	for _, memberID := range sortedKeys(plan) {
		a := kmsg.NewConsumerMemberAssignment()
		for _, tp := range plan[memberID] {
			if n := len(a.Topics); n == 0 || a.Topics[n-1].Topic != tp.Topic {
				a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic})
			}
			t := &a.Topics[len(a.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = memberID, a.AppendTo(nil)
		out = append(out, ga)
	}
	return out, nil
}

// heartbeat beats every heartbeat.interval.ms until the coordinator
// answers with an error that ends the generation (a rebalance, a lost
// membership) or close; that error is returned.
func (m *member) heartbeat(gen *generation) error {
	c := m.c
	tick := time.NewTicker(c.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return m.ctx.Err()
		case <-tick.C:
		}
		if m.stuck() {
			return errPollTimeout
		}
		conn, err := m.coordinator(m.ctx)
		if err != nil {
			continue // the session times out if this lasts: the next answer says so
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = c.cfg.GroupID, gen.id, gen.memberID
		resp, err := request[*kmsg.HeartbeatResponse](m.ctx, conn, req, 0)
		if err != nil {
			m.lostCoordinator(conn)
			continue
		}
		if err := m.checkCode(conn, resp.ErrorCode); err != nil {
			if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) {
				continue
			}
			c.log.Info("heartbeat: the generation ends", "group", c.cfg.GroupID, "generation", gen.id, "err", err)
			return err
		}
	}
}

// revoke gives up every partition, committing what the application
// consumed first when the membership still allows it (Kafka's
// onPartitionsRevoked; a lost membership cannot commit).
func (m *member) revoke(commit bool) {
	if commit {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), m.c.cfg.RequestTimeout)
		if err := m.commit(ctx, consumedOffsets); err != nil {
			m.c.log.Info("commit before rebalance failed", "group", m.c.cfg.GroupID, "err", err)
		}
		cancel()
	}
	m.gen.Store(noGeneration)
	m.c.publish(nil, nil)
}

// close ends the membership: commit the positions (the application is
// done with everything Poll returned), give the partitions up, and leave
// the group at once rather than after session.timeout.ms.
func (m *member) close(ctx context.Context) error {
	m.cancel()
	if m.ran.Load() {
		<-m.done
	}
	<-m.committer.done // no commit is under way: this last one goes directly
	err := m.commitNow(ctx, positions)
	m.c.publish(nil, nil)
	return errors.Join(err, m.leave(ctx))
}

// leave sends LeaveGroup for the member id, if there is one, and
// forgets it: the coordinator rebalances at once instead of after
// session.timeout.ms.
func (m *member) leave(ctx context.Context) error {
	id := *m.memberID.Swap(new(string))
	m.gen.Store(noGeneration)
	if id == "" {
		return nil
	}
	conn, err := m.coordinator(ctx)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = m.c.cfg.GroupID, id
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = id
	req.Members = append(req.Members, lm)
	resp, err := request[*kmsg.LeaveGroupResponse](ctx, conn, req, 0)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	return err
}

// coordinator returns the connection to the group's coordinator, asking
// FindCoordinator when there is none.
func (m *member) coordinator(ctx context.Context) (*wire.Conn, error) {
	m.coordMu.Lock()
	conn := m.coord
	m.coordMu.Unlock()
	if conn != nil && conn.Err() == nil {
		return conn, nil
	}
	c := m.c
	for {
		conn, err := m.findCoordinator(ctx)
		if err == nil {
			m.coordMu.Lock()
			m.coord = conn
			m.coordMu.Unlock()
			return conn, nil
		}
		if !errors.Is(err, kerr.CoordinatorNotAvailable) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
			return nil, err
		}
		// The first FindCoordinator makes the broker create
		// __consumer_offsets; its leaders take a moment.
		t := time.NewTimer(c.cfg.RetryBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

func (m *member) findCoordinator(ctx context.Context) (*wire.Conn, error) {
	c := m.c
	var conn *wire.Conn
	var err error
	for _, addr := range c.cfg.BootstrapServers {
		if conn, err = c.pool.Conn(ctx, addr); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = c.cfg.GroupID
	req.CoordinatorKeys = []string{c.cfg.GroupID} // v4+ (KIP-699)
	resp, err := request[*kmsg.FindCoordinatorResponse](ctx, conn, req, 0)
	if err != nil {
		return nil, err
	}
	code, host, port := resp.ErrorCode, resp.Host, resp.Port
	if len(resp.Coordinators) > 0 {
		co := resp.Coordinators[0]
		code, host, port = co.ErrorCode, co.Host, co.Port
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, fmt.Errorf("find coordinator of %s: %w", c.cfg.GroupID, err)
	}
	return c.pool.Conn(ctx, net.JoinHostPort(host, strconv.Itoa(int(port))))
}

// checkCode turns an error code into its kerr error, forgetting the
// coordinator when the answer says it moved.
func (m *member) checkCode(conn *wire.Conn, code int16) error {
	err := kerr.ErrorForCode(code)
	if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) {
		m.lostCoordinator(conn)
	}
	return err
}

func (m *member) lostCoordinator(conn *wire.Conn) {
	m.coordMu.Lock()
	if m.coord == conn {
		m.coord = nil
	}
	m.coordMu.Unlock()
}
