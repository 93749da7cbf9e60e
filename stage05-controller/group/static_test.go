package group_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// KIP-345: the end of a join phase (the rebalance timeout) removes the
// members that did not rejoin only if they are dynamic (Kafka's
// onCompleteJoin: notYetRejoinedMembers.filterNot(_.isStaticMember)). A
// static member that is away (restarting, say) keeps its place: only its
// session timeout or a LeaveGroup with its group.instance.id removes it.
// The leader's member list names it, with its subscription, so that the
// assignment keeps its partitions for it; it comes back with its member
// id, finds a generation it missed (ILLEGAL_GENERATION) and rejoins, and
// gets that generation at once, without another rebalance.
func TestAStaticMemberThatDoesNotRejoinInTimeStaysInTheGroup(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	d, s := newMember().timeouts(longTime, shortTime), newMember().static("instance-s").timeouts(longTime, shortTime)
	stableGroup(t, c, testGroup, d, s)
	gen := d.gen

	r := join(t, c, testGroup, d) // the leader rejoins: a rebalance; s stays away
	require.Zero(t, r.ErrorCode, code(r.ErrorCode))
	require.Equal(t, gen+1, r.Generation)
	require.Equal(t, d.id, r.LeaderID)
	require.Equal(t, []string{d.id, s.id}, leaderMemberIDs(r), "the static member that did not rejoin was removed")
	require.Equal(t, subscription("t1"), r.Members[1].ProtocolMetadata)
	require.Equal(t, []string{d.id, s.id}, memberIDs(describe(t, c, testGroup)))

	require.Equal(t, code(kerr.IllegalGeneration.Code), code(heartbeat(c, testGroup, s)))
	rs := join(t, c, testGroup, s)
	require.Zero(t, rs.ErrorCode, code(rs.ErrorCode))
	require.Equal(t, gen+1, rs.Generation, "the rejoin gets the generation it missed, no new rebalance")
	a1, a2 := syncAsync(c, testGroup, d, assignAll(d, s)), syncAsync(c, testGroup, s, nil)
	require.Zero(t, await(t, a1).ErrorCode)
	require.Equal(t, assignmentOf(s.id), await(t, a2).MemberAssignment)
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
}

// A static leader that does not rejoin stays a member but leads no more:
// the oldest member that did rejoin leads the new generation (Kafka's
// maybeElectNewJoinedLeader), and its list still holds the absent one.
func TestAStaticLeaderThatDoesNotRejoinHandsLeadershipToAJoinedMember(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	s, d := newMember().static("instance-s").timeouts(longTime, shortTime), newMember().timeouts(longTime, shortTime)
	stableGroup(t, c, testGroup, s, d)

	n := newMember().timeouts(longTime, shortTime)
	getID(t, c, testGroup, n)
	jn, jd := joinAsync(c, testGroup, n), joinAsync(c, testGroup, d) // s stays away
	rn, rd := await(t, jn), await(t, jd)
	require.Zero(t, rd.ErrorCode, code(rd.ErrorCode))
	require.Zero(t, rn.ErrorCode, code(rn.ErrorCode))
	require.Equal(t, d.id, rd.LeaderID, "the oldest member that rejoined leads")
	require.Equal(t, []string{s.id, d.id, n.id}, leaderMemberIDs(rd), "the absent static member is still a member")
	require.Empty(t, rn.Members)
}

// When no member rejoined and only static members are left, the join phase
// cannot produce a generation without members that answered: Kafka waits
// another rebalance timeout ("could not complete rebalance because no
// members rejoined") while session timeouts remove the silent ones. A
// static member that comes back meanwhile completes the rebalance.
func TestAJoinPhaseWhereOnlyAbsentStaticMembersRemainWaitsForThem(t *testing.T) {
	h := newHarness(t, nil)
	logs := &recordingHandler{}
	c := h.coordinatorWith(group.Options{Logger: slog.New(logs)})
	c.Elected(0, 1, h.log)
	h.waitLoaded(c)
	s, d := newMember().static("instance-s").timeouts(longTime, shortTime), newMember().timeouts(longTime, shortTime)
	stableGroup(t, c, testGroup, s, d)
	gen := s.gen

	leave := c.LeaveGroup(leaveRequest(testGroup, leaving(d.id, nil)))
	require.Zero(t, leave.Members[0].ErrorCode)
	require.Eventually(t, func() bool {
		return logs.logged("no member rejoined") || describe(t, c, testGroup).State != "PreparingRebalance"
	}, waitFor, tick, "the join phase never ended")
	dg := describe(t, c, testGroup)
	require.Equal(t, "PreparingRebalance", dg.State, "the absent static member was removed at the end of the join phase")
	require.Equal(t, []string{s.id}, memberIDs(dg))

	r := join(t, c, testGroup, s)
	require.Zero(t, r.ErrorCode, code(r.ErrorCode))
	require.Equal(t, gen+1, r.Generation)
	require.Equal(t, s.id, r.LeaderID)
}

// recordingHandler is a slog.Handler that keeps the messages logged.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string // Protected by mu.
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// logged reports whether a message containing part was logged.
func (h *recordingHandler) logged(part string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}
