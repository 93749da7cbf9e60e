package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// fakeCluster is three kfake brokers with a six-partition topic: enough
// for the measurements' loops, not for their figures.
func fakeCluster(t *testing.T, topic string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestThroughputCountsOnlyTheWindow: every producer runs, nothing fails,
// and the records counted are those acknowledged in the measured window:
// it lasts at least its length and less than length and warm-up together
// (the warm-up is a second, so that a timer a busy machine wakes late,
// 250 ms seen with the producer and kfake on both cores, is not taken for
// a window that counted the warm-up).
func TestThroughputCountsOnlyTheWindow(t *testing.T) {
	for _, p := range producerNames {
		t.Run(p, func(t *testing.T) {
			servers := fakeCluster(t, "t")
			meter, err := newCPUMeter(context.Background(), nil, nil)
			require.NoError(t, err)
			newP := func(ack ackFunc) (producerClient, error) { return newProducer(p, servers, "t", "all", nil, ack) }
			res, err := measureThroughput(context.Background(), newP, 100, window{warmup: time.Second, length: 500 * time.Millisecond}, meter)
			require.NoError(t, err)
			require.Positive(t, res.records)
			require.GreaterOrEqual(t, res.elapsed, 500*time.Millisecond)
			require.Less(t, res.elapsed, 1500*time.Millisecond, "the window took in the warm-up")
			require.NotNil(t, res.cpu.cores)
			require.Positive(t, res.cpu.cores["client"])
		})
	}
}

// TestLatencyReadsBackEveryAcknowledgedRecord: at a fixed rate, the
// consumer of each client reads every record acknowledged in the window,
// once, and the rate is the one asked for.
func TestLatencyReadsBackEveryAcknowledgedRecord(t *testing.T) {
	for _, p := range []string{"ours", "franz-go"} {
		t.Run(p, func(t *testing.T) {
			servers := fakeCluster(t, "t")
			meter, err := newCPUMeter(context.Background(), nil, nil)
			require.NoError(t, err)
			ctx := context.Background()
			newP := func(ack ackFunc) (producerClient, error) { return newProducer(p, servers, "t", "all", nil, ack) }
			newC := func() (consumerClient, error) { return newConsumer(ctx, p, servers, "t", 6) }
			res, err := measureLatency(ctx, newP, newC, 100, 2000, window{warmup: 300 * time.Millisecond, length: time.Second}, meter)
			require.NoError(t, err)
			// Within a fifth: a loop that falls behind (the race
			// detector, a loaded machine) catches up inside the short
			// window; an unpaced loop would send tens of thousands.
			require.InDelta(t, 2000, res.rate, 400)
			require.InDelta(t, 2000, res.acked, 500)
			require.Equal(t, res.acked, res.consumed)
			require.Equal(t, res.acked, res.e2e.Count())
			require.Equal(t, res.acked, res.ack.Count())
			require.Zero(t, res.duplicates)
			require.Positive(t, res.e2e.Quantile(0.5))
		})
	}
}

// TestProcStat: a process's user and system time from its stat line, a
// command with spaces and parentheses included; the machine's busy and
// total time.
func TestProcStat(t *testing.T) {
	line := "1234 (java (main) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 40 0 100 0 0\n"
	d, err := processCPU(line)
	require.NoError(t, err)
	require.Equal(t, 325*clockTick, d)
	_, err = processCPU("1234 (short) S 1")
	require.Error(t, err)

	busy, all, err := machineCPU("cpu  100 5 50 800 45 0 10 0 0 0\ncpu0 1 2 3\n")
	require.NoError(t, err)
	require.Equal(t, 165*clockTick, busy)
	require.Equal(t, 1010*clockTick, all)
	_, _, err = machineCPU("intr 1 2 3\n")
	require.Error(t, err)
}

// TestFlags: the defaults are issue 15's set-up, and a bad value names
// itself.
func TestFlags(t *testing.T) {
	o, err := parseArgs(nil)
	require.NoError(t, err)
	require.Equal(t, options{name: "clusterbench", rounds: 1, brokers: "containers", w: window{5 * time.Second, 15 * time.Second, 2 * time.Millisecond}, partitions: 6, size: 100, rate: 10000, baseline: true, props: map[string]string{}}, o)
	o, err = parseArgs([]string{"--producer-prop", "linger.ms=5", "--producer-prop", "max.in.flight.requests.per.connection=1"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"linger.ms": "5", "max.in.flight.requests.per.connection": "1"}, o.props)
	for _, bad := range [][]string{{"--record-size", "8"}, {"--producer-prop", "linger.ms"}, {"--rounds", "0"}, {"--only", "both"}, {"extra"}} {
		_, err := parseArgs(bad)
		require.Error(t, err, fmt.Sprint(bad))
	}
}

// TestAFailedRunLeavesEachBrokersViewOfItsTopic: diagnose writes, to a
// file it names, every broker's view of the topic's partitions and their
// high watermarks, for a stall that is gone by the next run.
func TestAFailedRunLeavesEachBrokersViewOfItsTopic(t *testing.T) {
	servers := fakeCluster(t, "stalled")
	b := &bench{servers: servers}
	path := b.diagnose("stalled", errors.New("3 records failed"))
	require.NotEmpty(t, path)
	t.Cleanup(func() { os.Remove(path) })
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(got), "3 records failed")
	for i := range 3 {
		require.Contains(t, string(got), fmt.Sprintf("broker %d (%s) sees controller", i, servers[i]))
	}
	for p := range 6 {
		require.Contains(t, string(got), fmt.Sprintf("stalled-%d: leader ", p))
		require.Contains(t, string(got), fmt.Sprintf("stalled-%d: high watermark 0", p))
	}
}
