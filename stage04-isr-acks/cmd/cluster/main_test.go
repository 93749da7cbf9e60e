package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testLag is the demo's -lag in tests, as the cluster harness's lagMax:
// short enough to watch a follower leave, long enough that a follower
// slowed only by the race detector stays in.
const testLag = "1500"

// runDemo runs the demo on ports the kernel picks and returns its output.
func runDemo(t *testing.T, script string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	args = append([]string{"-dir", t.TempDir(), "-port", "0", "-lag", testLag, "-script", script}, args...)
	require.NoError(t, run(args, strings.NewReader(""), &out))
	return out.String()
}

// The chapter shows this demo's transcript; this test keeps its story true.
func TestDemoPausedFollowerLeavesTheISRAndRejoins(t *testing.T) {
	t.Parallel()
	got := runDemo(t, "pause 2; produce 5; wait-isr 0 1; resume 2; wait-isr 0 1 2; history")
	require.Contains(t, got, "> produce 5\nacks=all: 5 of 5 acknowledged",
		"acks=all waits for the paused follower only until the leader drops it")
	require.Contains(t, got, "> wait-isr 0 1\nISR [0 1], state version 1, after", "the leader shrank the ISR")
	require.Contains(t, got, "> wait-isr 0 1 2\n")
	require.Contains(t, got, "ISR [0 1 2], state version 2, after", "the follower caught up and rejoined")
	require.Contains(t, got, "/brokers/topics/demo/partitions/0/state\n"+
		`  version 0: {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}`+"\n"+
		`  version 1: {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1]}`+"\n"+
		`  version 2: {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}`+"\n",
		"created by the controller, shrunk and expanded by the leader, each write a new version")
	require.Equal(t, 3, strings.Count(got, "  version "), "no other write of the state")
	require.NotContains(t, got, "error")
}

// The second transcript: with min.insync.replicas=2, an acks=all record
// appended before the ISR shrank to the leader alone is answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND; after the shrink acks=all is refused
// before appending, and acks=1 is not.
func TestDemoMinInsyncReplicasRefusesAcksAll(t *testing.T) {
	t.Parallel()
	got := runDemo(t, "pause 1; pause 2; produce 1; wait-isr 0; produce 3; produce 3 1; state", "-min-isr", "2")
	require.Contains(t, got, "min.insync.replicas=2\n")
	require.Contains(t, got, "> produce 1\nacks=all: 0 of 1 acknowledged")
	require.Contains(t, got, "first error: NOT_ENOUGH_REPLICAS_AFTER_APPEND:")
	require.Contains(t, got, "> wait-isr 0\nISR [0], state version 1, after")
	require.Contains(t, got, "> produce 3\nacks=all: 0 of 3 acknowledged")
	require.Contains(t, got, "first error: NOT_ENOUGH_REPLICAS:")
	require.Contains(t, got, "> produce 3 1\nacks=1: 3 of 3 acknowledged")
	require.Contains(t, got, "demo-0: leader 0, leader epoch 0, ISR [0], state version 1\n")
	require.Contains(t, got, "broker 0: leader   log end 4, high watermark 4\n",
		"the refused records were not appended; the one appended before the shrink and the acks=1 ones were")
}
