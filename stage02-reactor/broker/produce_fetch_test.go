package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

func batchOf(t *testing.T, values ...string) []byte {
	b := record.NewBatch(time.Now().UnixMilli())
	for i, v := range values {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	out, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

func TestProduceValidationFollowsKafkasLogValidator(t *testing.T) {
	good := func() []byte { return batchOf(t, "a", "b") }
	fixCRC := func(b []byte) []byte { binary.BigEndian.PutUint32(b[17:], record.Checksum(b)); return b }
	tests := []struct {
		name string
		in   []byte
		code int16
	}{
		{"valid", good(), 0},
		{"two batches", append(good(), good()...), kerr.InvalidRecord.Code},
		{"base offset not 0", func() []byte { b := good(); record.SetBaseOffset(b, 5); return b }(), kerr.InvalidRecord.Code},
		{"magic 1", func() []byte { b := good(); b[16] = 1; return b }(), kerr.InvalidRecord.Code},
		{"bad crc: left to the log's append", func() []byte { b := good(); b[70] ^= 1; return b }(), 0},
		{"truncated", good()[:40], kerr.CorruptMessage.Code},
		{"count disagrees with offsets", func() []byte { b := good(); b[60] = 3; return fixCRC(b) }(), kerr.InvalidRecord.Code},
		{"offset deltas out of order", func() []byte {
			b := record.NewBatch(0, record.Record{OffsetDelta: 1, Value: []byte("x")}, record.Record{OffsetDelta: 0, Value: []byte("y")})
			out, _ := record.AppendBatch(nil, b)
			return out
		}(), kerr.InvalidRecord.Code},
		{"control batch", func() []byte { b := good(); b[22] |= 0x20; return fixCRC(b) }(), kerr.InvalidRecord.Code},
		{"bigger than message.max.bytes", batchOf(t, string(make([]byte, 2000))), kerr.MessageTooLarge.Code},
		{"record count 0", withCount(t, good(), 0, -1), kerr.InvalidRecord.Code},
		{"record count -1", withCount(t, good(), -1, -2), kerr.InvalidRecord.Code},
		{"gzip", compressed(t, record.CodecGzip, 40), 0},
		{"snappy", compressed(t, record.CodecSnappy, 40), 0},
		{"lz4", compressed(t, record.CodecLZ4, 40), 0},
		{"zstd", compressed(t, record.CodecZstd, 40), 0},
		{"gzip of garbage", withRecords(t, record.CodecGzip, 3, []byte("not gzip at all, just text")), kerr.CorruptMessage.Code},
		{"zstd of garbage", withRecords(t, record.CodecZstd, 3, []byte("not zstd at all, just text")), kerr.CorruptMessage.Code},
		{"unknown codec 7", func() []byte { b := compressed(t, record.CodecGzip, 3); b[22] |= 7; return fixCRC(b) }(), kerr.CorruptMessage.Code},
		{"gzip claiming 2^31-1 records", withCount(t, compressed(t, record.CodecGzip, 3), math.MaxInt32, math.MaxInt32-1), kerr.InvalidRecord.Code},
		{"gzip holding fewer records than it claims", withCount(t, compressed(t, record.CodecGzip, 3), 5, 4), kerr.CorruptMessage.Code},
		{"zstd bomb: 64 MiB of zeros in one record", withRecords(t, record.CodecZstd, 1, zeroRecord(t, record.CodecZstd, 64<<20)), kerr.MessageTooLarge.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg, _, _ := validateBatch(tt.in, 1000, false, false)
			require.Equal(t, tt.code, code, msg)
		})
	}
}

// compressed returns a batch of n small records compressed with c.
func compressed(t *testing.T, c record.Codec, n int) []byte {
	t.Helper()
	b := record.NewBatch(0)
	for i := range n {
		b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("value %d", i))})
	}
	b.Attributes = b.Attributes.WithCodec(c)
	out, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	return out
}

