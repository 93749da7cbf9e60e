package record

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVarintEncoding(t *testing.T) {
	tests := []struct {
		v    int64
		want string
	}{
		{0, "00"},
		{-1, "01"},
		{1, "02"},
		{-2, "03"},
		{63, "7e"},
		{-64, "7f"},
		{64, "8001"},
		{300, "d804"},
		{math.MaxInt32, "feffffff0f"},
		{math.MinInt32, "ffffffff0f"},
		{math.MaxInt64, "feffffffffffffffff01"},
		{math.MinInt64, "ffffffffffffffffff01"},
	}
	for _, tt := range tests {
		got := appendVarint(nil, tt.v)
		want, err := hex.DecodeString(tt.want)
		require.NoError(t, err)
		requireVarint(t, tt.v, want, got)
		require.Equal(t, len(got), varintLen(tt.v), "varintLen %d", tt.v)
		v, n := readVarint(got, 10)
		require.Equal(t, len(got), n)
		require.Equal(t, tt.v, v)
	}
}

func TestReadVarintRejectsTruncatedAndOverlong(t *testing.T) {
	_, n := readVarint([]byte{0x80, 0x80}, 5) // continuation bit on the last byte
	require.Zero(t, n)
	_, n = readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 5) // 6 bytes for a varint
	require.Zero(t, n)
}

// goldenBatch is the example the chapter dissects byte by byte: two records
// produced at 2024-01-01T00:00:00Z, the second 5 ms later with a header,
// appended at offset 42 by the leader of epoch 3.
func goldenBatch(t testing.TB) []byte {
	b := NewBatch(1704067200000,
		Record{OffsetDelta: 0, Key: []byte("k1"), Value: []byte("hello")},
		Record{OffsetDelta: 1, TimestampDelta: 5, Key: nil, Value: []byte("world"),
			Headers: []Header{{Key: []byte("h"), Value: []byte("v")}}},
	)
	b.BaseOffset = 42
	b.PartitionLeaderEpoch = 3
	out, err := AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

const goldenHex = "" +
	"000000000000002a" + // baseOffset 42
	"0000004f" + // length 79: the batch is 91 bytes
	"00000003" + // partitionLeaderEpoch 3
	"02" + // magic 2
	"d7504ea8" + // crc: CRC-32C of the 70 bytes from attributes to the end
	"0000" + // attributes: no codec, CreateTime
	"00000001" + // lastOffsetDelta 1
	"0000018cc251f400" + // firstTimestamp 1704067200000
	"0000018cc251f405" + // maxTimestamp, 5 ms later
	"ffffffffffffffff" + // producerId -1
	"ffff" + // producerEpoch -1
	"ffffffff" + // baseSequence -1
	"00000002" + // recordsCount 2
	// record 0: length 13, attrs 0, tsDelta 0, offDelta 0, key "k1", value "hello", 0 headers
	"1a" + "00" + "00" + "00" + "04" + "6b31" + "0a" + "68656c6c6f" + "00" +
	// record 1: length 15, attrs 0, tsDelta 5, offDelta 1, null key, value "world", 1 header h=v
	"1e" + "00" + "0a" + "02" + "01" + "0a" + "776f726c64" + "02" + "02" + "68" + "02" + "76"

func TestGoldenBatchBytes(t *testing.T) {
	got := goldenBatch(t)
	requireBatch(t, "AppendBatch of the golden batch", goldenBytes(t), got)

	h, err := Validate(got)
	require.NoError(t, err)
	require.Equal(t, BatchHeader{
		BaseOffset: 42, Length: 79, PartitionLeaderEpoch: 3, Magic: 2, CRC: 0xd7504ea8,
		LastOffsetDelta: 1, FirstTimestamp: 1704067200000, MaxTimestamp: 1704067200005,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 2,
	}, h)
	require.Equal(t, int64(43), h.LastOffset())
	require.Equal(t, len(got), h.Size())
}

// TestPutHeaderBuildsABatchInPlace: an encoder that reserves the header,
// appends the records and then calls PutHeader writes the golden bytes,
// whatever garbage the reserved header held, and a compressed batch built
// so validates and reads back.
func TestPutHeaderBuildsABatchInPlace(t *testing.T) {
	records := []Record{
		{OffsetDelta: 0, Key: []byte("k1"), Value: []byte("hello")},
		{OffsetDelta: 1, TimestampDelta: 5, Value: []byte("world"), Headers: []Header{{Key: []byte("h"), Value: []byte("v")}}},
	}
	h := BatchHeader{BaseOffset: 42, PartitionLeaderEpoch: 3, LastOffsetDelta: 1, FirstTimestamp: 1704067200000,
		MaxTimestamp: 1704067200005, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 2,
		Length: 12345, CRC: 1, Magic: 7} // ignored: PutHeader derives them
	buf := make([]byte, HeaderSize, 256)
	for i := range buf {
		buf[i] = 0xee
	}
	for i := range records {
		buf = records[i].AppendTo(buf)
	}
	PutHeader(buf, &h)
	requireBatch(t, "PutHeader over a reserved header", goldenBytes(t), buf)

	var plain []byte
	for i := range records {
		plain = records[i].AppendTo(plain)
	}
	zbuf, err := AppendCompressed(make([]byte, HeaderSize), plain, CodecZstd)
	require.NoError(t, err)
	h.Attributes = h.Attributes.WithCodec(CodecZstd)
	PutHeader(zbuf, &h)
	got, err := Validate(zbuf)
	require.NoError(t, err)
	require.Equal(t, CodecZstd, got.Attributes.Codec())
	it, err := NewIterator(zbuf)
	require.NoError(t, err)
	var values []string
	for it.Next() {
		values = append(values, string(it.Record().Value))
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{"hello", "world"}, values)
}

func TestOffsetAndEpochStampingKeepCRCValid(t *testing.T) {
	b := goldenBatch(t)
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 99)
	want := goldenBytes(t) // the same bytes, crc included, but for the two fields
	binary.BigEndian.PutUint64(want[baseOffsetPos:], 1<<40)
	binary.BigEndian.PutUint32(want[partitionLeaderEpochPos:], 99)
	requireBatch(t, "the golden batch stamped with offset 1<<40 and epoch 99", want, b)
	h, err := Validate(b)
	require.NoError(t, err, "baseOffset and partitionLeaderEpoch lie outside the crc")
	require.Equal(t, int64(1<<40), h.BaseOffset)
	require.Equal(t, int32(99), h.PartitionLeaderEpoch)
}

