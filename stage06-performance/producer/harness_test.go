package producer_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// testLogger is quiet unless WORKBOOK_LOG=1.
func testLogger() *slog.Logger {
	if os.Getenv("WORKBOOK_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startBroker starts a stage 02 broker (one node, RF1) on 127.0.0.1 and
// returns its address.
func startBroker(t testing.TB, props ...string) string {
	t.Helper()
	kv := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "logs"),
	}
	for i := 0; i+1 < len(props); i += 2 {
		kv[props[i]] = props[i+1]
	}
	cfg, err := broker.ParseConfig(kv, testLogger())
	require.NoError(t, err)
	b, err := broker.New(cfg, broker.Options{Logger: testLogger()})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b.Addr().String()
}

// createTopic creates a topic through the brokers at addrs.
func createTopic(t testing.TB, addrs []string, topic string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addrs[0], wire.Options{})
	require.NoError(t, err)
	defer c.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, rf
	req.Topics = append(req.Topics, ct)
	req.TimeoutMillis = 10_000
	resp, err := c.Request(ctx, req)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode))
}

// newProducer starts a producer on addrs with Kafka keys over short test
// timeouts; it is closed at the end of the test.
func newProducer(t testing.TB, addrs []string, props ...string) *producer.Producer {
	t.Helper()
	kv := map[string]string{"bootstrap.servers": joinAddrs(addrs), "retry.backoff.ms": "20"}
	for i := 0; i+1 < len(props); i += 2 {
		kv[props[i]] = props[i+1]
	}
	cfg, err := producer.ParseConfig(kv)
	require.NoError(t, err)
	p, err := producer.New(cfg, producer.Options{Logger: testLogger()})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

func joinAddrs(addrs []string) string {
	s := ""
	for i, a := range addrs {
		if i > 0 {
			s += ","
		}
		s += a
	}
	return s
}

// acks collects callbacks: each record's result, once.
type acks struct {
	mu      sync.Mutex
	got     map[string]ack // by value
	twice   []string       // values whose callback ran more than once
	failed  []error
	changed chan struct{}
}

type ack struct {
	partition int32
	offset    int64
}

func newAcks() *acks { return &acks{got: map[string]ack{}, changed: make(chan struct{}, 1)} }

// callback is the one callback every record of a test shares: no closure
// per record.
func (a *acks) callback(r *producer.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failed = append(a.failed, fmt.Errorf("%s: %w", r.Value, err))
	} else {
		if _, ok := a.got[string(r.Value)]; ok {
			a.twice = append(a.twice, string(r.Value))
		}
		a.got[string(r.Value)] = ack{r.Partition, r.Offset}
	}
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// count is the number of records acknowledged or failed.
func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got) + len(a.failed)
}

func (a *acks) snapshot() (map[string]ack, []error, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.got), append([]error(nil), a.failed...), append([]string(nil), a.twice...)
}

// waitFor waits until n callbacks have run.
func (a *acks) waitFor(t testing.TB, n int, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return a.count() >= n }, within, 5*time.Millisecond,
		"%d of %d callbacks", a.count(), n)
}

// consumed is one record read back.
type consumed struct {
	partition int32
	offset    int64
	key       string
	value     string
	codec     uint8
}

// readAll reads every partition of topic from its start to its end offset
// (as ListOffsets answers it now) with franz-go's consumer.
func readAll(t testing.TB, addrs []string, topic string) []consumed {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	offsets := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition → end offset not yet reached
	ends.Each(func(o kadm.ListedOffset) {
		offsets[o.Partition] = kgo.NewOffset().AtStart()
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})
	var out []consumed
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d records; partitions not read to their end: %v", len(out), left)
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, consumed{r.Partition, r.Offset, string(r.Key), string(r.Value), r.Attrs.CompressionType()})
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// storedBatches fetches a partition's raw log from the broker at addr and
// returns its batch headers: what the producer's batches became on disk.
func storedBatches(t testing.TB, addr, topic string, partition int32) []record.BatchHeader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, wire.Options{})
	require.NoError(t, err)
	defer c.Close()
	var out []record.BatchHeader
	offset := int64(0)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 16<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 16<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.Request(ctx, protocol.CapVersion(req, 12)) // by name: before topic ids
		require.NoError(t, err)
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
		data := p.RecordBatches
		before := len(out)
		for len(data) >= record.HeaderSize {
			h, err := record.Validate(data)
			if err != nil {
				break // a partial batch at the end of the response
			}
			out = append(out, h)
			data = data[h.Size():]
			offset = h.NextOffset()
		}
		if len(out) == before || offset >= p.HighWatermark {
			return out
		}
	}
}

// startGatedBroker starts a stage 02 broker that advertises a
// brokerProxy's address, so that every client connection goes through the
// proxy, whose Hold keeps the broker's answers from the clients.
func startGatedBroker(t testing.TB) (*brokerProxy, string) {
	t.Helper()
	x := listenProxy(t, map[string]string{})
	x.target = startBroker(t, "advertised.listeners", "PLAINTEXT://"+x.ln.Addr().String())
	go x.accept()
	return x, x.ln.Addr().String()
}

// requireOnceInOrder checks an idempotent producer's run: each of the sent
// records acknowledged once and none failed; and of the records read back,
// those whose value starts with prefix (then a counter) are each there
// once, where their callback said, in produce order per partition. It
// returns how many were acknowledged.
func requireOnceInOrder(t testing.TB, a *acks, sent int, read []consumed, prefix string) int {
	t.Helper()
	got, failed, twice := a.snapshot()
	require.Empty(t, failed, "an idempotent producer retries until acknowledged")
	require.Empty(t, twice, "each callback runs once")
	require.Equal(t, sent, len(got))
	seen := map[string]bool{}
	last := map[int32]int{}
	for _, r := range read {
		if !strings.HasPrefix(r.value, prefix) || len(r.value) == len(prefix) {
			continue // another run's records
		}
		require.False(t, seen[r.value], "record %s read twice", r.value)
		seen[r.value] = true
		where, ok := got[r.value]
		require.True(t, ok, "record %s was never acknowledged", r.value)
		require.Equal(t, ack{r.partition, r.offset}, where, "record %s is where its callback said", r.value)
		v, _ := strconv.Atoi(r.value[len(prefix):])
		if prev, ok := last[r.partition]; ok {
			require.Greater(t, v, prev, "partition %d: %d after %d", r.partition, v, prev)
		}
		last[r.partition] = v
	}
	require.Len(t, seen, len(got), "every acknowledged record is there, once")
	return len(got)
}