// withRecords builds a batch by hand: a header saying codec c and count
// records, then body as the (supposedly compressed) records.
func withRecords(t *testing.T, c record.Codec, count int32, body []byte) []byte {
	t.Helper()
	b := withCount(t, compressed(t, c, 1)[:record.HeaderSize], count, count-1)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LogOverhead))
	binary.BigEndian.PutUint32(b[17:], record.Checksum(b))
	return b
}

// zeroRecord is one record whose value is n zero bytes, encoded and
// compressed with c: a few kilobytes that inflate to n.
func zeroRecord(t *testing.T, c record.Codec, n int) []byte {
	r := record.Record{Value: make([]byte, n)}
	out, err := record.AppendCompressed(nil, r.AppendTo(nil), c)
	require.NoError(t, err)
	return out
}

// withCount sets a batch's recordsCount and lastOffsetDelta, CRC fixed.
func withCount(t *testing.T, b []byte, count, lastOffsetDelta int32) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	binary.BigEndian.PutUint32(b[23:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint32(b[17:], record.Checksum(b))
	return b
}

func TestProduceErrorsAreKafkaCodes(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("t", 1)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, produceRaw(t, tb, "t", 7, batchOf(t, "x")).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, produceRaw(t, tb, "nope", 0, batchOf(t, "x")).ErrorCode)

	// Over a raw connection: a client library would not send acks=2.
	c := tb.dial()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = 2
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batchOf(t, "x")}}}}
	c.send(req, 1)
	_, body := c.receive()
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	require.NoError(t, resp.ReadFrom(body))
	require.Equal(t, kerr.InvalidRequiredAcks.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

// TestABatchLargerThanASegmentIsRecordListTooLarge: a batch within
// message.max.bytes but larger than the topic's segment.bytes can never fit
// in a segment. Kafka's UnifiedLog.append refuses it with
// RecordBatchTooLargeException, RECORD_LIST_TOO_LARGE (18), which a
// producer does not retry; MESSAGE_TOO_LARGE (10) is for batches over
// message.max.bytes. Nothing is appended, and the broker does not log an
// error (the client's fault, not the broker's).
func TestABatchLargerThanASegmentIsRecordListTooLarge(t *testing.T) {
	errors := newLevelCounter(slog.LevelError)
	tb := startBrokerWith(t, Options{Logger: slog.New(errors)})
	resp, err := createTopicsRequest("small-segments", 1, 1, map[string]string{"segment.bytes": "1024"}).RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)

	cl := tb.client(kgo.DefaultProduceTopic("small-segments"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	err = cl.ProduceSync(context.Background(), &kgo.Record{Value: make([]byte, 2000)}).FirstErr()
	require.ErrorIs(t, err, kerr.RecordListTooLarge)
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("fits")}).FirstErr())
	p, _ := tb.Store().Partition("small-segments", 0)
	require.Equal(t, int64(1), p.Log.EndOffset(), "only the record that fits")
	require.Zero(t, errors.n.Load(), "logged as an error: %v", errors.last.Load())
}

func TestAcksZeroGetsNoResponseAndAnErrorClosesTheConnection(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fire-and-forget", 1)
	c := tb.dial()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = 0
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "fire-and-forget", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batchOf(t, "x")}}}}
	c.send(req, 1)
	c.send(kmsg.NewPtrApiVersionsRequest(), 2)
	id, _ := c.receive()
	require.Equal(t, int32(2), id, "the acks=0 produce had no response; the next request was served")
	p, _ := tb.Store().Partition("fire-and-forget", 0)
	require.Equal(t, int64(1), p.Log.EndOffset())

	req.Topics[0].Partitions[0].Partition = 9 // unknown partition
	c.send(req, 3)
	require.True(t, c.closedByBroker(), "with acks=0 an error can only be signalled by closing")
}

func TestFetchLongPollAnswersWhenDataArrives(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("poll", 1)
	c := tb.dial()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis = 60_000 // far longer than the test's deadline
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "poll", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	c.send(req, 5)

	// The fetch is now waiting in the broker. Produce:
	produceRecords(t, tb.client(), "poll", 0, "wake up")

	id, body := c.receive() // receive fails after 10 s, well before the 60 s max wait
	require.Equal(t, int32(5), id)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	require.NoError(t, resp.ReadFrom(body))
	p := resp.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	require.Equal(t, int64(1), p.HighWatermark)
	h, err := record.Validate(p.RecordBatches)
	require.NoError(t, err)
	require.Equal(t, int32(1), h.NumRecords)
}

