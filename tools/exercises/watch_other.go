//go:build !unix

package main

import (
	"bytes"
	"os/exec"
	"time"
)

// runWatched is cmd.Run where a test cannot be signalled: go test's own
// -timeout bounds the run.
func runWatched(cmd *exec.Cmd, _ *bytes.Buffer, _ time.Duration) error { return cmd.Run() }
