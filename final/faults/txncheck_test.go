package faults

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// txnLedger is three transactions of two values each: one committed, one
// aborted, one whose commit returned an error.
func txnLedger() []Txn {
	return []Txn{
		{ID: "w0-000000", Values: []string{"w0-000000-0", "w0-000000-1"}, Outcome: TxnCommitted},
		{ID: "w0-000001", Values: []string{"w0-000001-0", "w0-000001-1"}, Outcome: TxnAborted, Why: "on purpose"},
		{ID: "w0-000002", Values: []string{"w0-000002-0", "w0-000002-1"}, Outcome: TxnUnknown, Why: "commit: timed out"},
	}
}

// TestCheckTxnsPassesWhatReadCommittedMayRead: the committed
// transaction read whole, the aborted one not at all, the unknown one
// either way: no check fails.
func TestCheckTxnsPassesWhatReadCommittedMayRead(t *testing.T) {
	read := map[int32][]Read{0: {{0, "w0-000000-0"}, {5, "w0-000002-0"}}, 1: {{0, "w0-000000-1"}, {4, "w0-000002-1"}}}
	v := CheckTxns(txnLedger(), read)
	require.True(t, v.OK(), v.Summary())
	require.Equal(t, TxnVerdict{Committed: 1, Aborted: 1, Unknown: 1, UnknownCommitted: 1, Values: 6, Read: 4}, v)

	v = CheckTxns(txnLedger(), map[int32][]Read{0: {{0, "w0-000000-0"}}, 1: {{0, "w0-000000-1"}}})
	require.True(t, v.OK(), v.Summary())
	require.Equal(t, 1, v.UnknownAborted)
}

// TestCheckTxnsFindsEachViolation: each of Jepsen's anomalies, put into
// an otherwise good read, is reported, and fails the verdict.
func TestCheckTxnsFindsEachViolation(t *testing.T) {
	good := func() map[int32][]Read {
		return map[int32][]Read{0: {{0, "w0-000000-0"}}, 1: {{0, "w0-000000-1"}}}
	}
	for name, tc := range map[string]struct {
		change func(map[int32][]Read)
		check  func(*testing.T, TxnVerdict)
	}{
		"aborted read": {func(r map[int32][]Read) { r[1] = append(r[1], Read{3, "w0-000001-1"}) }, func(t *testing.T, v TxnVerdict) {
			require.Equal(t, []string{"w0-000001-1 at 1-3 (transaction w0-000001 aborted: on purpose)"}, v.AbortedRead)
			require.Len(t, v.Partial, 1, "half of the aborted transaction read")
		}},
		"lost write": {func(r map[int32][]Read) { r[1] = nil }, func(t *testing.T, v TxnVerdict) {
			require.Equal(t, []string{"w0-000000-1 (transaction w0-000000 committed)"}, v.Lost)
			require.Equal(t, []string{"transaction w0-000000 (committed): read w0-000000-0 at 0-0; not read w0-000000-1"}, v.Partial)
		}},
		"duplicate": {func(r map[int32][]Read) { r[0] = append(r[0], Read{7, "w0-000000-0"}) }, func(t *testing.T, v TxnVerdict) {
			require.Equal(t, []string{"w0-000000-0 at 0-0, 0-7"}, v.Duplicated)
		}},
		"unknown read in part": {func(r map[int32][]Read) { r[0] = append(r[0], Read{2, "w0-000002-0"}) }, func(t *testing.T, v TxnVerdict) {
			require.Equal(t, []string{"transaction w0-000002 (unknown): read w0-000002-0 at 0-2; not read w0-000002-1"}, v.Partial)
			require.Zero(t, v.UnknownCommitted+v.UnknownAborted)
		}},
		"unexpected": {func(r map[int32][]Read) { r[2] = []Read{{0, "junk"}} }, func(t *testing.T, v TxnVerdict) {
			require.Equal(t, []string{`"junk" at 2-0`}, v.Unexpected)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			read := good()
			tc.change(read)
			v := CheckTxns(txnLedger(), read)
			require.False(t, v.OK())
			tc.check(t, v)
		})
	}
}

// TestReportShowsTransactions: a failed transactional check is in the
// report's section and its list of failures.
func TestReportShowsTransactions(t *testing.T) {
	v := CheckTxns(txnLedger(), map[int32][]Read{0: {{0, "w0-000000-0"}, {1, "w0-000001-0"}}, 1: {{0, "w0-000000-1"}}})
	r := &Report{Txn: &TxnReport{Topic: "faults-txn", Partitions: 3, Writers: 2, Verdict: v, Errors: map[string]int{"commit: timed out": 1}}}
	r.fail("transactions: %s", v.Summary())
	var b bytes.Buffer
	_, err := r.WriteTo(&b)
	require.NoError(t, err)
	require.Contains(t, b.String(), "### Transactions")
	require.Contains(t, b.String(), "| 1 | 1 | 1 (0 / 1) | 6 | 3 | 1 | 0 | 0 | 1 | 0 |")
	require.Contains(t, b.String(), "- aborted read: w0-000001-0 at 0-1 (transaction w0-000001 aborted: on purpose)")
	require.Contains(t, b.String(), "- writer error: 1 × commit: timed out")
	require.Contains(t, b.String(), "- transactions: 1 aborted read, 0 lost, 0 duplicated, 1 transactions read in part, 0 unexpected")
}
