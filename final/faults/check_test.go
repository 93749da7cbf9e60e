package faults

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CheckLedger on a read-back that holds each kind of anomaly once: a
// record acknowledged and never read (lost), one read at another offset
// than acknowledged (moved), one read twice (duplicated), a producer's
// records out of its order, and a record read but never acknowledged
// (allowed: its acknowledgement was lost, not the record).
func TestCheckLedgerFindsEachAnomaly(t *testing.T) {
	ledger := map[string]Ack{
		value(1, 1): {0, 0},
		value(1, 2): {0, 1},
		value(1, 3): {0, 2}, // lost
		value(2, 1): {1, 0},
		value(2, 2): {1, 1}, // moved to 1-3
		value(2, 3): {1, 2}, // read twice
	}
	read := map[int32][]Read{
		0: {{0, value(1, 1)}, {1, value(1, 2)}, {2, value(3, 1)}},
		1: {{0, value(2, 1)}, {2, value(2, 3)}, {3, value(2, 2)}, {4, value(2, 3)}},
	}
	v := CheckLedger(ledger, read)
	require.False(t, v.OK())
	require.Equal(t, 6, v.Acked)
	require.Equal(t, 7, v.Read)
	require.Equal(t, []string{"p1-000000003 (acked at 0-2)"}, v.Lost)
	require.Equal(t, []string{"p2-000000002 acked at 1-1, read at 1-3", "p2-000000003 acked at 1-2, read at 1-4"}, v.Moved,
		"a record read twice is where its last copy is: moved too")
	require.Equal(t, []string{"p2-000000003 at 1-2 and 1-4"}, v.Duplicated)
	require.Equal(t, []string{"p2-000000002 at 1-3 after sequence 3"}, v.OutOfOrder)
	require.Equal(t, 1, v.Unacked, "p3-000000001 was read, never acknowledged")

	clean := CheckLedger(map[string]Ack{value(1, 1): {0, 0}}, map[int32][]Read{0: {{0, value(1, 1)}}})
	require.True(t, clean.OK())
}
