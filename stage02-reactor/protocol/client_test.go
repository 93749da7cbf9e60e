package protocol_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

func startBroker(t *testing.T) *broker.Broker {
	cfg, err := broker.ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "logs"),
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	b, err := broker.New(cfg, broker.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func TestClientNegotiatesVersionsAndRoundTrips(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	c, err := protocol.Dial(ctx, b.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()

	req := kmsg.NewPtrMetadataRequest()
	resp, err := c.Request(ctx, req)
	require.NoError(t, err)
	require.Equal(t, int16(9), req.GetVersion(), "the broker's max, flexible")
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1)

	_, err = c.Request(ctx, kmsg.NewPtrLeaderAndISRRequest())
	require.ErrorIs(t, err, protocol.ErrNoCommonVersion, "stage 02 serves no LeaderAndIsr")
}

func TestClientRequestHonoursContext(t *testing.T) {
	b := startBroker(t)
	c, err := protocol.Dial(context.Background(), b.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()
	// A long-poll fetch the broker holds for a minute; the context ends first.
	b.Store().CreateTopic("t", 1, nil)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 60_000, 1, 1<<20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Request(ctx, req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