func TestFetchLongPollTimesOutEmpty(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("quiet", 1)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 50
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "quiet", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	resp, err := fetchByName(context.Background(), tb.client(), req)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	require.Empty(t, resp.Topics[0].Partitions[0].RecordBatches)
}

func TestFetchOutOfRangeAndUnknownPartition(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("r", 1)
	produceRecords(t, tb.client(), "r", 0, "a", "b")
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 10, 1<<20
	other := kmsg.NewFetchRequestTopicPartition()
	other.Partition = 4
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "r", Partitions: []kmsg.FetchRequestTopicPartition{fp, other}}}
	resp, err := fetchByName(context.Background(), tb.client(), req)
	require.NoError(t, err)
	require.Equal(t, kerr.OffsetOutOfRange.Code, resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(2), resp.Topics[0].Partitions[0].HighWatermark)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].Partitions[1].ErrorCode)
}

func TestListOffsetsEarliestLatestAndByTimestamp(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("times", 1)
	cl := tb.client()
	base := time.Now().Add(-time.Hour)
	for i := range 10 {
		r := &kgo.Record{Topic: "times", Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Minute)}
		require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr())
	}
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "times", Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		return resp.Topics[0].Partitions[0]
	}
	require.Equal(t, int64(0), list(-2).Offset)
	require.Equal(t, int64(10), list(-1).Offset)
	at := list(base.Add(4*time.Minute + time.Second).UnixMilli())
	require.Equal(t, int64(5), at.Offset, "the first record at or after the time")
	require.Equal(t, base.Add(5*time.Minute).UnixMilli(), at.Timestamp)
	require.Equal(t, int64(-1), list(time.Now().Add(time.Hour).UnixMilli()).Offset, "nothing that new")
}

// TestMaxTimestampOffsetIsTheNewestRecordWhateverTheProducerWrote: kadm
// (franz-go's admin client, which reported it) lists the max-timestamp
// offset (ListOffsets v7+, timestamp -3, KIP-734) of partitions holding
// one batch of 10 records whose timestamps grow, the largest at offset 9,
// but whose header's max timestamp is not theirs: the 6th record's (too
// small), or one far in the future. Kafka's LogValidator writes the
// records' max into the header before the append; the broker now does
// too, so both answer offset 9 with its timestamp. Before, they answered
// offset 5 (the first record reaching the header's max) and no offset at
// all. A partition whose records 5 to 9 share the largest timestamp
// answers 5, the first of equals, as Kafka 3.8 and later do
// (KAFKA-16310); Kafka 3.0 to 3.7 answered the batch's last offset, 9,
// which kadm's documentation describes.
func TestMaxTimestampOffsetIsTheNewestRecordWhateverTheProducerWrote(t *testing.T) {
	tb := startBroker(t)
	base := time.Now().Add(-time.Hour).UnixMilli()
	batch := func(tsOf func(i int64) int64, header func(h *record.BatchHeader)) []byte {
		b := record.NewBatch(tsOf(0))
		for i := range int64(10) {
			b.Records = append(b.Records, record.Record{OffsetDelta: int32(i), TimestampDelta: tsOf(i) - tsOf(0), Value: []byte("v")})
		}
		out, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		h, err := record.Validate(out)
		require.NoError(t, err)
		header(&h)
		record.PutHeader(out, &h) // the CRC follows the header, as a client would compute it
		return out
	}
	growing := func(i int64) int64 { return base + i*1000 }
	partitions := []struct {
		topic      string
		records    []byte
		wantOffset int64
		wantTime   int64
	}{
		{"header-says-the-sixth", batch(growing, func(h *record.BatchHeader) { h.MaxTimestamp = growing(5) }), 9, growing(9)},
		{"header-says-the-future", batch(growing, func(h *record.BatchHeader) { h.MaxTimestamp = growing(1_000_000) }), 9, growing(9)},
		{"header-is-right", batch(growing, func(*record.BatchHeader) {}), 9, growing(9)},
		{"five-equal-newest", batch(func(i int64) int64 { return growing(min(i, 5)) }, func(*record.BatchHeader) {}), 5, growing(5)},
	}
	for _, tt := range partitions {
		tb.createTopic(tt.topic, 1)
		require.Zero(t, produceRaw(t, tb, tt.topic, 0, tt.records).ErrorCode, tt.topic)
	}
	adm := kadm.NewClient(tb.client())
	listed, err := adm.ListMaxTimestampOffsets(context.Background())
	require.NoError(t, err)
	for _, tt := range partitions {
		got, ok := listed.Lookup(tt.topic, 0)
		require.True(t, ok, tt.topic)
		require.NoError(t, got.Err, tt.topic)
		require.Equal(t, []int64{tt.wantOffset, tt.wantTime}, []int64{got.Offset, got.Timestamp}, tt.topic)
	}

	// By time too: the first record at or after the 7th's timestamp is
	// the 7th, not none (the header said the batch ends at the 6th).
	byTime, err := adm.ListOffsetsAfterMilli(context.Background(), growing(6), "header-says-the-sixth")
	require.NoError(t, err)
	got, _ := byTime.Lookup("header-says-the-sixth", 0)
	require.Equal(t, int64(6), got.Offset)

	// A damaged batch is not made whole by the new header and CRC.
	damaged := batch(growing, func(h *record.BatchHeader) { h.MaxTimestamp = growing(5) })
	damaged[len(damaged)-1] ^= 0xff
	require.Equal(t, kerr.CorruptMessage.Code, produceRaw(t, tb, "header-is-right", 0, damaged).ErrorCode)
}

