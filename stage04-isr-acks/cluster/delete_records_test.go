package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords sends DeleteRecords for one partition of orders straight
// to broker id and returns its answer.
func (tc *testCluster) deleteRecords(id int32, topic string, offset int64, timeout time.Duration) kmsg.DeleteRecordsResponseTopicPartition {
	tc.t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: topic,
		Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: tc.tp.Partition, Offset: offset}}}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	resp, err := tc.client(kgo.AllISRAcks()).Broker(int(id)).Request(ctx, req)
	require.NoError(tc.t, err)
	return resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
}

// earliest asks broker id for the partition's earliest offset (ListOffsets
// -2, as a consumer).
func (tc *testCluster) earliest(id int32) (int64, int16) {
	tc.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = tc.tp.Partition, -2
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
	resp, err := tc.client(kgo.AllISRAcks()).Broker(int(id)).Request(context.Background(), req)
	require.NoError(tc.t, err)
	p := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// TestDeleteRecordsAnswersOnceEveryReplicaHasDeleted: the leader moves its
// log start at once; the answer waits until each follower has copied it
// (from a fetch response) and told it back (in its next fetch), so when it
// comes every replica starts at the low watermark. Consumers read only
// what follows, also from the next leader.
func TestDeleteRecordsAnswersOnceEveryReplicaHasDeleted(t *testing.T) {
	tc := startCluster(t, nil)
	vals := values("r", 20)
	acked, err := produceAll(tc.client(kgo.AllISRAcks()), vals)
	require.NoError(t, err)
	require.Len(t, acked, 20)

	got := tc.deleteRecords(0, tc.tp.Topic, 12, 30*time.Second)
	require.Zero(t, got.ErrorCode, "%v", kerr.ErrorForCode(got.ErrorCode))
	require.Equal(t, int64(12), got.LowWatermark)
	for _, id := range []int32{0, 1, 2} {
		p, ok := tc.server(id).Replicas.Partition(tc.tp.Topic, tc.tp.Partition)
		require.True(t, ok)
		require.Equal(t, int64(12), p.Log.StartOffset(), "broker %d, when the answer came", id)
	}
	start, code := tc.earliest(0)
	require.Zero(t, code)
	require.Equal(t, int64(12), start)
	require.Equal(t, vals[12:], tc.readAll())

	// The next leader deleted them too.
	require.NoError(t, tc.Controller.ElectLeader(tc.tp, 1))
	require.Eventually(t, func() bool {
		start, code := tc.earliest(1)
		return code == 0 && start == 12
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, vals[12:], tc.readAll())

	// -1 deletes up to the high watermark.
	got = tc.deleteRecords(1, tc.tp.Topic, -1, 30*time.Second)
	require.Zero(t, got.ErrorCode)
	require.Equal(t, int64(20), got.LowWatermark)
}

// TestDeleteRecordsErrors: Kafka's answers for an offset past the high
// watermark, a broker that does not lead, a topic nobody knows, an
// internal topic, and a follower that does not follow in time.
func TestDeleteRecordsErrors(t *testing.T) {
	tc := startCluster(t, nil)
	_, err := produceAll(tc.client(kgo.AllISRAcks()), values("e", 10))
	require.NoError(t, err)

	got := tc.deleteRecords(0, tc.tp.Topic, 11, 5*time.Second)
	require.Equal(t, kerr.OffsetOutOfRange.Code, got.ErrorCode)
	require.Equal(t, int64(-1), got.LowWatermark)
	got = tc.deleteRecords(1, tc.tp.Topic, 5, 5*time.Second)
	require.Equal(t, kerr.NotLeaderForPartition.Code, got.ErrorCode, "broker 1 follows")
	got = tc.deleteRecords(0, "nobody-knows", 5, 5*time.Second)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, got.ErrorCode)
	got = tc.deleteRecords(0, "__consumer_offsets", 5, 5*time.Second)
	require.Equal(t, kerr.InvalidTopicException.Code, got.ErrorCode)

	// A follower that fetches nothing holds the low watermark back: the
	// leader deleted, the answer is REQUEST_TIMED_OUT with the low
	// watermark as it was.
	tc.server(2).Replicas.PauseFetching(true)
	got = tc.deleteRecords(0, tc.tp.Topic, 4, 300*time.Millisecond)
	require.Equal(t, kerr.RequestTimedOut.Code, got.ErrorCode)
	require.Equal(t, int64(0), got.LowWatermark)
	start, _ := tc.earliest(0)
	require.Equal(t, int64(4), start, "the leader deleted at once")
	tc.server(2).Replicas.PauseFetching(false)
	got = tc.deleteRecords(0, tc.tp.Topic, 4, 30*time.Second)
	require.Zero(t, got.ErrorCode)
	require.Equal(t, int64(4), got.LowWatermark)
}
