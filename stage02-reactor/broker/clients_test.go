package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFranzGoProducesAndConsumes100kRecordsInOrder(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("orders", 3)
	const n = 100_000

	// franz-go with its defaults (idempotence falls back to plain producing,
	// since this broker does not serve InitProducerID; snappy compression).
	cl := tb.client(kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, 1)
	for i := range n {
		r := &kgo.Record{Partition: int32(i % 3), Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("order-%06d", i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	require.NoError(t, cl.Flush(ctx))
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	got := consumeAll(t, tb, "orders", 3, n)
	require.Len(t, got, n)
	next := map[int32]int{0: 0, 1: 1, 2: 2} // the record index expected next, per partition
	for _, r := range got {
		require.Equal(t, fmt.Sprintf("order-%06d", next[r.Partition]), string(r.Value), "partition %d", r.Partition)
		require.Equal(t, int64(next[r.Partition]/3), r.Offset)
		next[r.Partition] += 3
	}
}

func kcatPath(t *testing.T) string {
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: `make stage02` installs it (apt-get install kcat)")
	}
	return path
}

func TestKcatRoundTripsAFileOfLines(t *testing.T) {
	kcat := kcatPath(t)
	tb := startBroker(t)
	var lines []string
	for i := range 500 {
		lines = append(lines, fmt.Sprintf("line %d: %s", i, strings.Repeat("x", i%50)))
	}
	input := filepath.Join(t.TempDir(), "lines.txt")
	require.NoError(t, os.WriteFile(input, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

	// kcat's default settings; the topic is created on first use.
	out, err := exec.Command(kcat, "-b", tb.addr(), "-P", "-t", "lines", "-l", input).CombinedOutput()
	require.NoError(t, err, "kcat -P: %s", out)

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kcat, "-b", tb.addr(), "-C", "-t", "lines", "-o", "beginning", "-e", "-f", "%s\n")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "kcat -C: %s", stderr.String())
	require.Equal(t, lines, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"))

	out, err = exec.Command(kcat, "-b", tb.addr(), "-L", "-t", "lines").CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(out), `topic "lines" with 1 partitions`)
}

func TestRestartKeepsEverythingAcknowledged(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("durable", 2)
	cl := tb.client()
	var want []string
	for i := range 50 {
		v := fmt.Sprintf("before-restart-%d", i)
		produceRecords(t, cl, "durable", int32(i%2), v)
		want = append(want, v)
	}
	cl.Close()

	tb.restart()
	require.Equal(t, []string{"durable"}, tb.Store().TopicNames(), "the topic is found again in log.dirs")
	cl = tb.client()
	produceRecords(t, cl, "durable", 0, "after-restart")
	want = append(want, "after-restart")

	var got []string
	for _, r := range consumeAll(t, tb, "durable", 2, len(want)) {
		got = append(got, string(r.Value))
	}
	require.ElementsMatch(t, want, got)
}

// TestKcatQueriesOffsetsForTimes: kcat -Q (librdkafka's offsetsForTimes)
// over ListOffsets at the version librdkafka picks from what the broker
// advertises.
func TestKcatQueriesOffsetsForTimes(t *testing.T) {
	kcat := kcatPath(t)
	tb := startBroker(t)
	tb.createTopic("times", 1)
	cl := tb.client()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := range 10 {
		r := &kgo.Record{Topic: "times", Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr())
	}
	at := base.Add(4*time.Minute + time.Second).UnixMilli()
	out, err := exec.Command(kcat, "-b", tb.addr(), "-Q", "-t", fmt.Sprintf("times:0:%d", at)).CombinedOutput()
	require.NoError(t, err, "kcat -Q: %s", out)
	require.Contains(t, string(out), "offset 5", "the first record at or after the time: %s", out)
}
