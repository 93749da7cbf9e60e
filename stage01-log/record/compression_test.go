package record

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

var codecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// realistic returns n bytes of JSON-like records: compressible, as
// production data is, but not trivially.
func realistic(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"id":%d,"user":"user-%04d","amount":%d.%02d,"status":"%s"}`,
			i, rng.IntN(5000), rng.IntN(1000), rng.IntN(100), []string{"paid", "pending", "refunded"}[rng.IntN(3)])
	}
	return b.Bytes()[:n]
}

func TestCodecsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	inputs := map[string][]byte{
		"empty":                   {},
		"one byte":                {'x'},
		"json 1 KiB":              realistic(rng, 1<<10),
		"json 100 KiB (4 xerial)": realistic(rng, 100<<10),
		"random 100 KiB":          random,
	}
	for _, c := range codecs {
		for name, in := range inputs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				prefix := []byte("keep")
				comp, err := AppendCompressed(append([]byte(nil), prefix...), in, c)
				require.NoError(t, err)
				require.Equal(t, prefix, comp[:len(prefix)], "appends after dst")
				out, err := AppendDecompressed([]byte("old"), comp[len(prefix):], c, len(in))
				require.NoError(t, err)
				require.Equal(t, string(in), string(out[3:]))
			})
		}
	}
}

// TestXerialFramingIsSnappyJavas pins the bytes of the framing Kafka's Java
// client writes and reads: magic, version 1, compatible version 1, then one
// length-prefixed raw snappy block per 32 KiB.
func TestXerialFramingIsSnappyJavas(t *testing.T) {
	got, err := AppendCompressed(nil, []byte("hello"), CodecSnappy)
	require.NoError(t, err)
	require.Equal(t, "82534e41505059000000000100000001"+ // magic, version, compatible version
		"00000007"+"0510"+hex.EncodeToString([]byte("hello")), // block: length, raw snappy (len 5, literal of 5)
		hex.EncodeToString(got))

	big := realistic(rand.New(rand.NewPCG(3, 4)), 3*xerialBlockSize+1)
	got, err = AppendCompressed(nil, big, CodecSnappy)
	require.NoError(t, err)
	blocks := 0
	for rest := got[xerialHeaderSize:]; len(rest) > 0; blocks++ {
		n := int(uint32(rest[0])<<24 | uint32(rest[1])<<16 | uint32(rest[2])<<8 | uint32(rest[3]))
		rest = rest[4+n:]
	}
	require.Equal(t, 4, blocks, "32 KiB blocks, as snappy-java writes")
}

func TestSnappyReadsARawBlockToo(t *testing.T) {
	// librdkafka, franz-go and Sarama write one raw snappy block.
	in := realistic(rand.New(rand.NewPCG(5, 6)), 50<<10)
	out, err := AppendDecompressed(nil, s2.EncodeSnappy(nil, in), CodecSnappy, len(in))
	require.NoError(t, err)
	require.Equal(t, in, out)
}

// TestCodecsInteroperateWithFranzGo checks each codec both ways against an
// implementation we did not write: franz-go's compressor reads ours and we
// read its.
func TestCodecsInteroperateWithFranzGo(t *testing.T) {
	in := realistic(rand.New(rand.NewPCG(7, 8)), 200<<10)
	theirCodec := map[Codec]kgo.CompressionCodec{
		CodecGzip: kgo.GzipCompression(), CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4: kgo.Lz4Compression(), CodecZstd: kgo.ZstdCompression(),
	}
	decompressor := kgo.DefaultDecompressor()
	for _, c := range codecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			ours, err := AppendCompressed(nil, in, c)
			require.NoError(t, err)
			got, err := decompressor.Decompress(ours, kgo.CompressionCodecType(c))
			require.NoError(t, err, "franz-go reads our %s", c)
			require.Equal(t, in, got)

			compressor, err := kgo.DefaultCompressor(theirCodec[c])
			require.NoError(t, err)
			theirs, used := compressor.Compress(new(bytes.Buffer), in)
			require.Equal(t, kgo.CompressionCodecType(c), used)
			got, err = AppendDecompressed(nil, theirs, c, len(in))
			require.NoError(t, err, "we read franz-go's %s", c)
			require.Equal(t, in, got)
		})
	}
}

// TestDecompressionStopsAtTheLimit feeds each codec a bomb: 64 MiB of zeros
// that compress to a few kilobytes (snappy to about 3 MiB). Decompressing it
// with a 1 MiB limit must fail without spending the 64 MiB.
func TestDecompressionStopsAtTheLimit(t *testing.T) {
	zeros := make([]byte, 64<<20)
	for _, c := range codecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			bomb, err := AppendCompressed(nil, zeros, c)
			require.NoError(t, err)
			t.Logf("%s: 64 MiB of zeros compress to %d bytes", c, len(bomb))
			AppendDecompressed(nil, bomb, c, 1<<20) // warm the codec's pools

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = AppendDecompressed(nil, bomb, c, 1<<20)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, ErrTooLarge)
			allocated := after.TotalAlloc - before.TotalAlloc
			require.Less(t, allocated, uint64(16<<20), "allocated %d bytes for a 1 MiB limit", allocated)
		})
	}
}

func TestDecompressionRefusesGarbageAndUnknownCodecs(t *testing.T) {
	garbage := []byte("this is not compressed by anything at all, only text")
	for _, c := range codecs[1:] {
		_, err := AppendDecompressed(nil, garbage, c, 1<<20)
		require.ErrorIs(t, err, ErrCorruptCompression, "%s", c)
	}
	truncated, err := AppendCompressed(nil, realistic(rand.New(rand.NewPCG(9, 9)), 10<<10), CodecSnappy)
	require.NoError(t, err)
	_, err = AppendDecompressed(nil, truncated[:len(truncated)-10], CodecSnappy, 1<<20)
	require.ErrorIs(t, err, ErrCorruptCompression, "a cut xerial block")

	for c := Codec(5); c <= 7; c++ {
		require.False(t, c.Known())
		_, err := AppendDecompressed(nil, garbage, c, 1<<20)
		require.ErrorIs(t, err, ErrUnknownCodec)
		_, err = AppendCompressed(nil, garbage, c)
		require.ErrorIs(t, err, ErrUnknownCodec)
	}
}

// compressedBatch encodes n small records with codec c.
func compressedBatch(t testing.TB, c Codec, n int) []byte {
	records := make([]Record, n)
	for i := range records {
		records[i] = Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Key: []byte(fmt.Sprint(i % 7)),
			Value: []byte(fmt.Sprintf(`{"n":%d,"text":"record number %d"}`, i, i))}
	}
	b := NewBatch(1704067200000, records...)
	b.Attributes = b.Attributes.WithCodec(c)
	out, err := AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

func TestCompressedBatchesRoundTrip(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			batch := compressedBatch(t, c, 500)
			h, err := Validate(batch)
			require.NoError(t, err)
			require.Equal(t, c, h.Attributes.Codec())
			require.Equal(t, int32(500), h.NumRecords)
			require.Equal(t, int32(499), h.LastOffsetDelta)
			require.Equal(t, int64(1704067200000+499), h.MaxTimestamp)
			if c != CodecNone {
				require.Less(t, len(batch), len(compressedBatch(t, CodecNone, 500)), "compression shrinks JSON")
			}

			var r Reader
			it, err := r.Records(batch)
			require.NoError(t, err)
			i := 0
			for ; it.Next(); i++ {
				require.Equal(t, fmt.Sprintf(`{"n":%d,"text":"record number %d"}`, i, i), string(it.Record().Value))
				require.Equal(t, int32(i), it.Record().OffsetDelta)
			}
			require.NoError(t, it.Err())
			require.Equal(t, 500, i)
		})
	}
}

func TestReaderRefusesBatchesThatCannotHoldTheirCount(t *testing.T) {
	gz := compressedBatch(t, CodecGzip, 3)
	claim := func(batch []byte, count int32) []byte {
		b := append([]byte(nil), batch...)
		b[recordsCountPos], b[recordsCountPos+1], b[recordsCountPos+2], b[recordsCountPos+3] =
			byte(count>>24), byte(count>>16), byte(count>>8), byte(count)
		return b
	}

	// 2^31-1 records cannot fit in 64 MiB: refused before decompressing.
	var r Reader
	_, err := r.Records(claim(gz, math.MaxInt32))
	require.ErrorIs(t, err, ErrInvalidRecord)
	require.Nil(t, r.buf, "nothing was decompressed")

	// 100 records cannot fit in the 3 records' bytes.
	_, err = r.Records(claim(gz, 100))
	require.ErrorIs(t, err, ErrInvalidRecord)
	_, err = r.Records(claim(compressedBatch(t, CodecNone, 3), 100))
	require.ErrorIs(t, err, ErrInvalidRecord)

	// A limit below the records' size.
	r.MaxRecordBytes = 100
	_, err = r.Records(compressedBatch(t, CodecZstd, 10))
	require.ErrorIs(t, err, ErrTooLarge)

	unknown := append([]byte(nil), gz...)
	unknown[attributesPos+1] |= 7
	_, err = r.Records(unknown)
	require.ErrorIs(t, err, ErrUnknownCodec)
}
