package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestKadmDeleteRecordsOnAReplicatedTopic: franz-go's admin client deletes
// the first 12 of 20 records of a topic with three replicas. The answer's
// low watermark is 12; the leader's earliest offset is 12 at once, every
// broker's log-start-offset-checkpoint says 12 soon after, a consumer from
// the start (franz-go, kcat) reads offsets 12-19 only, and so it stays
// once the leader is killed and another leads. Offsets past the high
// watermark and compacted topics are refused.
func TestKadmDeleteRecordsOnAReplicatedTopic(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, map[string]string{"log.flush.start.offset.checkpoint.interval.ms": "100"})
	const topic = "trimmed"
	createTopic(t, c, topic, 1, nil)
	createTopic(t, c, "compacted", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := client(t, c, kgo.DefaultProduceTopic(topic))
	for i := range 20 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)}).FirstErr())
	}

	adm := kadm.NewClient(client(t, c))
	deleteAt := func(topic string, at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
		resps, err := adm.DeleteRecords(ctx, os)
		require.NoError(t, err)
		r, ok := resps.Lookup(topic, 0)
		require.True(t, ok)
		return r
	}
	got := deleteAt(topic, 12)
	require.NoError(t, got.Err)
	require.Equal(t, int64(12), got.LowWatermark)
	requireStart := func() {
		t.Helper()
		starts, err := adm.ListStartOffsets(ctx, topic)
		require.NoError(t, err)
		s, ok := starts.Lookup(topic, 0)
		require.True(t, ok)
		require.NoError(t, s.Err)
		require.Equal(t, int64(12), s.Offset)
	}
	requireStart()
	for id := range int32(3) {
		path := filepath.Join(c.Broker(id).LogDir(), commitlog.LogStartOffsetCheckpointFile)
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(path)
			return err == nil && strings.Contains(string(data), topic+" 0 12\n")
		}, 30*time.Second, 20*time.Millisecond, "broker %d's %s", id, path)
	}
	offsets := func() []int64 { return readOffsets(t, ctx, c, topic, 19, func(*kgo.Record) {}) }
	want := []int64{12, 13, 14, 15, 16, 17, 18, 19}
	require.Equal(t, want, offsets())

	var stderr strings.Builder
	kcat := exec.Command(kcatBinary(t), "-b", strings.Join(c.Addrs(), ","), "-C", "-t", topic,
		"-o", "beginning", "-e", "-f", `%o\n`)
	kcat.Stderr = &stderr
	out, err := kcat.Output()
	require.NoError(t, err, "kcat: %s", stderr.String())
	require.Equal(t, "12\n13\n14\n15\n16\n17\n18\n19\n", string(out), "kcat -o beginning")

	// Another leader: the records stay deleted.
	zk := observer(t, ens)
	old := waitLeaders(t, zk, topic, 1, func(int32) bool { return true })[0]
	c.Broker(old).Kill()
	waitLeaders(t, zk, topic, 1, func(id int32) bool { return id != old })
	require.Eventually(t, func() bool {
		starts, err := adm.ListStartOffsets(ctx, topic)
		s, _ := starts.Lookup(topic, 0)
		return err == nil && s.Err == nil && s.Offset == 12
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, want, offsets())

	require.ErrorIs(t, deleteAt(topic, 21).Err, kerr.OffsetOutOfRange, "past the high watermark")
	require.ErrorIs(t, deleteAt("compacted", 0).Err, kerr.PolicyViolation)
}
