package protocol

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// allVersions accepts every version kmsg knows.
func allVersions(key int16) (int16, int16, bool) {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return 0, 0, false
	}
	return 0, r.MaxVersion(), true
}

// frame encodes a request as a client does (header and body, no size
// prefix), with kmsg's own header writer as the oracle.
func frame(req kmsg.Request, correlationID int32, clientID *string) []byte {
	var opts []kmsg.RequestFormatterOpt
	if clientID != nil {
		opts = append(opts, kmsg.FormatterClientID(*clientID))
	}
	b := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, req, correlationID)
	return b[4:] // AppendRequest includes the size prefix
}

func TestParseRequestHeaderV1AndV2(t *testing.T) {
	id := "client-7"
	for _, v := range []int16{4, 9, 12} { // Metadata v9+ is flexible
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
		h, got, err := ParseRequest(frame(req, 42, &id), allVersions)
		require.NoError(t, err, "v%d", v)
		require.Equal(t, int16(3), h.APIKey)
		require.Equal(t, v, h.APIVersion)
		require.Equal(t, int32(42), h.CorrelationID)
		require.Equal(t, "client-7", *h.ClientID)
		require.Equal(t, v >= 9, h.Flexible)
		require.Equal(t, "orders", *got.(*kmsg.MetadataRequest).Topics[0].Topic)
	}
}

// TestParseRequestNeedsAWholeHeader: the error names the size the code
// checks, ten bytes (api_key, api_version, correlation_id, client id
// length), and a frame shorter than that is malformed however it starts.
func TestParseRequestNeedsAWholeHeader(t *testing.T) {
	whole := frame(kmsg.NewPtrApiVersionsRequest(), 1, nil)
	for n := range minHeaderSize {
		_, _, err := ParseRequest(whole[:n], allVersions)
		require.ErrorIs(t, err, ErrMalformed, "%d bytes", n)
		require.ErrorContains(t, err, "a header needs at least 10")
	}
}

func TestParseRequestNullClientID(t *testing.T) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(1)
	h, _, err := ParseRequest(frame(req, 1, nil), allVersions)
	require.NoError(t, err)
	require.Nil(t, h.ClientID)
}

func TestParseRequestRefusals(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	good := frame(req, 5, nil)
	only := func(key, min, max int16) Versions {
		return func(k int16) (int16, int16, bool) { return min, max, k == key }
	}

	h, _, err := ParseRequest(good, only(0, 3, 6))
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	require.Equal(t, int32(5), h.CorrelationID, "the header is returned so the caller can answer")

	_, _, err = ParseRequest(good, only(1, 0, 12))
	require.ErrorIs(t, err, ErrUnknownAPIKey)

	unknown := append([]byte{0x7f, 0x00}, good[2:]...)
	_, _, err = ParseRequest(unknown, allVersions)
	require.ErrorIs(t, err, ErrUnknownAPIKey)

	for name, b := range map[string][]byte{
		"short":              good[:7],
		"client id too long": append(append([]byte(nil), good[:8]...), 0x00, 0x40, 'x'),
		"body cut":           good[:len(good)-3],
	} {
		_, _, err := ParseRequest(b, allVersions)
		require.ErrorIs(t, err, ErrMalformed, name)
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	// Metadata v9 is flexible: header v1 with an empty tag section.
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	out := AppendResponse(nil, Header{APIKey: 3, APIVersion: 9, CorrelationID: 77, Flexible: true}, resp)
	require.Equal(t, uint32(len(out)-4), binary.BigEndian.Uint32(out))
	require.Equal(t, uint32(77), binary.BigEndian.Uint32(out[4:]))
	require.Equal(t, byte(0), out[8], "empty tagged fields")
	got := kmsg.NewPtrMetadataResponse()
	got.SetVersion(9)
	require.NoError(t, got.ReadFrom(out[9:]))

	// ApiVersions v3 is flexible too, but its response header stays v0.
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	av.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}
	out = AppendResponse(nil, Header{APIKey: 18, APIVersion: 3, CorrelationID: 1, Flexible: true}, av)
	gotAV := kmsg.NewPtrApiVersionsResponse()
	gotAV.SetVersion(3)
	require.NoError(t, gotAV.ReadFrom(out[8:]), "the body starts right after the correlation id")
	require.Equal(t, av.ApiKeys, gotAV.ApiKeys)
}

// flatten reads every send into one buffer, as the socket would receive it.
func flatten(t *testing.T, sends []network.Send) []byte {
	var out []byte
	for _, s := range sends {
		if s.File == nil {
			out = append(out, s.Bytes...)
			continue
		}
		b := make([]byte, s.Len)
		_, err := io.ReadFull(io.NewSectionReader(s.File, s.Pos, s.Len), b)
		require.NoError(t, err)
		out = append(out, b...)
	}
	return out
}

