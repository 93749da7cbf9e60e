package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// steadyProducer produces to topic in the background, one record at a
// time, and counts acknowledgements; any error fails the test.
type steadyProducer struct {
	acked atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func startSteadyProducer(t *testing.T, tb *testBroker, topic string) *steadyProducer {
	sp := &steadyProducer{stop: make(chan struct{}), done: make(chan struct{})}
	cl := tb.client(kgo.DefaultProduceTopic(topic))
	go func() {
		defer close(sp.done)
		for i := 0; ; i++ {
			select {
			case <-sp.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("the undisturbed producer failed: %v", err)
				return
			}
			sp.acked.Add(1)
		}
	}()
	t.Cleanup(func() { close(sp.stop); <-sp.done })
	return sp
}

// keepsGoingWithin waits at most d for n more acknowledged records.
func (sp *steadyProducer) keepsGoingWithin(t *testing.T, n int64, d time.Duration) {
	t.Helper()
	target := sp.acked.Load() + n
	require.Eventually(t, func() bool { return sp.acked.Load() >= target }, d, time.Millisecond,
		"the other client's produce requests stalled")
}

// keepsGoing waits until the producer has had n more records acknowledged.
func (sp *steadyProducer) keepsGoing(t *testing.T, n int64) {
	t.Helper()
	target := sp.acked.Load() + n
	require.Eventually(t, func() bool { return sp.acked.Load() >= target }, 10*time.Second, time.Millisecond,
		"the other client's produce requests stalled")
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	tb := startBroker(t, "socket.request.max.bytes", "1048576")
	tb.createTopic("steady", 1)
	sp := startSteadyProducer(t, tb, "steady")
	sp.keepsGoing(t, 10)

	metadata := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)
	unknownKey := append([]byte(nil), metadata...)
	binary.BigEndian.PutUint16(unknownKey[4:], 999)
	produceV1 := append([]byte(nil), metadata...)
	binary.BigEndian.PutUint16(produceV1[4:], 0) // Produce
	binary.BigEndian.PutUint16(produceV1[6:], 1) // v1: older than we serve

	cases := map[string][]byte{
		"garbage bytes":                 []byte("GET / HTTP/1.1\r\nHost: kafka\r\n\r\n"),
		"negative size prefix":          {0xff, 0xff, 0xff, 0xf0, 1, 2, 3},
		"size prefix over the max":      {0x10, 0x00, 0x00, 0x00},
		"unknown api key":               unknownKey,
		"unsupported produce version":   produceV1,
		"header cut short":              {0, 0, 0, 3, 0, 3, 0},
		"body that does not decode":     {0, 0, 0, 12, 0, 3, 0, 9, 0, 0, 0, 1, 0, 0, 0x7f, 0xff},
		"client id longer than request": {0, 0, 0, 10, 0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			c := tb.dial()
			c.write(bad)
			require.True(t, c.closedByBroker(), "the broker closes the connection")
			sp.keepsGoing(t, 5)
		})
	}

	t.Run("frame cut mid-way then closed", func(t *testing.T) {
		c := tb.dial()
		c.write(metadata[:len(metadata)/2])
		c.conn.Close()
		sp.keepsGoing(t, 5)
	})
}

func TestCorruptProduceBatchIsRefusedAndNothingAppended(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("checked", 1)
	sp := startSteadyProducer(t, tb, "checked")
	sp.keepsGoing(t, 5)

	bad, err := record.AppendBatch(nil, record.NewBatch(time.Now().UnixMilli(), record.Record{Value: []byte("tampered")}))
	require.NoError(t, err)
	bad[len(bad)-3] ^= 0x20 // inside the value: the CRC no longer matches

	p, _ := tb.Store().Partition("checked", 0)
	before := p.Log.Size()
	resp := produceRaw(t, tb, "checked", 0, bad)
	require.Equal(t, kerr.CorruptMessage.Code, resp.ErrorCode)
	require.Contains(t, *resp.ErrorMessage, "crc")

	sp.keepsGoing(t, 5)
	// Everything in the log is the steady producer's; it all validates.
	r, err := p.Log.Read(0, 1<<30)
	require.NoError(t, err)
	data, err := r.Bytes()
	require.NoError(t, err)
	for len(data) > 0 {
		h, err := record.Validate(data)
		require.NoError(t, err)
		data = data[h.Size():]
	}
	require.Greater(t, p.Log.Size(), before)
}

func TestAClientThatNeverReadsDoesNotSlowOthers(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("big", 1)
	cl := tb.client()
	big := make([]byte, 512<<10)
	for range 8 {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "big", Value: big}).FirstErr())
	}
	sp := startSteadyProducer(t, tb, "big")

	// A client pipelines fetches of 4 MiB responses and never reads them:
	// its socket buffers fill, its Processor waits to write, and its
	// connection stays muted. Other connections on the same Processor
	// keep being served.
	for range 3 {
		c := tb.dial()
		var frames []byte
		f := kmsg.NewRequestFormatter()
		for i := range 20 {
			req := kmsg.NewPtrFetchRequest()
			req.SetVersion(11)
			req.MaxBytes = 8 << 20
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 8 << 20
			req.Topics = []kmsg.FetchRequestTopic{{Topic: "big", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
			frames = append(frames, f.AppendRequest(nil, req, int32(i))...)
		}
		c.write(frames)
	}
	sp.keepsGoing(t, 50)
}

// produceRaw sends one acks=1 Produce with the given records bytes and
// returns the partition's response.
func produceRaw(t *testing.T, tb *testBroker, topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: records}}}}
	resp, err := req.RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0]
}

// TestABadCRCIsCountedNotLoggedAsAnError: a client's damaged batch is the
// client's problem. It gets CORRUPT_MESSAGE, is counted (Kafka's
// InvalidMessageCrcRecordsPerSec), and does not write an ERROR line: a
// client sending them in a loop must not flood the broker's log.
func TestABadCRCIsCountedNotLoggedAsAnError(t *testing.T) {
	errors := newLevelCounter(slog.LevelError)
	tb := startBrokerWith(t, Options{Logger: slog.New(errors)})
	tb.createTopic("crc", 1)
	bad := batchOf(t, "a", "b")
	bad[len(bad)-1] ^= 0xff
	for range 100 {
		require.Equal(t, kerr.CorruptMessage.Code, produceRaw(t, tb, "crc", 0, bad).ErrorCode)
	}
	require.Equal(t, uint64(100), tb.Counters().InvalidMessageCRCRecords.Load())
	require.Equal(t, uint64(100), tb.Counters().FailedProduceRequests.Load())
	require.Zero(t, errors.n.Load(), "logged at ERROR: %v", errors.last.Load())
	p, _ := tb.Store().Partition("crc", 0)
	require.Zero(t, p.Log.EndOffset(), "nothing was appended")
}

// TestADamagedBatchIsCorruptMessageWhateverElseItBreaks: a bit flipped in
// transit that also breaks the record count is still a CRC failure, which
// producers retry, as in Kafka, which checks the CRC first.
func TestADamagedBatchIsCorruptMessageWhateverElseItBreaks(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("flip", 1)
	b := batchOf(t, "a", "b")
	b[60] ^= 0x01 // recordsCount 2 becomes 3: INVALID_RECORD, were the CRC not checked first
	require.Equal(t, kerr.CorruptMessage.Code, produceRaw(t, tb, "flip", 0, b).ErrorCode)
	require.Equal(t, uint64(1), tb.Counters().InvalidMessageCRCRecords.Load())
	require.Zero(t, tb.Counters().InvalidOffsetOrSequenceRecords.Load())
}
