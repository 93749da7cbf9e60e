package group

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// build 05.E: a consumer group: its states and members
// tests: TestJoinGroupAsksForMemberIDThenCompletesAloneWithGenerationOne, TestListGroupsFiltersByState, TestHeartbeatAnswers

// State is a group's state, with Kafka's names (GroupState.scala):
//
//	                 member joins, leaves or fails
//	+-------+  first join   +--------------------+
//	| Empty | ------------> | PreparingRebalance | <-----------------+
//	+-------+               +--------------------+                   |
//	  ^   ^                   |  every member joined,                |
//	  |   | all members left  |  or the rebalance timeout            |
//	  |   +-------------------+                                      |
//	  |                       v                                      |
//	  |             +---------------------+  member joins, leaves,   |
//	  |             | CompletingRebalance | -- fails, or the leader -+
//	  |             +---------------------+    syncs with an error   |
//	  |                       |  the leader's SyncGroup              |
//	  |                       v  (assignment stored)                 |
//	  |                  +--------+                                  |
//	  |                  | Stable | ---------------------------------+
//	  |                  +--------+
//	  |  DeleteGroups, or the partition's leadership moves away:
//	  +--------------------------------------------------> Dead
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	return [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}[s]
}

// validPrevious is Kafka's table of the states each state may be entered
// from; transition refuses anything else, which would be a bug here.
var validPrevious = map[State][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
}

// protocol is one of a member's protocols (for consumers: an assignor, such
// as "range" or "cooperative-sticky"), with its metadata (the subscription),
// passed through untouched.
type protocol struct {
	name     string
	metadata []byte
}

// member is a group member (Kafka's MemberMetadata).
type member struct {
	id         string
	instanceID *string // group.instance.id: a static member (KIP-345)
	clientID   string
	clientHost string
	joinOrder  uint64 // when it first joined: the next leader is the oldest member
	rebalance  time.Duration
	session    time.Duration
	protoType  string
	protocols  []protocol
	assignment []byte

	// awaitingJoin and awaitingSync answer the member's parked JoinGroup
	// or SyncGroup; nil when none is parked.
	awaitingJoin func(*kmsg.JoinGroupResponse)
	awaitingSync func(*kmsg.SyncGroupResponse)
	// isNew: joined in the current rebalance and not answered yet; such a
	// member cannot heartbeat (it may not know its id), so it is expired
	// after newMemberJoinTimeout instead of kept alive while it waits.
	isNew bool
	// leaving: LeaveGroup removed it; its heartbeat expectation completes.
	leaving bool
	// hb is the member's current session expectation; each heartbeat
	// replaces it with a new one.
	hb *delayedHeartbeat
}

