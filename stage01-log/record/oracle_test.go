package record

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The oracle: franz-go's kmsg, an independent implementation of Kafka's
// protocol, must produce the same bytes for the same content, and each side
// must read the other's output.

// randomBatch returns random content with nulls, empty values, big deltas
// and headers, all of which have edge cases in the varint encoding.
func randomBatch(rng *rand.Rand) *Batch {
	b := NewBatch(rng.Int64N(1 << 42))
	b.BaseOffset = rng.Int64N(1 << 40)
	b.PartitionLeaderEpoch = rng.Int32N(1000) - 1
	if rng.IntN(4) == 0 {
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = rng.Int64N(1<<50), int16(rng.IntN(100)), rng.Int32N(1<<30)
	}
	randBytes := func(max int) []byte {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		p := make([]byte, rng.IntN(max))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	n := 1 + rng.IntN(20)
	for i := range n {
		r := Record{
			OffsetDelta:    int32(i),
			TimestampDelta: rng.Int64N(1<<35) - 1<<20,
			Key:            randBytes(40),
			Value:          randBytes(2000),
		}
		for range rng.IntN(4) {
			k := randBytes(10)
			if k == nil {
				k = []byte{}
			}
			r.Headers = append(r.Headers, Header{Key: k, Value: randBytes(10)})
		}
		b.Records = append(b.Records, r)
	}
	return b
}

// kmsgEncode encodes b with kmsg, filling in Length and CRC the way a
// producer (franz-go's sink) does.
func kmsgEncode(b *Batch) []byte {
	kb := kmsg.RecordBatch{
		FirstOffset:          b.BaseOffset,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           int16(b.Attributes),
		FirstTimestamp:       b.FirstTimestamp,
		MaxTimestamp:         b.FirstTimestamp,
		ProducerID:           b.ProducerID,
		ProducerEpoch:        b.ProducerEpoch,
		FirstSequence:        b.BaseSequence,
		NumRecords:           int32(len(b.Records)),
	}
	for _, r := range b.Records {
		kr := kmsg.Record{
			Attributes:       r.Attributes,
			TimestampDelta64: r.TimestampDelta,
			OffsetDelta:      r.OffsetDelta,
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		// Length counts the bytes after itself: encode once with Length 0,
		// which takes one byte, to measure them.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		kb.Records = kr.AppendTo(kb.Records)
		kb.LastOffsetDelta = max(kb.LastOffsetDelta, r.OffsetDelta)
		kb.MaxTimestamp = max(kb.MaxTimestamp, b.FirstTimestamp+r.TimestampDelta)
	}
	out := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(out[lengthPos:], uint32(len(out)-LogOverhead))
	binary.BigEndian.PutUint32(out[crcPos:], Checksum(out))
	return out
}

func TestEncodingMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		b := randomBatch(rng)
		ours, err := AppendBatch(nil, b)
		require.NoError(t, err)
		requireBatch(t, fmt.Sprintf("AppendBatch of random batch %d", i), kmsgEncode(b), ours)
	}
}

func TestKmsgDecodesOurBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		b := randomBatch(rng)
		ours, err := AppendBatch(nil, b)
		require.NoError(t, err)

		var kb kmsg.RecordBatch
		require.NoError(t, kb.ReadFrom(ours))
		require.Equal(t, b.BaseOffset, kb.FirstOffset)
		require.Equal(t, int32(len(ours)-LogOverhead), kb.Length)
		require.Equal(t, int32(len(b.Records)), kb.NumRecords)
		require.Equal(t, uint32(kb.CRC), Checksum(ours))

		rest := kb.Records
		for i, want := range b.Records {
			var kr kmsg.Record
			require.NoError(t, kr.ReadFrom(rest), "record %d", i)
			rest = rest[int(kr.Length)+varintLen(int64(kr.Length)):]
			require.Equal(t, want.TimestampDelta, kr.TimestampDelta64)
			require.Equal(t, want.OffsetDelta, kr.OffsetDelta)
			require.Equal(t, want.Key, kr.Key)
			require.Equal(t, want.Value, kr.Value)
			require.Len(t, kr.Headers, len(want.Headers))
			for j, h := range want.Headers {
				require.Equal(t, string(h.Key), kr.Headers[j].Key)
				require.Equal(t, h.Value, kr.Headers[j].Value)
			}
		}
		require.Empty(t, rest)
	}
}

func TestWeDecodeKmsgBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		b := randomBatch(rng)
		theirs := kmsgEncode(b)

		h, err := Validate(theirs)
		require.NoError(t, err)
		require.Equal(t, b.BaseOffset, h.BaseOffset)
		require.Equal(t, int32(len(b.Records)), h.NumRecords)

		it, err := NewIterator(theirs)
		require.NoError(t, err)
		i := 0
		for it.Next() {
			got, want := it.Record(), b.Records[i]
			require.Equal(t, want.TimestampDelta, got.TimestampDelta)
			require.Equal(t, want.OffsetDelta, got.OffsetDelta)
			require.Equal(t, want.Key, got.Key)
			require.Equal(t, want.Value, got.Value)
			require.Len(t, got.Headers, len(want.Headers))
			for j, wh := range want.Headers {
				require.Equal(t, wh.Key, got.Headers[j].Key)
				require.Equal(t, wh.Value, got.Headers[j].Value)
			}
			i++
		}
		require.NoError(t, it.Err())
		require.Equal(t, len(b.Records), i)
	}
}