func TestIteratorDecodesRecords(t *testing.T) {
	it, err := NewIterator(goldenBatch(t))
	require.NoError(t, err)
	var got []Record
	for it.Next() {
		r := *it.Record()
		r.Headers = append([]Header(nil), r.Headers...)
		got = append(got, r)
	}
	require.NoError(t, it.Err())
	require.Len(t, got, 2)
	require.Equal(t, []byte("k1"), got[0].Key)
	require.Equal(t, []byte("hello"), got[0].Value)
	require.Empty(t, got[0].Headers)
	require.Nil(t, got[1].Key, "a null key stays nil")
	require.Equal(t, int64(5), got[1].TimestampDelta)
	require.Equal(t, int32(1), got[1].OffsetDelta)
	require.Equal(t, []Header{{Key: []byte("h"), Value: []byte("v")}}, got[1].Headers)
}

func TestIteratorDoesNotAllocatePerRecord(t *testing.T) {
	b := NewBatch(0)
	for i := range 100 {
		b.Records = append(b.Records, Record{OffsetDelta: int32(i), Value: []byte("value"),
			Headers: []Header{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b")}}})
	}
	batch, err := AppendBatch(nil, b)
	require.NoError(t, err)
	it, err := NewIterator(batch)
	require.NoError(t, err)
	data := batch[HeaderSize:]

	allocs := testing.AllocsPerRun(100, func() {
		it.Reset(data, 100)
		n := 0
		for it.Next() {
			n++
		}
		if n != 100 || it.Err() != nil {
			t.Fatalf("iterated %d records, err %v", n, it.Err())
		}
	})
	require.Zero(t, allocs, "iterating a batch must not allocate")
}

func TestBadInputGivesTypedErrors(t *testing.T) {
	good := goldenBatch(t)
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTooShort},
		{"shorter than a header", good[:HeaderSize-1], ErrTooShort},
		{"bad magic", mutate(func(b []byte) []byte { b[magicPos] = 1; return b }), ErrBadMagic},
		{"truncated body", good[:len(good)-1], ErrLengthMismatch},
		{"length below header", mutate(func(b []byte) []byte { b[lengthPos+3] = 10; return b }), ErrLengthMismatch},
		{"flipped value byte", mutate(func(b []byte) []byte { b[len(b)-10] ^= 0x40; return b }), ErrCRCMismatch},
		{"flipped attribute", mutate(func(b []byte) []byte { b[attributesPos+1] ^= 1; return b }), ErrCRCMismatch},
		{"negative record count", mutate(func(b []byte) []byte { b[recordsCountPos] = 0xff; return b }), ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Validate(tt.in)
			require.ErrorIs(t, err, tt.want)
			require.True(t, IsCorrupt(err))
		})
	}
}

