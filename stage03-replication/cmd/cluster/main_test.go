package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The chapter shows this demo's transcript; this test keeps its story true.
func TestDemoMovesLeadershipAndARestartedBrokerCatchesUp(t *testing.T) {
	var out bytes.Buffer
	// The script of chapter 3's transcript.
	script := "produce 5; wait; state; leader 0 1; produce 3; wait; state; stop 1; state; produce 2; start 1; wait; state"
	require.NoError(t, run([]string{"-dir", t.TempDir(), "-port", "0", "-script", script}, strings.NewReader(""), &out))
	got := out.String()
	require.Contains(t, got, "demo-0: leader 1, leader epoch 1, replicas [0 1 2]")
	require.Contains(t, got, "demo-0: leader 0, leader epoch 2, replicas [0 1 2]", "stopping the leader moved leadership")
	require.Contains(t, got, "broker 1: stopped")
	require.Contains(t, got, "> produce 2\nerror: context deadline exceeded\n",
		"with every replica counting, acks=all cannot be answered while broker 1 is stopped")
	require.Equal(t, 1, strings.Count(got, "error:"))
	require.Contains(t, got, "broker 1: follower log end 9, high watermark 9, epochs [0@0 1@5 2@8]",
		"the record the leader took commits once broker 1 is back")
}
