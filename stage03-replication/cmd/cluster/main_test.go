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
	script := "produce 5; wait; leader 0 1; produce 3; wait; state; stop 1; state; start 1; produce 2; wait; state"
	require.NoError(t, run([]string{"-dir", t.TempDir(), "-port", "0", "-script", script}, strings.NewReader(""), &out))
	got := out.String()
	require.NotContains(t, got, "error:")
	require.Contains(t, got, "demo-0: leader 1, leader epoch 1, replicas [0 1 2]")
	require.Contains(t, got, "demo-0: leader 0, leader epoch 2, replicas [0 1 2]", "stopping the leader moved leadership")
	require.Contains(t, got, "broker 1: stopped")
	require.Contains(t, got, "log end 10, high watermark 10, epochs [0@0 1@5 2@8]")
}
