package commitlog

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestObserveFlushesSeesEachFlushThatWroteSomething: flush.messages, an
// explicit Flush and a close are timed; a Flush with nothing new is not,
// and nothing is after stop. (No test of this package runs in parallel, so
// the process-wide observer sees this test's logs only.)
func TestObserveFlushesSeesEachFlushThatWroteSomething(t *testing.T) {
	var n atomic.Int64
	stop := ObserveFlushes(func(d time.Duration) {
		if d >= 0 {
			n.Add(1)
		}
	})
	defer stop()
	cfg := DefaultConfig()
	cfg.FlushMessages = 10
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	h.appendBatches(l, 5, 2, 10)
	require.Equal(t, int64(1), n.Load(), "flush.messages=10 after ten records")
	require.NoError(t, l.Flush())
	require.Equal(t, int64(1), n.Load(), "nothing new to flush")
	h.appendBatches(l, 1, 2, 10)
	require.NoError(t, l.Flush())
	require.Equal(t, int64(2), n.Load())
	h.appendBatches(l, 1, 2, 10)
	stop()
	require.NoError(t, l.Close())
	require.Equal(t, int64(2), n.Load(), "stopped")
}
