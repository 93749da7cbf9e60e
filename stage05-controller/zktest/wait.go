package zktest

import (
	"testing"
	"time"
)

// pollInterval is how often WaitFor checks its condition.
const pollInterval = 50 * time.Millisecond

// WaitFor checks cond until it holds and fails the test, saying what it
// waited for, if it does not hold within timeout. Distributed state changes
// at its own pace (an election, an expiry); a test polls for the state it
// expects rather than sleeping and hoping.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(t, timeout, cond) {
		t.Fatalf("zktest: timed out after %v waiting for %s", timeout, what)
	}
}

// Eventually checks cond until it holds or timeout passes, and reports
// whether it held. It stops early when the test's context ends.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-t.Context().Done():
			return false
		case <-tick.C:
		}
	}
}
