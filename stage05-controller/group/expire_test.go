package group_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// testClock is a coordinator's clock that a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestExpiredOffsetsGoWithTombstones: offsets.retention.ms counts, as
// KIP-211 says, from each commit for a consumer that never joined the
// group and for the topics a Stable group no longer subscribes to, and
// from the moment the group became Empty for one whose members all left.
// A group left Empty with no offset goes too, and a coordinator loading
// the log afterwards finds neither (the tombstones).
func TestExpiredOffsetsGoWithTombstones(t *testing.T) {
	h := newHarness(t, func(cfg *group.Config) { cfg.OffsetsRetention, cfg.OffsetsRetentionCheck = time.Hour, 0 })
	clock := &testClock{now: time.Unix(1_800_000_000, 0)}
	c := h.coordinatorWith(group.Options{Now: clock.Now})
	c.Elected(0, 1, h.log)
	h.waitLoaded(c)

	// A standalone consumer: retention from each commit.
	commit(t, c, "standalone", nil, offsets{"t1": {0: 10}}, "")
	clock.advance(30 * time.Minute)
	commit(t, c, "standalone", nil, offsets{"t1": {1: 20}}, "")
	clock.advance(31 * time.Minute)
	n, groups := c.ExpireOffsets()
	require.Equal(t, 1, n)
	require.Zero(t, groups)
	require.Equal(t, offsets{"t1": {1: 20}}, committed(t, c, "standalone"), "the commit 61 min old went, the 31 min old one stayed")

	// A Stable consumer group subscribed to t1: its commit for t2 expires,
	// its t1 commit does not, however old.
	m := newMember()
	stableGroup(t, c, testGroup, m)
	commit(t, c, testGroup, m, offsets{"t1": {0: 1}, "t2": {0: 2}}, "")
	clock.advance(2 * time.Hour)
	n, groups = c.ExpireOffsets()
	require.Equal(t, 2, n, "t2 of the group and the standalone's last offset")
	require.Equal(t, 1, groups, "the standalone group, Empty with no offset left")
	require.Equal(t, offsets{"t1": {0: 1}}, committed(t, c, testGroup))

	// Its member leaves: the group is Empty, and the clock starts then.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, testGroup, m.id
	require.Zero(t, c.LeaveGroup(leave).ErrorCode)
	require.Equal(t, "Empty", describe(t, c, testGroup).State)
	clock.advance(59 * time.Minute)
	n, _ = c.ExpireOffsets()
	require.Zero(t, n, "Empty for 59 minutes only")
	clock.advance(2 * time.Minute)
	n, groups = c.ExpireOffsets()
	require.Equal(t, 1, n)
	require.Equal(t, 1, groups)
	require.Equal(t, "Dead", describe(t, c, testGroup).State)

	// The tombstones are in the log: a new coordinator loads nothing.
	again := h.coordinatorWith(group.Options{Now: clock.Now})
	again.Elected(0, 2, h.log)
	h.waitLoaded(again)
	require.Empty(t, committed(t, again, "standalone"))
	require.Empty(t, committed(t, again, testGroup))
	require.Equal(t, "Dead", describe(t, again, testGroup).State)
}