// matches reports whether protos are exactly the member's protocols: a
// member rejoining with the same ones needs no new assignment.
func (m *member) matches(protos []protocol) bool {
	return slices.EqualFunc(m.protocols, protos, func(a, b protocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

// metadataBytes is what the member's protocols' metadata take: what the
// coordinator holds for it (the bytes of its JoinGroup request, which kmsg
// decodes without copying: one copy, not one per use).
func (m *member) metadataBytes() int { return protocolBytes(m.protocols) }

func protocolBytes(protos []protocol) int {
	n := 0
	for _, p := range protos {
		n += len(p.metadata)
	}
	return n
}

// metadata is the member's metadata for protocol name.
func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// keptAlive is Kafka's rule (hasSatisfiedHeartbeat) for a member whose
// heartbeat deadline passed with no heartbeat: one waiting in a
// rebalance it already belongs to is kept (it cannot heartbeat while its
// JoinGroup or SyncGroup is parked); a new member waiting for its first
// JoinGroup answer, or one that just went quiet, is not.
func (m *member) keptAlive() bool {
	return !m.isNew && (m.awaitingJoin != nil || m.awaitingSync != nil)
}

// Offset is a committed offset (Kafka's OffsetAndMetadata).
type Offset struct {
	Offset      int64
	LeaderEpoch int32 // -1 if the consumer did not say
	Metadata    string
	CommitTime  int64 // ms
	ExpireTime  int64 // ms, -1 unless a v1 commit asked for one
}

// Group is a consumer group (Kafka's GroupMetadata). Every field is
// protected by mu; see lock and unlock.
type Group struct {
	id        string
	partition int32 // of __consumer_offsets

	mu         sync.Mutex
	state      State
	stateTime  time.Time // when state was entered (currentStateTimestamp)
	protoType  string    // "" until a member joins ("consumer", "connect", ...)
	protocol   string    // the chosen protocol of this generation; "" when Empty
	generation int32
	leader     string // "" when there are no members
	members    map[string]*member
	pending    map[string]bool   // member ids handed out with MEMBER_ID_REQUIRED, not joined yet
	static     map[string]string // group.instance.id -> member id
	joins      uint64            // members ever added: member.joinOrder
	// newMemberAdded: a member joined during the initial rebalance delay
	// (group.initial.rebalance.delay.ms), which therefore goes on.
	newMemberAdded bool
	join           *delayedJoin // the rebalance in progress, if any
	offsets        map[commitlog.TopicPartition]Offset
	// txnOffsets are offsets committed in transactions not decided yet,
	// by producer id (txn_offsets.go).
	txnOffsets map[int64]map[commitlog.TopicPartition]Offset
	// after holds what must run once mu is released: purgatory calls
	// (whose callbacks take mu), appends to __consumer_offsets (Writer)
	// and answers (reply).
	after []func()
}

func newGroup(id string, partition int32, now time.Time) *Group {
	return &Group{id: id, partition: partition, stateTime: now, members: map[string]*member{}, pending: map[string]bool{},
		static: map[string]string{}, offsets: map[commitlog.TopicPartition]Offset{}}
}

// ID is the group's id.
func (g *Group) ID() string { return g.id }

// lock takes the group's lock.
func (g *Group) lock() { g.mu.Lock() }

// later queues f to run when the lock is released.
func (g *Group) later(f func()) { g.after = append(g.after, f) }

// reply answers a request while the lock is held: respond is the
// caller's (the server hands the answer to the network layer, which
// encodes it; a test's may send the next request), so it runs once the
// lock is released, as every answer of this package does.
func reply[T any](g *Group, respond func(T), resp T) { g.later(func() { respond(resp) }) }

// unlock releases the lock and runs what was queued meanwhile.
func (g *Group) unlock() {
	after := g.after
	g.after = nil
	g.mu.Unlock()
	for _, f := range after {
		f()
	}
}

func (g *Group) is(s State) bool { return g.state == s }

func (g *Group) transition(to State, now time.Time) {
	if !slices.Contains(validPrevious[to], g.state) {
		panic(fmt.Sprintf("group %s: illegal transition %s -> %s", g.id, g.state, to))
	}
	g.state, g.stateTime = to, now
}

// add makes m a member; the first member of an empty group becomes its
// leader and sets its protocol type.
func (g *Group) add(m *member) {
	if len(g.members) == 0 {
		g.protoType = m.protoType
	}
	g.joins++
	m.joinOrder = g.joins
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove takes a member out; if it led the group, the oldest remaining
// member leads now.
func (g *Group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if len(g.members) == 0 {
		// A Go map keeps its buckets when emptied: a group that had
		// thousands of members would hold them for as long as it lives
		// (offsets.retention.ms after it empties).
		g.members, g.static = map[string]*member{}, map[string]string{}
	}
	if g.leader == id {
		g.leader = g.oldest(func(*member) bool { return true })
	}
}

// oldest is the id of the earliest-joined member for which ok holds, or "".
func (g *Group) oldest(ok func(*member) bool) string {
	var best *member
	for _, m := range g.members {
		if ok(m) && (best == nil || m.joinOrder < best.joinOrder) {
			best = m
		}
	}
	if best == nil {
		return ""
	}
	return best.id
}

// supports reports whether a member with this protocol type and these
// protocols may join: an empty group takes any, otherwise the type must
// match and one protocol must be one every member supports.
func (g *Group) supports(protoType string, protos []protocol) bool {
	if protoType == "" || len(protos) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protoType != g.protoType {
		return false
	}
	for _, p := range protos {
		if g.supportedByAll(p.name) {
			return true
		}
	}
	return false
}

func (g *Group) supportedByAll(name string) bool {
	for _, m := range g.members {
		if !slices.ContainsFunc(m.protocols, func(p protocol) bool { return p.name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the first of its own list; the most
// votes win (ties go to the earliest in the oldest member's preference,
// where Kafka's choice is unspecified).
func (g *Group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supportedByAll(p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	if oldest := g.members[g.oldest(func(*member) bool { return true })]; oldest != nil {
		for _, p := range oldest.protocols {
			if v, ok := votes[p.name]; ok && v > bestVotes {
				best, bestVotes = p.name, v
			}
		}
	}
	return best
}

// allJoined: every member is waiting in JoinGroup and no member id handed
// out is still to come (Kafka's hasAllMembersJoined).
func (g *Group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.awaitingJoin == nil {
			return false
		}
	}
	return true
}

// metadataBytes is what the protocol metadata of all the members take.
func (g *Group) metadataBytes() int {
	n := 0
	for _, m := range g.members {
		n += m.metadataBytes()
	}
	return n
}

// rebalanceTimeout is the longest rebalance timeout of the members: how
// long a rebalance waits for them to rejoin.
func (g *Group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// membersForLeader is the member list the leader gets in its JoinGroup
// answer, with each member's metadata for the chosen protocol.
func (g *Group) membersForLeader() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, m := range g.sortedMembers() {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = m.id, m.instanceID, m.metadata(g.protocol)
		out = append(out, jm)
	}
	return out
}

// sortedMembers is the members in join order.
func (g *Group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.joinOrder, b.joinOrder) })
	return ms
}

// subscribedTopics is the topics the members of a consumer group
// subscribe to, decoded from the chosen protocol's metadata (Kafka's
// ConsumerProtocol subscription); ok is false when they cannot be known.
func (g *Group) subscribedTopics() (topics map[string]bool, ok bool) {
	if g.protoType != "consumer" || g.protocol == "" {
		return nil, false
	}
	topics = map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadata(g.protocol)); err != nil {
			return nil, false
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// end build
