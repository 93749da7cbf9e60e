package group_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The controller bumps a partition's leader epoch without moving its
// leader when a follower leaves the ISR (stage 05's controller/work.go
// shrinks the ISR with LeaderEpoch++, as Kafka's ZooKeeper controller
// does), and stage 04's StateChanged then reports the new epoch, so the
// server calls Elected(p, epoch+1) on a coordinator that already serves p.
// Nothing was lost: the coordinator must keep its live groups (Kafka never
// replaces a cached group when loading: GroupMetadataManager.loadGroup's
// addGroup keeps the one in the cache, and addLoadingPartition skips a
// partition already owned). It must not reload the partition from the log
// over them: that drops what the log does not hold (a rebalance in
// progress, its parked JoinGroups) and answers COORDINATOR_LOAD_IN_PROGRESS
// meanwhile.
func TestElectedAgainInNewerEpochKeepsTheLiveGroups(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1)
	getID(t, c, testGroup, m2)
	parked := joinAsync(c, testGroup, m2) // waits for m1 to rejoin
	require.Equal(t, []string{m1.id, m2.id}, memberIDs(describe(t, c, testGroup)))

	c.Elected(0, 2, h.log) // same leader, new leader epoch (an ISR shrink)
	h.waitLoaded(c)

	d := describe(t, c, testGroup)
	require.Equal(t, "PreparingRebalance", d.State, "the rebalance in progress is kept")
	require.Equal(t, []string{m1.id, m2.id}, memberIDs(d), "m2, parked in JoinGroup, is still a member")
	r1 := await(t, joinAsync(c, testGroup, m1))
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	r2 := await(t, parked)
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	require.Equal(t, r1.Generation, r2.Generation)
	require.Equal(t, []string{m1.id, m2.id}, leaderMemberIDs(r1))
	adopt(m1, r1)
	adopt(m2, r2)
	require.Equal(t, "NONE", code(heartbeat(c, testGroup, m1)))
	require.NotEqual(t, code(kerr.UnknownMemberID.Code), code(heartbeat(c, testGroup, m2)))
}

// JoinGroup's respond "is called exactly once". A new member (it joined in
// this rebalance and was not answered yet) that sends JoinGroup again
// with its member id (its client timed out and retried, KIP-394's
// case) replaces its parked JoinGroup; the first one must still be
// answered (updateAndRebalance answers it with REBALANCE_IN_PROGRESS for
// a member that is not new, but skips the answer for a new one, so the
// first request is never answered).
func TestRetriedJoinGroupOfANewMemberAnswersTheFirst(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1)
	getID(t, c, testGroup, m2)
	first := joinAsync(c, testGroup, m2) // parked: m1 has not rejoined
	second := joinAsync(c, testGroup, m2)

	r1 := await(t, joinAsync(c, testGroup, m1))
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	r2 := await(t, second)
	require.Zero(t, r2.ErrorCode, code(r2.ErrorCode))
	select {
	case resp := <-first:
		require.NotZero(t, resp.ErrorCode, "the replaced JoinGroup gets an error (REBALANCE_IN_PROGRESS for a known member)")
	case <-time.After(time.Second):
		t.Fatal("the first JoinGroup of a new member, replaced by its retry, was never answered")
	}
}

// DeleteGroups whose tombstones fail to append (acks=all not met) answers
// the mapped error, COORDINATOR_NOT_AVAILABLE, but the group and its
// offsets are already gone from memory: a retry answers
// GROUP_ID_NOT_FOUND, and after a leader change the offsets are back
// (the log never got the tombstones). Kafka (cleanupGroupMetadata)
// removes the group from its cache and appends the tombstones with
// acks=0, answering NONE. Either answer NONE as Kafka does, or keep the
// group until the tombstones are acknowledged (as OffsetDelete does).
func TestDeleteGroupsWhoseAppendFailsKeepsTheGroup(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	commit(t, c, "idle", nil, offsets{"t1": {0: 1}}, "")
	h.w.failWith(kerr.NotEnoughReplicas.Code)
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"idle"}
	ch := make(chan *kmsg.DeleteGroupsResponse, 1)
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) { ch <- resp })
	require.Equal(t, code(kerr.CoordinatorNotAvailable.Code), code(await(t, ch).Groups[0].ErrorCode))
	h.w.failWith(0)
	require.Equal(t, offsets{"t1": {0: 1}}, committed(t, c, "idle"), "an answered error leaves the group as it was")
	c.DeleteGroups(req, func(resp *kmsg.DeleteGroupsResponse) { ch <- resp })
	require.Equal(t, "NONE", code(await(t, ch).Groups[0].ErrorCode), "the retry deletes it")
}

// A static member's replacement is stored before it is answered; when the
// write fails, the client gets the error and the old member id is put
// back, not fenced, as Kafka reverts it (the new id was never known
// outside this coordinator).
func TestStaticReplacementWhoseWriteFailsKeepsTheOldMember(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, s := newMember(), newMember().static("instance-s")
	stableGroup(t, c, testGroup, m1, s)

	h.w.failWith(kerr.NotEnoughReplicas.Code)
	restarted := newMember().static("instance-s")
	resp := await(t, joinAsync(c, testGroup, restarted))
	require.Equal(t, code(kerr.CoordinatorNotAvailable.Code), code(resp.ErrorCode))
	h.w.failWith(0)

	require.Equal(t, []string{m1.id, s.id}, memberIDs(describe(t, c, testGroup)))
	require.Equal(t, "NONE", code(heartbeat(c, testGroup, s)), "the old member id is a member again")
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
}
