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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestKcatCompressesWithEveryCodecHere: librdkafka (kcat) compresses a
// batch only for a broker that it believes reads the codec, and for lz4
// its sign is FindCoordinator being served (Kafka 0.10's); stage 02's
// broker, without it, gets kcat's lz4 batches uncompressed (its test skips
// that case). This broker serves FindCoordinator: kcat's gzip, snappy,
// lz4 and zstd batches are stored compressed with the codec asked for,
// and hold what kcat read from its input.
func TestKcatCompressesWithEveryCodecHere(t *testing.T) {
	kcat := kcatBinary(t)
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 1, nil)
	for _, codec := range []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			topic := "kcat-" + codec.String()
			createTopicRF(t, c, topic, 1)
			var want []string
			for i := range 200 {
				want = append(want, fmt.Sprintf("kcat %s record %03d %s", codec, i, strings.Repeat("compressible ", 8)))
			}
			input := filepath.Join(t.TempDir(), "in.txt")
			require.NoError(t, os.WriteFile(input, []byte(strings.Join(want, "\n")+"\n"), 0o644))
			out, err := exec.Command(kcat, "-b", c.Addrs()[0], "-P", "-t", topic, "-p", "0", "-z", codec.String(),
				"-X", "linger.ms=100", "-l", input).CombinedOutput()
			require.NoError(t, err, "kcat -P: %s", out)

			codecs, values := fetchBatches(t, c, topic, len(want))
			for _, got := range codecs {
				require.Equal(t, codec, got, "kcat's batch is stored as %s", codec)
			}
			require.Equal(t, want, values)
		})
	}
}

// createTopicRF creates a topic of one partition with replication factor
// rf through kadm.
func createTopicRF(t *testing.T, c *brokertest.Cluster, topic string, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, rf
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 30000
	resp, err := req.RequestWith(ctx, client(t, c))
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode, "create %s", topic)
}

// fetchBatches reads partition 0 of topic from its start with raw Fetch
// requests until it has n records, and returns each batch's codec and the
// records' values, decoded with stage 01's record package.
func fetchBatches(t *testing.T, c *brokertest.Cluster, topic string, n int) (codecs []record.Codec, values []string) {
	t.Helper()
	cl := client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := record.GetReader(0)
	defer record.PutReader(reader)
	for offset := int64(0); len(values) < n; {
		require.NoError(t, ctx.Err(), "read %d of %d records", len(values), n)
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes = -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := cl.Request(ctx, protocol.CapVersion(req, 12)) // by name: before topic ids
		require.NoError(t, err)
		p := r.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		require.Zero(t, p.ErrorCode)
		for data := p.RecordBatches; len(data) >= record.HeaderSize; {
			h, err := record.ReadHeader(data)
			require.NoError(t, err)
			if h.Size() > len(data) {
				break // a partial batch at the end of the answer
			}
			codecs = append(codecs, h.Attributes.Codec())
			it, err := reader.Records(data[:h.Size()])
			require.NoError(t, err)
			for it.Next() {
				values = append(values, string(it.Record().Value))
			}
			require.NoError(t, it.Err())
			offset, data = h.NextOffset(), data[h.Size():]
		}
	}
	return codecs, values
}
