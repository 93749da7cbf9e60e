package broker

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startBrokerRegistering starts a broker with register(b) called before
// Start, as a later stage registers its handlers.
func startBrokerRegistering(t *testing.T, logger *slog.Logger, register func(b *Broker)) *testBroker {
	t.Helper()
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}, logger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: logger})
	require.NoError(t, err)
	register(b)
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t, logger: logger}
	t.Cleanup(tb.stop)
	return tb
}

// heldAppender appends to the store but holds each acks=all request's
// answer, as a replicating broker waits for its followers, until the test
// hands it to another goroutine.
type heldAppender struct {
	StoreAppender
	calls atomic.Int64
	held  chan heldProduce
}

// heldProduce is an appended acks=all request whose done is not called yet.
type heldProduce struct {
	parts []ProducePartition
	done  func()
}

func (a *heldAppender) AppendRecords(r *Request, acks int16, timeout time.Duration, parts []ProducePartition, done func()) {
	a.calls.Add(1)
	if acks != -1 {
		a.StoreAppender.AppendRecords(r, acks, timeout, parts, done)
		return
	}
	a.StoreAppender.AppendRecords(r, acks, timeout, parts, func() { a.held <- heldProduce{parts, done} })
}

// TestAnAppenderAnswersAcksAllLaterFromAnotherGoroutine: the Produce handler
// answers when its Appender calls done, not when AppendRecords returns; an
// appender may fill the response entries until then, from any goroutine,
// and the request is answered once. An invalid acks never reaches it.
func TestAnAppenderAnswersAcksAllLaterFromAnotherGoroutine(t *testing.T) {
	errors := newLevelCounter(slog.LevelError)
	a := &heldAppender{held: make(chan heldProduce, 1)}
	tb := startBrokerRegistering(t, slog.New(errors), func(b *Broker) {
		a.StoreAppender = StoreAppender{b}
		b.Register(ProduceAPI(a))
	})
	tb.createTopic("held", 1)

	c := tb.dial()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "held", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batchOf(t, "x")}}}}
	c.send(req, 1)
	c.send(kmsg.NewPtrApiVersionsRequest(), 2) // pipelined behind the produce

	var h heldProduce
	select {
	case h = <-a.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the acks=all produce never reached the appender")
	}
	p, _ := tb.Store().Partition("held", 0)
	require.Equal(t, int64(1), p.Log.EndOffset(), "appended before AppendRecords returned; only the answer waits")

	// Another goroutine settles the entry (the followers were too slow) and
	// calls done: the answer must carry what it wrote.
	go func() {
		msg := "not replicated in time"
		h.parts[0].Response.ErrorCode, h.parts[0].Response.ErrorMessage = kerr.RequestTimedOut.Code, &msg
		h.done()
	}()
	sp := c.produceAnswer(1) // before the request pipelined behind it
	require.Equal(t, kerr.RequestTimedOut.Code, sp.ErrorCode, "the answer carries what the appender wrote before done")
	require.Equal(t, int64(0), sp.BaseOffset)
	id, _ := c.receive()
	require.Equal(t, int32(2), id)

	// acks=1 through the same appender is answered at once; acks=2 is
	// refused by the handler without asking the appender.
	req.Acks = 1
	c.send(req, 3)
	sp = c.produceAnswer(3)
	require.Zero(t, sp.ErrorCode)
	require.Equal(t, int64(1), sp.BaseOffset)
	calls := a.calls.Load()
	req.Acks = 2
	c.send(req, 4)
	require.Equal(t, kerr.InvalidRequiredAcks.Code, c.produceAnswer(4).ErrorCode)
	require.Equal(t, calls, a.calls.Load(), "an invalid acks appends nothing")
	require.Equal(t, int64(2), p.Log.EndOffset())
	require.Zero(t, errors.n.Load(), "each request answered once (a second Respond is logged as an error): %v", errors.last.Load())
}

// produceAnswer reads the answer to a v7 produce of one partition, which
// must be the next response and carry correlation id id.
func (c *rawConn) produceAnswer(id int32) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	got, body := c.receive()
	require.Equal(c.t, id, got)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	require.NoError(c.t, resp.ReadFrom(body))
	return resp.Topics[0].Partitions[0]
}

// fixedOffsets answers every partition with one offset, and counts what it
// is asked.
type fixedOffsets struct{ asked atomic.Int64 }

func (s *fixedOffsets) ListOffset(_ int32, _ string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	s.asked.Add(1)
	out.Offset, out.LeaderEpoch = 42+int64(rp.Partition), 7
}

// TestListOffsetsAnswersEachPartitionFromItsSource: the handler builds the
// response and asks its OffsetSource for each partition, except for
// special timestamps the request's version does not know (-3 before v7),
// which it refuses.
func TestListOffsetsAnswersEachPartitionFromItsSource(t *testing.T) {
	src := &fixedOffsets{}
	tb := startBrokerRegistering(t, quietLogger, func(b *Broker) { b.Register(ListOffsetsAPI(src)) })
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	for i, ts := range []int64{LatestTimestamp, EarliestTimestamp, 1000, -3} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(i), ts
		req.Topics = append(req.Topics, kmsg.ListOffsetsRequestTopic{Topic: "anything", Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}})
	}
	// Over a raw connection: a client would send each partition to its
	// leader, and these topics have none.
	c := tb.dial()
	c.send(req, 1)
	_, body := c.receive()
	resp := kmsg.NewPtrListOffsetsResponse()
	resp.SetVersion(5)
	require.NoError(t, resp.ReadFrom(body))
	require.Len(t, resp.Topics, 4)
	for i, rt := range resp.Topics[:3] {
		sp := rt.Partitions[0]
		require.Zero(t, sp.ErrorCode)
		require.Equal(t, 42+int64(i), sp.Offset)
		require.Equal(t, int32(7), sp.LeaderEpoch)
		require.Equal(t, int64(-1), sp.Timestamp, "left as the handler set it")
	}
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.Topics[3].Partitions[0].ErrorCode)
	require.Equal(t, int64(3), src.asked.Load())
}
