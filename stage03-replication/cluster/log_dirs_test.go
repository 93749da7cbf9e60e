package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// describeLogDirs asks broker id for its log directory through a client
// whose highest DescribeLogDirs version is version.
func (c *testCluster) describeLogDirs(id int32, version int16, topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
	c.t.Helper()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(35, version)
	cl := c.client(kgo.MaxVersions(versions))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = topics
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	require.NoError(c.t, err)
	require.Equal(c.t, version, resp.GetVersion())
	require.Len(c.t, resp.Dirs, 1, "one log directory")
	return resp.Dirs[0]
}

// sizes maps each partition of topic in a DescribeLogDirs answer to its
// size, checking that none lags or is a future log.
func sizes(t *testing.T, dir kmsg.DescribeLogDirsResponseDir, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for _, tt := range dir.Topics {
		if tt.Topic != topic {
			continue
		}
		for _, p := range tt.Partitions {
			require.Zero(t, p.OffsetLag, "a current replica's lag is 0 (max(HW - LEO, 0))")
			require.False(t, p.IsFuture)
			out[p.Partition] = p.Size
		}
	}
	return out
}

// TestDescribeLogDirsReportsEachReplicasSize: every broker describes its
// one log directory (absolute path, the file system's size and free
// space from v4) with its replicas of a topic, empty at first; after
// records go to partition 0 its size grows on the leader and on both
// followers, partition 1 stays empty; a request for some partitions gets
// only those; v1 (before the disk sizes) leaves them at -1; a directory
// that is gone is answered with KAFKA_STORAGE_ERROR.
func TestDescribeLogDirsReportsEachReplicasSize(t *testing.T) {
	c := startCluster(t, 3)
	c.createTopic("sizes", 2, 3)

	for _, id := range c.IDs() {
		dir := c.describeLogDirs(id, 4, nil)
		require.Zero(t, dir.ErrorCode)
		want, err := filepath.Abs(c.LogDir(id))
		require.NoError(t, err)
		require.Equal(t, want, dir.Dir)
		require.Positive(t, dir.TotalBytes)
		require.Positive(t, dir.UsableBytes)
		require.LessOrEqual(t, dir.UsableBytes, dir.TotalBytes)
		require.Equal(t, map[int32]int64{0: 0, 1: 0}, sizes(t, dir, "sizes"), "broker %d", id)
	}

	c.produce(tp("sizes", 0), kgo.AllISRAcks(), values("v", 10)...)
	for _, id := range c.IDs() {
		require.Eventually(t, func() bool {
			s := sizes(t, c.describeLogDirs(id, 4, nil), "sizes")
			return s[0] > 0 && s[1] == 0
		}, 10*time.Second, 20*time.Millisecond, "broker %d reports partition 0's records", id)
	}

	only := c.describeLogDirs(0, 4, []kmsg.DescribeLogDirsRequestTopic{{Topic: "sizes", Partitions: []int32{1}},
		{Topic: "unknown", Partitions: []int32{0}}})
	require.Len(t, only.Topics, 1)
	require.Equal(t, map[int32]int64{1: 0}, sizes(t, only, "sizes"))

	old := c.describeLogDirs(1, 1, nil)
	require.Zero(t, old.ErrorCode)
	require.Equal(t, int64(-1), old.TotalBytes, "not in v1")
	require.Positive(t, sizes(t, old, "sizes")[0])

	gone := c.LogDir(2) + "-gone"
	require.NoError(t, os.Rename(c.LogDir(2), gone))
	offline := c.describeLogDirs(2, 4, nil)
	require.NoError(t, os.Rename(gone, c.LogDir(2)))
	require.Equal(t, kerr.KafkaStorageError.Code, offline.ErrorCode)
	require.Empty(t, offline.Topics)
}
