package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var quietLogger = slog.New(slog.DiscardHandler)

// testBroker is a broker on 127.0.0.1 with its log directory in a temp dir.
type testBroker struct {
	*Broker
	t      *testing.T
	dir    string
	props  map[string]string
	logger *slog.Logger // quietLogger unless a test watches the log
	opts   Options      // Options beyond the logger
}

// startBroker starts a broker; overrides are Kafka keys and values.
func startBroker(t *testing.T, overrides ...string) *testBroker {
	t.Helper()
	props := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "kafka-logs"),
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		props[overrides[i]] = overrides[i+1]
	}
	tb := &testBroker{t: t, dir: props["log.dirs"], props: props, logger: quietLogger}
	tb.start()
	return tb
}

// startBrokerWith starts a broker with options and a logger of the test's.
func startBrokerWith(t *testing.T, opts Options, overrides ...string) *testBroker {
	t.Helper()
	props := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "kafka-logs"),
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		props[overrides[i]] = overrides[i+1]
	}
	logger := opts.Logger
	if logger == nil {
		logger = quietLogger
	}
	tb := &testBroker{t: t, dir: props["log.dirs"], props: props, logger: logger, opts: opts}
	tb.start()
	return tb
}

// levelCounter is a slog handler that counts records at or above a level,
// for tests that check what a broker logs.
type levelCounter struct {
	level slog.Level
	n     *atomic.Int64
	last  *atomic.Value // the last counted message
}

func newLevelCounter(level slog.Level) levelCounter {
	return levelCounter{level: level, n: new(atomic.Int64), last: new(atomic.Value)}
}

func (h levelCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	h.last.Store(r.Message)
	return nil
}
func (h levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h levelCounter) WithGroup(string) slog.Handler      { return h }

func (tb *testBroker) start() {
	tb.t.Helper()
	cfg, err := ParseConfig(tb.props, tb.logger)
	require.NoError(tb.t, err)
	opts := tb.opts
	opts.Logger = tb.logger
	b, err := New(cfg, opts)
	require.NoError(tb.t, err)
	require.NoError(tb.t, b.Start())
	tb.Broker = b
	tb.t.Cleanup(func() { tb.stop() })
}

// stop shuts the broker down cleanly; restart starts it again on the same
// log directory (and a new port).
func (tb *testBroker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(tb.t, tb.Shutdown(ctx))
}

func (tb *testBroker) restart() {
	tb.stop()
	tb.start()
}

func (tb *testBroker) addr() string { return tb.Addr().String() }

// client returns a franz-go client for the broker with default settings,
// apart from the options given.
func (tb *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr())}, opts...)...)
	require.NoError(tb.t, err)
	tb.t.Cleanup(cl.Close)
	return cl
}

// manualClient is a franz-go client that produces to the partition each
// record names (the default partitioner picks its own).
func (tb *testBroker) manualClient(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	return tb.client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// createTopic creates a topic through the protocol, as an admin client does.
func (tb *testBroker) createTopic(name string, partitions int32) {
	tb.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), tb.client())
	require.NoError(tb.t, err)
	require.Zero(tb.t, resp.Topics[0].ErrorCode, "create topic %s", name)
}

// rawConn is a bare TCP connection speaking the protocol by hand, for
// pipelining and bad input.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (tb *testBroker) dial() *rawConn {
	tb.t.Helper()
	c, err := net.Dial("tcp", tb.addr())
	require.NoError(tb.t, err)
	tb.t.Cleanup(func() { c.Close() })
	return &rawConn{t: tb.t, conn: c, r: bufio.NewReader(c)}
}

// send writes a request with kmsg's framing (size prefix and header v1/v2).
func (c *rawConn) send(req kmsg.Request, correlationID int32) {
	c.t.Helper()
	_, err := c.conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, correlationID))
	require.NoError(c.t, err)
}

// write sends raw bytes.
func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_, err := c.conn.Write(b)
	require.NoError(c.t, err)
}

// receive reads one response frame and returns its correlation id and the
// bytes after it.
func (c *rawConn) receive() (int32, []byte) {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	_, err := io.ReadFull(c.r, size[:])
	require.NoError(c.t, err)
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c.r, frame)
	require.NoError(c.t, err)
	return int32(binary.BigEndian.Uint32(frame)), frame[4:]
}

// closedByBroker waits until the broker closes the connection.
func (c *rawConn) closedByBroker() bool {
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, c.r)
	return err == nil // EOF: closed cleanly by the other side
}

// produceRecords produces n records to topic/partition with acks=all and
// waits for all of them.
func produceRecords(t *testing.T, cl *kgo.Client, topic string, partition int32, values ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

// consumeAll reads n records from the start of the given partitions.
func consumeAll(t *testing.T, tb *testBroker, topic string, partitions int32, n int) []*kgo.Record {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := tb.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(out), n)
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fetches.Records()...)
	}
	return out
}
