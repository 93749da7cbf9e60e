package group_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// heapInUse is the heap in use (runtime.MemStats.HeapInuse) after a
// collection: what is still referenced, not what the runtime keeps from
// the operating system (RSS, which Go gives back lazily).
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// bigMetadata is n bytes of protocol metadata, distinct per seed.
func bigMetadata(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

// The report: three members, each with 30 MiB of protocol metadata, were
// accepted and kept. A group's metadata record carries every member's
// metadata and must fit one batch of __consumer_offsets (max.message.bytes,
// Kafka's message.max.bytes: 1048588 by default), so such a group could
// never store an assignment (Kafka fails its SyncGroup, over and over).
// The coordinator refuses the JoinGroup that would take the group's
// metadata past that bound with GROUP_MAX_SIZE_REACHED, keeps nothing of
// it, and serves the members that fit. A member that rejoins asking for
// more than fits is refused and leaves the group, which rebalances
// without it.
func TestAJoinGroupWhoseMetadataWouldOverflowTheGroupRecordIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	require.Equal(t, 1048588, h.cfg.MaxRecordBytes, "Kafka's message.max.bytes, which __consumer_offsets inherits")
	c := h.coordinator(1)
	full := code(kerr.GroupMaxSizeReached.Code)

	before := heapInUse()
	for i := range 3 {
		m := newMember()
		m.metadata = bigMetadata(30<<20, byte(i))
		resp := join(t, c, testGroup, m)
		require.Equal(t, full, code(resp.ErrorCode), "member %d with 30 MiB of metadata", i)
		require.Empty(t, resp.MemberID)
	}
	require.Empty(t, describe(t, c, testGroup).Members)
	kept := heapInUse() - before
	t.Logf("heap kept after three refused 30 MiB JoinGroups: %d KiB", kept>>10)
	require.Less(t, kept, int64(4<<20), "a refused JoinGroup's metadata is not kept")

	// Two members of 400 KiB fit; a third does not.
	m1, m2 := newMember(), newMember()
	m1.metadata, m2.metadata = bigMetadata(400<<10, 1), bigMetadata(400<<10, 2)
	stableGroup(t, c, testGroup, m1, m2)
	m3 := newMember()
	m3.metadata = bigMetadata(400<<10, 3)
	require.Equal(t, full, code(join(t, c, testGroup, m3).ErrorCode))
	require.Equal(t, "Stable", describe(t, c, testGroup).State)
	require.Equal(t, "NONE", code(heartbeat(c, testGroup, m2)))

	// m2 rejoins asking for 700 KiB: refused, and out of the group.
	m2.metadata = bigMetadata(700<<10, 4)
	require.Equal(t, full, code(join(t, c, testGroup, m2).ErrorCode))
	require.Equal(t, []string{m1.id}, memberIDs(describe(t, c, testGroup)))
	r1 := join(t, c, testGroup, m1)
	require.Zero(t, r1.ErrorCode, code(r1.ErrorCode))
	require.Equal(t, []string{m1.id}, leaderMemberIDs(r1))
}

// What the coordinator holds for a group's members is one copy of their
// protocol metadata (the JoinGroup requests' bytes: the next rebalance's
// leader needs them), and it is all released when they leave: no map,
// purgatory entry, parked answer or stored assignment keeps a reference.
func TestTheMetadataOfMembersIsHeldOnceAndReleasedWhenTheyLeave(t *testing.T) {
	const size = 8 << 20
	h := newHarness(t, func(cfg *group.Config) { cfg.MaxRecordBytes = 64 << 20 })
	c := h.coordinator(1)
	before := heapInUse()

	ms := []*member{newMember(), newMember(), newMember()}
	for i, m := range ms {
		m.metadata = bigMetadata(size, byte(i))
	}
	stableGroup(t, c, testGroup, ms...)
	for _, m := range ms {
		m.metadata = nil // the test's own reference
	}
	held := heapInUse() - before
	t.Logf("heap held by a Stable group of 3 members with %d MiB of metadata each: %d MiB", size>>20, held>>20)
	require.GreaterOrEqual(t, held, int64(3*size*9/10), "the members' metadata is kept for the next rebalance")
	require.Less(t, held, int64(3*size+3*size/2), "one copy of the metadata, not several")

	var out []kmsg.LeaveGroupRequestMember
	for _, m := range ms {
		out = append(out, leaving(m.id, nil))
	}
	resp := c.LeaveGroup(leaveRequest(testGroup, out...))
	for _, lm := range resp.Members {
		require.Zero(t, lm.ErrorCode, code(lm.ErrorCode))
	}
	require.Eventually(t, func() bool { return describe(t, c, testGroup).State == "Empty" }, waitFor, tick)
	left := heapInUse() - before
	t.Logf("heap held once they left: %d KiB", left>>10)
	require.Less(t, left, int64(4<<20), "the metadata of members that left is released")
}

// A group dropped because this broker no longer leads its partition
// (Resigned) is released at once, rebalance in progress or not: neither
// its DelayedJoin (which would wait out the rebalance timeout) nor the
// expiry of a member id handed out with MEMBER_ID_REQUIRED (the session
// timeout) may keep the dropped group, and its members' metadata, alive.
func TestAnUnloadedGroupIsReleasedAtOnce(t *testing.T) {
	const size = 8 << 20
	h := newHarness(t, func(cfg *group.Config) { cfg.MaxRecordBytes = 64 << 20 })
	c := h.coordinator(1)
	before := heapInUse()

	m1, m2 := newMember(), newMember()
	m1.metadata, m2.metadata = bigMetadata(size, 1), bigMetadata(size, 2)
	stableGroup(t, c, testGroup, m1, m2)
	m1.metadata, m2.metadata = nil, nil
	m3, m4 := newMember(), newMember()
	getID(t, c, testGroup, m3)
	parked := joinAsync(c, testGroup, m3) // a rebalance that waits up to 30 s for m1 and m2
	getID(t, c, testGroup, m4)            // an id handed out, never used
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	require.GreaterOrEqual(t, heapInUse()-before, int64(2*size*9/10))

	c.Resigned(0)
	require.Equal(t, code(kerr.NotCoordinator.Code), code(await(t, parked).ErrorCode))
	left := heapInUse() - before
	t.Logf("heap held once the group was unloaded: %d KiB", left>>10)
	require.Less(t, left, int64(4<<20), "the unloaded group is still referenced")
}
