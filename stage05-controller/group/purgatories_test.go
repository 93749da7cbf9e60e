package group_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPurgatoriesHoldMemberTimersAndParkedJoins: what final's
// PurgatorySize metric reads. Each member of a stable group has a session
// timer in the Heartbeat purgatory; a JoinGroup that starts a rebalance
// waits in the Rebalance purgatory.
func TestPurgatoriesHoldMemberTimersAndParkedJoins(t *testing.T) {
	h := newHarness(t, nil)
	c := h.coordinator(1)
	m1, m2 := newMember(), newMember()
	stableGroup(t, c, testGroup, m1, m2)
	ps := c.Purgatories()
	require.Equal(t, []string{"Rebalance", "Heartbeat"}, []string{ps[0].Name(), ps[1].Name()})
	require.GreaterOrEqual(t, ps[1].Watched(), int64(2))

	m3 := newMember()
	getID(t, c, testGroup, m3)
	joinAsync(c, testGroup, m3)
	require.Equal(t, "PreparingRebalance", describe(t, c, testGroup).State)
	require.GreaterOrEqual(t, ps[0].Watched(), int64(1))
}
