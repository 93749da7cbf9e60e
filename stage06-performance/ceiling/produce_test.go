package ceiling_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network/loadgen"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage06-performance/ceiling"
)

func TestProduceRequestsDecodeAsKafkaRequests(t *testing.T) {
	p, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: "load", Partitions: 3, Records: 50, RecordSize: 100, Acks: -1})
	require.NoError(t, err)
	produceOnly := func(key int16) (int16, int16, bool) { return 3, 9, key == 0 }
	for corr := int32(7); corr < 13; corr++ {
		h, req, err := protocol.ParseRequest(p.AppendRequest(nil, corr), produceOnly)
		require.NoError(t, err)
		require.Equal(t, corr, h.CorrelationID)
		require.EqualValues(t, ceiling.ProduceVersion, h.APIVersion)
		pr := req.(*kmsg.ProduceRequest)
		require.EqualValues(t, -1, pr.Acks)
		require.EqualValues(t, 30_000, pr.TimeoutMillis)
		require.Len(t, pr.Topics, 1)
		require.Equal(t, "load", pr.Topics[0].Topic)
		require.Len(t, pr.Topics[0].Partitions, 1)
		require.Equal(t, corr%3, pr.Topics[0].Partitions[0].Partition, "the partitions in turn")
		require.Equal(t, p.Batch(), pr.Topics[0].Partitions[0].Records)
	}
	h, err := record.Validate(p.Batch())
	require.NoError(t, err)
	require.EqualValues(t, 50, h.NumRecords)
	require.Equal(t, record.CodecNone, h.Attributes.Codec())
	require.Equal(t, len(p.Batch()), h.Size())
	require.Greater(t, len(p.Batch()), 50*100)
}

func TestProduceRefusesAcksZero(t *testing.T) {
	_, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: "load", Partitions: 1, Records: 1, RecordSize: 100, Acks: 0})
	require.ErrorContains(t, err, "acks 0")
}

// TestPipelinedLoadAppendsEveryRecord: the pre-encoded requests, pipelined
// 4 deep on 2 connections, are each appended once by a stage 02 broker,
// the partitions in turn.
func TestPipelinedLoadAppendsEveryRecord(t *testing.T) {
	br := startStage02(t, nil)
	_, err := br.Store().CreateTopic("load", 3, nil)
	require.NoError(t, err)
	p, err := ceiling.NewProduce(ceiling.ProduceConfig{Topic: "load", Partitions: 3, Records: 20, RecordSize: 100, Acks: 1})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, br.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()
	before, err := ceiling.EndOffsets(ctx, c, "load", 3)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 0}, before)

	res, err := loadgen.Run(ctx, loadgen.Config{Addr: br.Addr().String(), Conns: 2, InFlight: 4, Requests: 60, AppendRequest: p.AppendRequest})
	require.NoError(t, err)
	require.EqualValues(t, 60, res.Requests)
	after, err := ceiling.EndOffsets(ctx, c, "load", 3)
	require.NoError(t, err)
	require.EqualValues(t, 60*20, ceiling.Appended(before, after))
	for _, end := range after {
		require.Zero(t, end%20, "whole batches")
	}
}

func TestEndOffsetsReportsAnUnknownTopic(t *testing.T) {
	br := startStage02(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(ctx, br.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()
	_, err = ceiling.EndOffsets(ctx, c, "nothere", 1)
	require.ErrorContains(t, err, "UNKNOWN_TOPIC_OR_PARTITION")
}

func TestWriteSequentialWritesEveryChunk(t *testing.T) {
	path := t.TempDir() + "/raw"
	chunk := []byte("0123456789")
	d, err := ceiling.WriteSequential(path, chunk, 1000)
	require.NoError(t, err)
	require.Positive(t, d)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, data, 10_000)
	require.Equal(t, chunk, data[9990:])
}