// TestListOffsetsMaxTimestampAndTheTieredOnes: records produced with
// timestamps out of order; v7's -3 answers the record with the largest
// timestamp (the first of two), not the last record; v8's -4 is the log
// start without tiered storage, v9's -5 no offset at all.
func TestListOffsetsMaxTimestampAndTheTieredOnes(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("max", 1)
	cl := tb.client()
	base := time.Now().Add(-time.Hour)
	for _, minutes := range []int{3, 9, 1, 9, 2} {
		r := &kgo.Record{Topic: "max", Value: []byte("v"), Timestamp: base.Add(time.Duration(minutes) * time.Minute)}
		require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr())
	}
	list := func(version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "max", Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
		c := tb.dial() // a raw connection keeps the version asked for
		c.send(req, 1)
		_, body := c.receive()
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.SetVersion(version)
		require.NoError(t, resp.ReadFrom(body[1:]), "after the flexible header's empty tags")
		return resp.Topics[0].Partitions[0]
	}
	got := list(7, MaxTimestamp)
	require.Zero(t, got.ErrorCode)
	require.Equal(t, []int64{1, base.Add(9 * time.Minute).UnixMilli()}, []int64{got.Offset, got.Timestamp})
	require.Equal(t, int32(0), got.LeaderEpoch)
	require.Equal(t, kerr.UnsupportedVersion.Code, list(6, MaxTimestamp).ErrorCode, "-3 needs v7")

	got = list(8, EarliestLocalTimestamp)
	require.Zero(t, got.ErrorCode)
	require.Equal(t, int64(0), got.Offset)
	require.Equal(t, kerr.UnsupportedVersion.Code, list(7, EarliestLocalTimestamp).ErrorCode, "-4 needs v8")

	got = list(9, LatestTieredTimestamp)
	require.Zero(t, got.ErrorCode)
	require.Equal(t, []int64{-1, -1}, []int64{got.Offset, got.Timestamp})
	require.Equal(t, int32(-1), got.LeaderEpoch)
	require.Equal(t, kerr.UnsupportedVersion.Code, list(9, -6).ErrorCode, "no version knows -6")
}
