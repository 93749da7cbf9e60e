package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// TestATopicsCompressionTypeIsAppliedToWhatProducersSend: a topic created
// with compression.type=zstd stores zstd batches whatever the producer
// sent (gzip, lz4 or nothing), on the leader and, copied, on the
// followers; a topic with the default (producer) stores each batch as it
// came. Consumers read the same records either way.
func TestATopicsCompressionTypeIsAppliedToWhatProducersSend(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer adm.Close()
	for topic, configs := range map[string]map[string]*string{
		"stored-zstd": {"compression.type": kadm.StringPtr("zstd")}, "as-produced": nil} {
		created, err := kadm.NewClient(adm).CreateTopics(ctx, 1, 3, configs, topic)
		require.NoError(t, err)
		require.NoError(t, created[topic].Err)
	}
	for _, sent := range []struct {
		codec record.Codec
		kgo   kgo.CompressionCodec
	}{{record.CodecGzip, kgo.GzipCompression()}, {record.CodecLZ4, kgo.Lz4Compression()}, {record.CodecNone, kgo.NoCompression()}} {
		t.Run(sent.codec.String(), func(t *testing.T) {
			p, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ProducerBatchCompression(sent.kgo), kgo.ProducerLinger(20*time.Millisecond))
			require.NoError(t, err)
			defer p.Close()
			var want []string
			for i := range 100 {
				want = append(want, fmt.Sprintf(`{"sent":%q,"n":%d,"event":"page_view","path":"/catalog/items"}`, sent.codec, i))
			}
			for _, topic := range []string{"stored-zstd", "as-produced"} {
				var recs []*kgo.Record
				for _, v := range want {
					recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
				}
				require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
			}
			for id := range int32(3) { // the leader and, copied, both followers
				tag := fmt.Sprintf(`"sent":%q`, sent.codec)
				var codecs []record.Codec
				var values []string
				require.Eventually(t, func() bool {
					codecs, values = storedBatches(t, c, id, "stored-zstd", tag)
					return len(values) == len(want)
				}, 30*time.Second, 20*time.Millisecond, "broker %d has the records", id)
				require.Equal(t, want, values)
				for _, got := range codecs {
					require.Equal(t, record.CodecZstd, got, "broker %d stores zstd, as the topic says", id)
				}
				require.Eventually(t, func() bool {
					codecs, values = storedBatches(t, c, id, "as-produced", tag)
					return len(values) == len(want)
				}, 30*time.Second, 20*time.Millisecond, "broker %d has the records", id)
				require.Equal(t, want, values)
				for _, got := range codecs {
					require.Equal(t, sent.codec, got, "broker %d stores the producer's %s", id, sent.codec)
				}
			}
		})
	}
}

// storedBatches reads partition 0 of topic from broker id's segment files,
// as they are on its disk, and returns the codec of each batch holding a
// record with tag in its value, and those values, in log order.
func storedBatches(t *testing.T, c *brokertest.Cluster, id int32, topic, tag string) (codecs []record.Codec, values []string) {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(c.Broker(id).LogDir(), topic+"-0", "*.log"))
	require.NoError(t, err)
	slices.Sort(segments) // named by base offset, zero-padded
	reader := record.GetReader(0)
	defer record.PutReader(reader)
	for _, path := range segments {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for len(data) >= record.HeaderSize {
			h, err := record.ReadHeader(data)
			if err != nil || h.Size() > len(data) {
				break // the tail an append is writing
			}
			it, err := reader.Records(data[:h.Size()])
			require.NoError(t, err)
			mine := false
			for it.Next() {
				if v := string(it.Record().Value); strings.Contains(v, tag) {
					values, mine = append(values, v), true
				}
			}
			require.NoError(t, it.Err())
			if mine {
				codecs = append(codecs, h.Attributes.Codec())
			}
			data = data[h.Size():]
		}
	}
	return codecs, values
}
