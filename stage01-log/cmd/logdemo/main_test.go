package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain lets this test binary play the demo's crashing child.
func TestMain(m *testing.M) {
	if maybeCrashingWriter() {
		return
	}
	os.Exit(m.Run())
}

// The chapter shows this demo's transcript; this test keeps the story true.
func TestDemoRecoversTheTornAppend(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, run(&buf, t.TempDir(), demoConfig(16<<10), 200))
	got := buf.String()
	require.Contains(t, got, "wrote offsets [0, 1000) in 4 segments")
	require.Contains(t, got, "the child exited: exit status 3")
	require.Contains(t, got, `recovery-point-offset-checkpoint: "0\n1\norders 0 285\n"`)
	require.Contains(t, got, "segments_scanned=3 segments_trusted=1")
	require.Contains(t, got, "offsets [0, 1000) in 4 segments")
	require.Contains(t, got, "recovery kept every whole batch and cut 97 torn bytes")
	require.Contains(t, got, "appended offsets 1000..1004")
	require.Contains(t, got, `recovery-point-offset-checkpoint: "0\n1\norders 0 1005\n"`)
	require.Contains(t, got, ".kafka_cleanshutdown exists: true")
	require.NotContains(t, got, "rebuilding", "recovery rebuilds each index once, silently")
}
