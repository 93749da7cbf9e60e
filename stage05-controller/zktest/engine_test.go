package zktest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
)

// How the harness fails matters as much as how it works: on a machine
// without the image or the engine, the message must say what to do.

func TestMissingImageFailsTheTestNamingMakeImages(t *testing.T) {
	const missing = "kafkaworkbook/zookeeper:0.0.0-missing"
	t.Setenv(ImageEnv, missing)
	msg := fatalMessage(t, func(tb testing.TB) { StartStandalone(tb) })
	require.Contains(t, msg, missing)
	require.Contains(t, msg, "make images")
	require.Contains(t, msg, ImageEnv, "the message says where the tag came from")
	t.Logf("the message: %s", msg)
}

func TestUnreachableEngineErrorNamesMakeImages(t *testing.T) {
	// Nothing listens on port 1 of loopback.
	cli, err := client.New(client.WithHost("tcp://127.0.0.1:1"))
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = checkImage(ctx, cli, DefaultImage)
	require.ErrorContains(t, err, "no Docker engine at tcp://127.0.0.1:1")
	require.ErrorContains(t, err, "make images")
	t.Logf("the message: %v", err)
}

// fatalMessage runs f with a testing.TB whose Fatal records its message
// and ends f, and returns the message ("" if f did not fail).
func fatalMessage(t *testing.T, f func(testing.TB)) string {
	t.Helper()
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

// fatalRecorder is a testing.TB that records Fatal instead of failing.
type fatalRecorder struct {
	testing.TB
	msg string // written by f's goroutine, read after it ends
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
