package perf

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Percentiles land within a bucket (about 6%) of the true value.
func TestQuantilesAreWithinABucket(t *testing.T) {
	var h Histogram
	for i := 1; i <= 100000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.95, 0.99, 0.999} {
		want := time.Duration(q*100000) * time.Microsecond
		got := h.Quantile(q)
		require.InEpsilon(t, float64(want), float64(got), 0.07, "q=%v", q)
	}
	require.Equal(t, 100*time.Millisecond, h.Max())
	require.InEpsilon(t, float64(50*time.Millisecond), float64(h.Mean()), 0.001)
	for _, d := range []time.Duration{0, time.Nanosecond, 3 * time.Microsecond, 2 * time.Hour} {
		var one Histogram
		one.Record(d)
		require.Equal(t, max(d, 0), one.Quantile(0.5), "a single latency is its own percentile (capped at the max)")
	}
}

func TestLinesReadLikeKafkasTools(t *testing.T) {
	w := NewWindow()
	for range 1000 {
		w.Record(2*time.Millisecond, 100)
	}
	s := w.Snapshot()
	require.Regexp(t, `^1000 records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), 2\.0 ms avg latency, 2\.0 ms max latency\.$`, ProgressLine(s))
	w.Record(4*time.Millisecond, 100)
	total := w.Total()
	require.Equal(t, int64(1001), total.Records)
	require.Equal(t, int64(100100), total.Bytes)
	require.True(t, strings.HasSuffix(SummaryLine(total), "4.00 ms max latency, 2 ms 50th, 2 ms 95th, 2 ms 99th, 2 ms 99.9th."), SummaryLine(total))
	start := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	line := ConsumerLine(start.Add(7*time.Millisecond), start.Add(2007*time.Millisecond), 1000, 1<<20, 500*time.Millisecond)
	require.Equal(t, "2026-12-03 07:00:00:007, 2026-12-03 07:00:02:007, 1.0000, 0.5000, 1000, 500.0000, 500, 1500, 0.6667, 666.6667", line)
	require.Len(t, strings.Split(line, ", "), len(strings.Split(ConsumerHeader, ", ")))
}
