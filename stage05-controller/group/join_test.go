package group_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// KIP-394: a JoinGroup v4+ with no member id is sent back with one; the
// second JoinGroup, with it, starts the rebalance, which with
// group.initial.rebalance.delay.ms 0 and one member completes at once.
func TestJoinGroupAsksForMemberIDThenCompletesAloneWithGenerationOne(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)

	tooShort := newMember().timeouts(5*time.Millisecond, longTime)
	require.Equal(t, kerr.InvalidSessionTimeout.Code, join(t, c, testGroup, tooShort).ErrorCode)

	m := newMember()
	resp := join(t, c, testGroup, m)
	require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
	require.Regexp(t, `^client-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, resp.MemberID)
	require.Equal(t, int32(-1), resp.Generation)
	require.Equal(t, "Empty", describe(t, c, testGroup).State, "a member id handed out is not a member yet")

	resp = join(t, c, testGroup, m)
	require.Zero(t, resp.ErrorCode, code(resp.ErrorCode))
	require.Equal(t, int32(1), resp.Generation)
	require.Equal(t, m.id, resp.MemberID)
	require.Equal(t, m.id, resp.LeaderID)
	require.Equal(t, "range", *resp.Protocol)
	require.Equal(t, "consumer", *resp.ProtocolType)
	require.Equal(t, []string{m.id}, leaderMemberIDs(resp))
	require.Equal(t, subscription("t1"), resp.Members[0].ProtocolMetadata)
	require.Equal(t, "CompletingRebalance", describe(t, c, testGroup).State)

	sync := await(t, syncAsync(c, testGroup, m, assignAll(m)))
	require.Zero(t, sync.ErrorCode)
	require.Equal(t, assignmentOf(m.id), sync.MemberAssignment)
	d := describe(t, c, testGroup)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "range", d.Protocol)
	require.Equal(t, assignmentOf(m.id), d.Members[0].MemberAssignment)
}

// The states, seen through DescribeGroups, with group.initial.rebalance.delay.ms
// long enough to watch PreparingRebalance: the first member to join leads
// and alone gets the member list; a follower's SyncGroup waits for the
// leader's, which brings every member its assignment.
func TestFirstMemberLeadsAndFollowersSyncGroupWaitsForTheLeaders(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.InitialRebalanceDelay = 200 * time.Millisecond })
	c := h.coordinator(1)
	m1, m2 := newMember().timeouts(longTime, shortTime), newMember().timeouts(longTime, shortTime)
	getID(t, c, testGroup, m1)
	getID(t, c, testGroup, m2)
	require.Equal(t, "Empty", describe(t, c, testGroup).State)

	j1 := joinAsync(c, testGroup, m1)
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	j2 := joinAsync(c, testGroup, m2)
	r1, r2 := await(t, j1), await(t, j2)
	adopt(m1, r1)
	adopt(m2, r2)
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Equal(t, int32(1), r1.Generation)
	require.Equal(t, int32(1), r2.Generation)
	require.Equal(t, m1.id, r1.LeaderID)
	require.Equal(t, m1.id, r2.LeaderID)
	require.Equal(t, []string{m1.id, m2.id}, leaderMemberIDs(r1), "the leader gets every member, in join order")
	require.Empty(t, r2.Members, "a follower gets no member list")
	require.Equal(t, "CompletingRebalance", describe(t, c, testGroup).State)

	s2 := syncAsync(c, testGroup, m2, nil)
	noAnswerYet(t, s2, "the follower's SyncGroup before the leader's")
	require.Zero(t, heartbeat(c, testGroup, m2), "a member waiting for its assignment heartbeats")
	s1 := syncAsync(c, testGroup, m1, assignAll(m1, m2))
	a1, a2 := await(t, s1), await(t, s2)
	require.Zero(t, a1.ErrorCode)
	require.Zero(t, a2.ErrorCode)
	require.Equal(t, assignmentOf(m1.id), a1.MemberAssignment)
	require.Equal(t, assignmentOf(m2.id), a2.MemberAssignment)
	require.Equal(t, "Stable", describe(t, c, testGroup).State)

	// A SyncGroup in Stable (a retry) answers the stored assignment at once.
	again := await(t, syncAsync(c, testGroup, m2, nil))
	require.Equal(t, assignmentOf(m2.id), again.MemberAssignment)
}

func TestHeartbeatAnswers(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1, m2)

	require.Equal(t, "NONE", code(heartbeat(c, testGroup, m1)))
	stale := *m1
	stale.gen--
	require.Equal(t, code(kerr.IllegalGeneration.Code), code(heartbeat(c, testGroup, &stale)))
	stranger := newMember()
	stranger.id, stranger.gen = "stranger", m1.gen
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, testGroup, stranger)))
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, "no-such-group", m1)))

	// A new member's JoinGroup starts a rebalance; the others learn it
	// from their heartbeats, and the generation moves on once they rejoin.
	m3 := newMember()
	getID(t, c, testGroup, m3)
	j3 := joinAsync(c, testGroup, m3)
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	require.Equal(t, code(kerr.RebalanceInProgress.Code), code(heartbeat(c, testGroup, m1)))
	require.Equal(t, code(kerr.RebalanceInProgress.Code), code(heartbeat(c, testGroup, m2)))
	j1, j2 := joinAsync(c, testGroup, m1), joinAsync(c, testGroup, m2)
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{j1, j2, j3} {
		resp := await(t, ch)
		require.Zero(t, resp.ErrorCode, code(resp.ErrorCode))
		require.Equal(t, m1.gen+1, resp.Generation)
	}
}

// A member that stops heartbeating is removed after session.timeout.ms;
// the others' heartbeats say REBALANCE_IN_PROGRESS, they rejoin, and the
// next generation is without it.
func TestSessionTimeoutRemovesTheSilentMember(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2, m3 := newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime)
	stableGroup(t, c, testGroup, m1, m2, m3)

	// m2 goes quiet.
	require.Eventually(t, func() bool {
		c1, c3 := heartbeat(c, testGroup, m1), heartbeat(c, testGroup, m3)
		return c1 == kerr.RebalanceInProgress.Code && c3 == kerr.RebalanceInProgress.Code
	}, waitFor, tick)
	require.Equal(t, []string{m1.id, m3.id}, memberIDs(describe(t, c, testGroup)))

	j1, j3 := joinAsync(c, testGroup, m1), joinAsync(c, testGroup, m3)
	r1, r3 := await(t, j1), await(t, j3)
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Zero(t, r3.ErrorCode, code(r3.ErrorCode))
	require.Equal(t, m1.gen+1, r1.Generation)
	require.Equal(t, m1.id, r1.LeaderID)
	require.Equal(t, []string{m1.id, m3.id}, leaderMemberIDs(r1))
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, testGroup, m2)))
}

// If the silent member led the group, the oldest remaining member leads
// the next generation and gets the member list.
func TestSessionTimeoutOfTheLeaderHandsLeadershipToTheOldestMember(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2, m3 := newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime)
	stableGroup(t, c, testGroup, m1, m2, m3)

	require.Eventually(t, func() bool {
		c2, c3 := heartbeat(c, testGroup, m2), heartbeat(c, testGroup, m3)
		return c2 == kerr.RebalanceInProgress.Code && c3 == kerr.RebalanceInProgress.Code
	}, waitFor, tick)

	j3, j2 := joinAsync(c, testGroup, m3), joinAsync(c, testGroup, m2) // the order of rejoining does not matter
	r2, r3 := await(t, j2), await(t, j3)
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Zero(t, r3.ErrorCode, code(r3.ErrorCode))
	require.Equal(t, m2.id, r2.LeaderID)
	require.Equal(t, m2.id, r3.LeaderID)
	require.Equal(t, []string{m2.id, m3.id}, leaderMemberIDs(r2))
	require.Empty(t, r3.Members)
}

// A member that does not rejoin within the rebalance timeout is removed
// when the join phase completes without it.
func TestMemberNotRejoiningWithinRebalanceTimeoutIsRemoved(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember().timeouts(longTime, shortTime), newMember().timeouts(longTime, shortTime)
	stableGroup(t, c, testGroup, m1, m2)

	// The leader rejoins (as after a metadata change); m2 stays away.
	start := time.Now()
	r1 := await(t, joinAsync(c, testGroup, m1))
	require.GreaterOrEqual(t, time.Since(start), shortTime-20*time.Millisecond, "the join waited for the rebalance timeout")
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Equal(t, m1.gen+1, r1.Generation)
	require.Equal(t, []string{m1.id}, leaderMemberIDs(r1))
	require.Equal(t, []string{m1.id}, memberIDs(describe(t, c, testGroup)))
	m2.gen = r1.Generation
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, testGroup, m2)))
}

// LeaveGroup v3+ takes a batch, each member by member id or, for a static
// member, by group.instance.id.
func TestLeaveGroupBatchByMemberIDAndInstanceID(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2, s, m4 := newMember(), newMember(), newMember().static("instance-s"), newMember()
	stableGroup(t, c, testGroup, m1, m2, s, m4)

	wrong := "instance-s"
	resp := c.LeaveGroup(leaveRequest(testGroup,
		leaving(m4.id, &wrong), // instance-s is not m4's: fenced, m4 stays
		leaving(m2.id, nil),
		leaving("", s.instance),
		leaving("stranger", nil),
	))
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Members, 4)
	require.Equal(t, []string{code(kerr.FencedInstanceID.Code), "NONE", "NONE", code(kerr.UnknownMemberID.Code)},
		[]string{code(resp.Members[0].ErrorCode), code(resp.Members[1].ErrorCode), code(resp.Members[2].ErrorCode), code(resp.Members[3].ErrorCode)})
	d := describe(t, c, testGroup)
	require.Equal(t, "PreparingRebalance", d.State)
	require.Equal(t, []string{m1.id, m4.id}, memberIDs(d))

	j1, j4 := joinAsync(c, testGroup, m1), joinAsync(c, testGroup, m4)
	r1, r4 := await(t, j1), await(t, j4)
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Zero(t, r4.ErrorCode, code(r4.ErrorCode))
	require.Equal(t, []string{m1.id, m4.id}, leaderMemberIDs(r1))

	// Everyone leaving empties the group.
	resp = c.LeaveGroup(leaveRequest(testGroup, leaving(m1.id, nil), leaving(m4.id, nil)))
	require.Equal(t, []int16{0, 0}, []int16{resp.Members[0].ErrorCode, resp.Members[1].ErrorCode})
	require.Eventually(t, func() bool { return describe(t, c, testGroup).State == "Empty" }, waitFor, tick)
}

// The leader leaving (LeaveGroup v0-v2, one member) hands leadership to
// the oldest remaining member.
func TestLeaderLeavingHandsOverLeadership(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2, m3 := newMember(), newMember(), newMember()
	stableGroup(t, c, testGroup, m1, m2, m3)

	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 1, testGroup, m1.id
	resp := c.LeaveGroup(req)
	require.Zero(t, resp.ErrorCode)
	require.Empty(t, resp.Members, "v0-v2 answer with one error code")
	require.Equal(t, code(kerr.RebalanceInProgress.Code), code(heartbeat(c, testGroup, m3)))

	j3, j2 := joinAsync(c, testGroup, m3), joinAsync(c, testGroup, m2)
	r2, r3 := await(t, j2), await(t, j3)
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Equal(t, m2.id, r2.LeaderID)
	require.Equal(t, m2.id, r3.LeaderID)
	require.Equal(t, []string{m2.id, m3.id}, leaderMemberIDs(r2))
}

// KIP-345: a static member that restarts (rejoins with its
// group.instance.id and no member id) in a Stable group with the same
// protocols gets a new member id and its old assignment, without a
// rebalance; its old member id is fenced.
func TestStaticMemberRejoinKeepsAssignmentWithoutRebalance(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, s := newMember(), newMember().static("instance-s")
	stableGroup(t, c, testGroup, m1, s)
	old := *s

	restarted := newMember().static("instance-s")
	resp := join(t, c, testGroup, restarted)
	require.Zero(t, resp.ErrorCode, code(resp.ErrorCode))
	require.NotEqual(t, old.id, resp.MemberID)
	require.Equal(t, old.gen, resp.Generation, "no new generation")
	require.Equal(t, m1.id, resp.LeaderID)
	require.Empty(t, resp.Members)

	d := describe(t, c, testGroup)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, []string{m1.id, restarted.id}, memberIDs(d))
	require.Equal(t, "NONE", code(heartbeat(c, testGroup, m1)), "the other member sees no rebalance")

	sync := await(t, syncAsync(c, testGroup, restarted, nil))
	require.Zero(t, sync.ErrorCode, code(sync.ErrorCode))
	require.Equal(t, assignmentOf(old.id), sync.MemberAssignment, "the old assignment, kept")
	require.Equal(t, "NONE", code(heartbeat(c, testGroup, restarted)))

	require.Equal(t, code(kerr.FencedInstanceID.Code), code(heartbeat(c, testGroup, &old)))
	require.Equal(t, code(kerr.FencedInstanceID.Code), code(await(t, syncAsync(c, testGroup, &old, nil)).ErrorCode))
	require.Equal(t, code(kerr.FencedInstanceID.Code), code(await(t, commitAsync(c, testGroup, &old, map[string]map[int32]int64{"t1": {0: 1}}, "")).Topics[0].Partitions[0].ErrorCode))
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
}

// The leader's assignment is stored (acks=all) before anyone gets it; if
// the append fails, the members waiting in SyncGroup get the mapped error
// and the group rebalances.
func TestSyncGroupWhoseAppendFailsRebalances(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	for _, m := range []*member{m1, m2} {
		getID(t, c, testGroup, m)
	}
	join(t, c, testGroup, m1)
	j2 := joinAsync(c, testGroup, m2)
	join(t, c, testGroup, m1)
	adopt(m2, await(t, j2))

	s2 := syncAsync(c, testGroup, m2, nil)
	h.w.failWith(kerr.NotEnoughReplicas.Code)
	s1 := syncAsync(c, testGroup, m1, assignAll(m1, m2))
	require.Equal(t, code(kerr.CoordinatorNotAvailable.Code), code(await(t, s1).ErrorCode))
	require.Equal(t, code(kerr.CoordinatorNotAvailable.Code), code(await(t, s2).ErrorCode))
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	h.w.failWith(0)
}

// A group's metadata record is written with Kafka's storeGroup error
// mapping, not the offset commits' one: a record too large for
// __consumer_offsets (the leader's assignments past max.message.bytes)
// answers UNKNOWN_SERVER_ERROR, not INVALID_COMMIT_OFFSET_SIZE (an offset
// commit's error), and a write that timed out REBALANCE_IN_PROGRESS.
func TestSyncGroupWhoseRecordIsRefusedAnswersKafkasStoreGroupErrors(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m := newMember()
	getID(t, c, testGroup, m)
	for produce, want := range map[int16]int16{
		kerr.MessageTooLarge.Code:    kerr.UnknownServerError.Code,
		kerr.RecordListTooLarge.Code: kerr.UnknownServerError.Code,
		kerr.RequestTimedOut.Code:    kerr.RebalanceInProgress.Code,
		kerr.NotEnoughReplicas.Code:  kerr.CoordinatorNotAvailable.Code,
	} {
		r := join(t, c, testGroup, m)
		require.Zero(t, r.ErrorCode, code(r.ErrorCode))
		h.w.failWith(produce)
		got := await(t, syncAsync(c, testGroup, m, assignAll(m))).ErrorCode
		h.w.failWith(0)
		require.Equal(t, code(want), code(got), "the append failed with %s", code(produce))
	}
}

// A member may join only with the group's protocol type and a protocol
// every member supports; group.max.size bounds the members, counting the
// member ids handed out with MEMBER_ID_REQUIRED.
func TestJoinGroupRefusesForeignProtocolsAndBeyondMaxSize(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.MaxSize = 2 })
	c := h.coordinator(1)
	m1 := newMember()
	stableGroup(t, c, testGroup, m1)

	other := newMember()
	getID(t, c, testGroup, other)
	req := joinRequest(testGroup, other)
	req.Protocols[0].Name = "roundrobin"
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	c.JoinGroup(req, func(resp *kmsg.JoinGroupResponse) { ch <- resp })
	require.Equal(t, code(kerr.InconsistentGroupProtocol.Code), code(await(t, ch).ErrorCode))
	req = joinRequest(testGroup, other)
	req.ProtocolType = "connect"
	c.JoinGroup(req, func(resp *kmsg.JoinGroupResponse) { ch <- resp })
	require.Equal(t, code(kerr.InconsistentGroupProtocol.Code), code(await(t, ch).ErrorCode))
	require.Equal(t, "Stable", describe(t, c, testGroup).State)

	// m1 and other's pending id make two: a third is refused.
	require.Equal(t, code(kerr.GroupMaxSizeReached.Code), code(join(t, c, testGroup, newMember()).ErrorCode))
}

// The end of a join starts each member's session: a member that got its
// JoinGroup answer and then says nothing (no SyncGroup, no heartbeat) is
// removed after session.timeout.ms, not after the five minutes a new
// member gets to join; with no member left, the next generation is Empty.
func TestAJoinedMemberThatNeverSyncsExpiresAndLeavesTheGroupEmpty(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m := newMember().timeouts(shortTime, longTime)
	getID(t, c, testGroup, m)
	resp := join(t, c, testGroup, m)
	require.Zero(t, resp.ErrorCode, code(resp.ErrorCode))
	require.Equal(t, int32(1), resp.Generation)
	require.Equal(t, "CompletingRebalance", describe(t, c, testGroup).State)

	require.Eventually(t, func() bool { return describe(t, c, testGroup).State == "Empty" }, waitFor, tick,
		"the silent member was not removed after its session timeout")
	require.Empty(t, describe(t, c, testGroup).Members)
	m.gen = 2 // the empty group's generation: the join that found nobody
	require.Equal(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, testGroup, m)))
}

// Kafka's hasSatisfiedHeartbeat: a member that joined in this rebalance
// and now waits in SyncGroup for the leader's assignment cannot heartbeat,
// so its session passing does not remove it; once its JoinGroup was
// answered it is no longer new, which would not be kept.
func TestAFollowerWaitingForTheLeadersSyncGroupOutlivesItsSessionTimeout(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.InitialRebalanceDelay = 200 * time.Millisecond })
	c := h.coordinator(1)
	m1, m2 := newMember().timeouts(shortTime, longTime), newMember().timeouts(shortTime, longTime)
	getID(t, c, testGroup, m1)
	getID(t, c, testGroup, m2)
	j1, j2 := joinAsync(c, testGroup, m1), joinAsync(c, testGroup, m2)
	r1, r2 := await(t, j1), await(t, j2)
	adopt(m1, r1)
	adopt(m2, r2)
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Equal(t, m1.id, r1.LeaderID)

	s2 := syncAsync(c, testGroup, m2, nil)
	// The leader takes three session timeouts to assign, heartbeating
	// meanwhile; the follower only waits.
	for start := time.Now(); time.Since(start) < 3*shortTime; {
		require.Equal(t, "NONE", code(heartbeat(c, testGroup, m1)))
		noAnswerYet(t, s2, "the follower's SyncGroup before the leader's")
		time.Sleep(tick)
	}
	require.Equal(t, []string{m1.id, m2.id}, memberIDs(describe(t, c, testGroup)), "the waiting follower is still a member")
	a1 := await(t, syncAsync(c, testGroup, m1, assignAll(m1, m2)))
	a2 := await(t, s2)
	require.Zero(t, a1.ErrorCode, code(a1.ErrorCode))
	require.Zero(t, a2.ErrorCode, code(a2.ErrorCode))
	require.Equal(t, assignmentOf(m2.id), a2.MemberAssignment)
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
}
