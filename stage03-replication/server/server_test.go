package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

func TestNewReportsABadHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, replica.HighWatermarkCheckpointFile), []byte("0\n1\ngarbage\n"), 0o644))
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "malformed checkpoint", "an error, not a panic")
}

// TestRequestsForAnEarlierIncarnationAreRefused: once the broker knows its
// epoch (KIP-380), controller requests carrying an older one get
// STALE_BROKER_EPOCH and change nothing; the current epoch, or none (-1),
// is accepted.
func TestRequestsForAnEarlierIncarnationAreRefused(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(), "broker.id": "1"},
		slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	s, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	require.Equal(t, int64(-1), s.BrokerEpoch())
	s.SetBrokerEpoch(100)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	leaderAndIsr := func(brokerEpoch int64, partition int32) int16 {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.Version, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 4, 0, 1, brokerEpoch
		req.TopicStates = []kmsg.LeaderAndISRRequestTopicState{{Topic: "orders", PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{
			{Partition: partition, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 0, ISR: []int32{1}, Replicas: []int32{1}, IsNew: true}}}}
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		return resp.ErrorCode
	}
	require.Equal(t, kerr.StaleBrokerEpoch.Code, leaderAndIsr(99, 0))
	_, ok := s.Replicas.Partition("orders", 0)
	require.False(t, ok, "nothing applied")
	require.Zero(t, leaderAndIsr(100, 0))
	require.Zero(t, leaderAndIsr(-1, 1), "no epoch in the request: accepted")
	_, ok = s.Replicas.Partition("orders", 1)
	require.True(t, ok)

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerEpoch, um.BrokerEpoch = 6, 1, 42
	resp, err := um.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.StaleBrokerEpoch.Code, resp.ErrorCode)

	sr := kmsg.NewPtrStopReplicaRequest()
	sr.Version, sr.ControllerEpoch, sr.BrokerEpoch = 2, 1, 42
	sr.Topics = []kmsg.StopReplicaRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	srResp, err := sr.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.StaleBrokerEpoch.Code, srResp.ErrorCode)
	_, ok = s.Replicas.Partition("orders", 0)
	require.True(t, ok, "not stopped")
}