func TestFetchResponseSendsDecodeWithKmsgAtEveryVersion(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "segment.log"))
	require.NoError(t, err)
	defer f.Close()
	fileData := []byte("....RECORDS-FROM-THE-LOG-FILE....")
	_, err = f.Write(fileData)
	require.NoError(t, err)

	resp := &FetchResponse{
		ThrottleMillis: 3,
		SessionID:      0,
		Topics: []FetchTopic{
			{Topic: "orders", TopicID: [16]byte{1, 2, 3}, Partitions: []FetchPartition{
				{Partition: 0, HighWatermark: 100, LastStableOffset: 90, LogStartOffset: 7, PreferredReadReplica: -1,
					AbortedTransactions: []AbortedTxn{{ProducerID: 11, FirstOffset: 40}, {ProducerID: 12, FirstOffset: 55}},
					Records:             network.FileSend(f, 4, 25)},
				{Partition: 1, ErrorCode: 1, HighWatermark: 5, LastStableOffset: 5, LogStartOffset: 0, PreferredReadReplica: -1},
			}},
			{Topic: "payments", Partitions: []FetchPartition{
				{Partition: 2, HighWatermark: 9, LastStableOffset: 9, PreferredReadReplica: -1,
					Records: network.BytesSend([]byte("inline-bytes"))},
			}},
		},
	}
	for v := int16(FetchMinVersion); v <= FetchMaxVersion; v++ {
		sends, err := FetchResponseSends(Header{APIKey: 1, APIVersion: v, CorrelationID: 99}, resp)
		require.NoError(t, err)
		wire := flatten(t, sends)
		require.Equal(t, uint32(len(wire)-4), binary.BigEndian.Uint32(wire), "v%d size prefix", v)
		require.Equal(t, uint32(99), binary.BigEndian.Uint32(wire[4:]))
		body := wire[8:]
		if v >= 12 {
			require.Equal(t, byte(0), body[0], "v12 response header v1: empty tags")
			body = body[1:]
		}
		got := kmsg.NewPtrFetchResponse()
		got.SetVersion(v)
		require.NoError(t, got.ReadFrom(body), "v%d", v)
		require.Equal(t, int32(3), got.ThrottleMillis)
		require.Len(t, got.Topics, 2)
		p0 := got.Topics[0].Partitions[0]
		if v >= 13 { // topics by id (KIP-516)
			require.Equal(t, [16]byte{1, 2, 3}, got.Topics[0].TopicID)
			require.Empty(t, got.Topics[0].Topic)
		} else {
			require.Equal(t, "orders", got.Topics[0].Topic)
		}
		require.Equal(t, int64(100), p0.HighWatermark)
		require.Equal(t, int64(90), p0.LastStableOffset)
		require.Equal(t, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 11, FirstOffset: 40}, {ProducerID: 12, FirstOffset: 55}},
			p0.AbortedTransactions, "v%d", v)
		require.Equal(t, []byte("RECORDS-FROM-THE-LOG-FILE"), p0.RecordBatches, "v%d: the file region is the records", v)
		if v >= 5 {
			require.Equal(t, int64(7), p0.LogStartOffset)
		}
		if v >= 11 {
			require.Equal(t, int32(-1), p0.PreferredReadReplica)
		}
		p1 := got.Topics[0].Partitions[1]
		require.Equal(t, int16(1), p1.ErrorCode)
		require.Empty(t, p1.RecordBatches)
		require.Equal(t, []byte("inline-bytes"), got.Topics[1].Partitions[0].RecordBatches)
	}
}

func TestFetchResponseOver2GiBIsRefused(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "seg")
	require.NoError(t, err)
	defer f.Close()
	parts := []FetchPartition{{Records: network.FileSend(f, 0, 1<<30)}, {Records: network.FileSend(f, 0, 1<<30)}}
	_, err = FetchResponseSends(Header{APIKey: 1, APIVersion: 11}, &FetchResponse{Topics: []FetchTopic{{Topic: "t", Partitions: parts}}})
	require.ErrorIs(t, err, ErrResponseTooLarge, "the size prefix would wrap")
}

func TestFetchResponseSendsKeepsRegionsAsRegions(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "seg")
	require.NoError(t, err)
	defer f.Close()
	sends, err := FetchResponseSends(Header{APIKey: 1, APIVersion: 11}, &FetchResponse{Topics: []FetchTopic{{Topic: "t",
		Partitions: []FetchPartition{{Records: network.FileSend(f, 0, 1000)}, {Records: network.FileSend(f, 1000, 500)}}}}})
	require.NoError(t, err)
	var files int
	for _, s := range sends {
		if s.File != nil {
			files++
		}
	}
	require.Equal(t, 2, files, "records are never copied into the response")
	require.Len(t, sends, 4, "bytes, region, bytes, region: v11 has nothing after the last records")
}
