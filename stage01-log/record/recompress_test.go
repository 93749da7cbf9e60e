package record_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

var allCodecs = []record.Codec{record.CodecNone, record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// recordsOf decodes a batch's records, copying them.
func recordsOf(t *testing.T, batch []byte) []record.Record {
	t.Helper()
	r := record.GetReader(0)
	defer record.PutReader(r)
	it, err := r.Records(batch)
	require.NoError(t, err)
	var out []record.Record
	for it.Next() {
		rec := *it.Record()
		rec.Key, rec.Value = append([]byte(nil), rec.Key...), append([]byte(nil), rec.Value...)
		rec.Headers = append([]record.Header(nil), rec.Headers...)
		out = append(out, rec)
	}
	require.NoError(t, it.Err())
	return out
}

// TestRecompressKeepsEverythingButTheCodec: from every codec to every
// codec, a rebuilt batch keeps its header fields (base offset, last offset
// delta, leader epoch, timestamps, producer id, epoch and sequence) and its
// records, keys, values and headers, with a valid CRC.
func TestRecompressKeepsEverythingButTheCodec(t *testing.T) {
	var recs []record.Record
	for i := range 50 {
		recs = append(recs, record.Record{TimestampDelta: int64(i * 3), OffsetDelta: int32(i), Key: fmt.Appendf(nil, "key-%d", i),
			Value: fmt.Appendf(nil, `{"user":%d,"action":"click","page":"/home"}`, i), Headers: []record.Header{{Key: []byte("h"), Value: []byte("v")}}})
	}
	recs[7].Value, recs[8].Key = nil, nil // a tombstone, a keyless record
	for _, from := range allCodecs {
		for _, to := range allCodecs {
			t.Run(fmt.Sprintf("%s-to-%s", from, to), func(t *testing.T) {
				b := record.NewBatch(1_800_000_000_000, recs...)
				b.BaseOffset, b.PartitionLeaderEpoch, b.Attributes = 42, 7, record.Attributes(0).WithCodec(from)
				b.ProducerID, b.ProducerEpoch, b.BaseSequence = 9001, 3, 100
				in, err := record.AppendBatch(nil, b)
				require.NoError(t, err)
				out, err := record.Recompress([]byte("prefix"), in, to, 0)
				require.NoError(t, err)
				require.Equal(t, "prefix", string(out[:6]))
				out = out[6:]
				hin, err := record.Validate(in)
				require.NoError(t, err)
				hout, err := record.Validate(out)
				require.NoError(t, err, "the rebuilt batch's CRC is valid")
				require.Equal(t, to, hout.Attributes.Codec())
				hin.Attributes, hin.Length, hin.CRC = hout.Attributes, hout.Length, hout.CRC
				require.Equal(t, hin, hout, "every other header field is kept")
				require.Equal(t, recordsOf(t, in), recordsOf(t, out))
			})
		}
	}
}

// TestRecompressRefusesWhatDoesNotDecode: a batch whose records do not
// decode is an error, and nothing is appended.
func TestRecompressRefusesWhatDoesNotDecode(t *testing.T) {
	b := record.NewBatch(0, record.Record{Value: []byte("v")})
	b.Attributes = record.Attributes(0).WithCodec(record.CodecGzip)
	in, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	in[len(in)-3] ^= 0xff // damage the compressed records
	out, err := record.Recompress(nil, in, record.CodecZstd, 0)
	require.Error(t, err)
	require.Empty(t, out)
}