func TestMalformedRecordsAreInvalidRecord(t *testing.T) {
	batch := goldenBatch(t)
	body := batch[HeaderSize:]
	tests := []struct {
		name  string
		data  []byte
		count int32
	}{
		{"record cut short", body[:len(body)-2], 2},
		{"fewer records than counted", body, 3},
		{"bytes after the last record", append(append([]byte(nil), body...), 0), 2},
		{"record length past the end", []byte{0x7e, 0x00}, 1},
		{"negative key length", []byte{0x08, 0x00, 0x00, 0x00, 0x05, 0x00}, 1},
		{"huge header count", []byte{0x0a, 0x00, 0x00, 0x00, 0x01, 0x01, 0xfe, 0xff, 0xff, 0xff, 0x07}, 1},
		{"null header key", []byte{0x0c, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x01, 0x01}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := NewRecordIterator(tt.data, tt.count)
			for it.Next() {
			}
			require.ErrorIs(t, it.Err(), ErrInvalidRecord)
		})
	}
}

func TestAppendBatchRefusesWhatItCannotEncode(t *testing.T) {
	_, err := AppendBatch(nil, NewBatch(0))
	require.ErrorIs(t, err, ErrInvalidArgument)
	b := NewBatch(0, Record{Value: []byte("x")})
	b.Attributes = b.Attributes.WithCodec(Codec(6))
	_, err = AppendBatch(nil, b)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, ErrUnknownCodec)
}

func TestAttributes(t *testing.T) {
	a := Attributes(0).WithCodec(CodecLZ4) | timestampTypeFlag | controlFlag
	require.Equal(t, CodecLZ4, a.Codec())
	require.Equal(t, "lz4", a.Codec().String())
	require.True(t, a.LogAppendTime())
	require.Equal(t, "LogAppendTime", a.TimestampType())
	require.True(t, a.Control())
	require.False(t, a.Transactional())
	require.Equal(t, "codec(7)", Codec(7).String())
}

func TestPeekSize(t *testing.T) {
	b := goldenBatch(t)
	off, size, err := PeekSize(b[:LogOverhead])
	require.NoError(t, err)
	require.Equal(t, int64(42), off)
	require.Equal(t, len(b), size)
	_, _, err = PeekSize(b[:LogOverhead-1])
	require.True(t, errors.Is(err, ErrTooShort))
}

func TestLastOffsetDeltaOverrideAndEmptyBatch(t *testing.T) {
	b := NewBatch(1000, Record{OffsetDelta: 0, Key: []byte("k"), Value: []byte("v")})
	b.BaseOffset, b.LastOffsetDelta, b.ProducerID, b.ProducerEpoch, b.BaseSequence = 40, 4, 7, 2, 10
	data, err := AppendBatch(nil, b)
	require.NoError(t, err)
	h, err := Validate(data)
	require.NoError(t, err)
	require.Equal(t, int32(4), h.LastOffsetDelta, "a cleaned batch keeps its last offset")
	require.Equal(t, int32(1), h.NumRecords)

	h.Attributes = h.Attributes.WithCodec(CodecZstd) | transactionalFlag
	empty := AppendEmptyBatch(nil, &h)
	e, err := Validate(empty)
	require.NoError(t, err)
	require.Len(t, empty, HeaderSize)
	require.Equal(t, BatchHeader{BaseOffset: 40, Length: HeaderSize - LogOverhead, PartitionLeaderEpoch: -1, Magic: 2, CRC: e.CRC,
		Attributes: transactionalFlag, LastOffsetDelta: 4, FirstTimestamp: -1, MaxTimestamp: 1000,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: 10, NumRecords: 0}, e)
	it, err := NewIterator(empty)
	require.NoError(t, err)
	require.False(t, it.Next())
	require.NoError(t, it.Err())
}
