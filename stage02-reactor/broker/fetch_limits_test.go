package broker

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// fetchRequest asks for the given partitions of topic from offset 0, each
// with partitionMax bytes, waiting up to wait for minBytes.
func fetchRequest(topic string, partitions []int32, partitionMax int32, minBytes int32, wait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(wait/time.Millisecond), minBytes, 100<<20
	ft := kmsg.FetchRequestTopic{Topic: topic}
	for _, p := range partitions {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, partitionMax
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	return req
}

// fill produces n records of size bytes to partition 0 of topic.
func fill(t *testing.T, tb *testBroker, topic string, n, size int) {
	t.Helper()
	v := string(make([]byte, size))
	cl := tb.manualClient()
	for range n {
		produceRecords(t, cl, topic, 0, v)
	}
}

// TestAPartitionListedManyTimesIsReadOnce: a 56 KB request naming one
// partition 2,000 times once produced a 1 GB response (and past 2 GiB the
// size prefix wraps). Kafka reads the request into a map: one answer.
func TestAPartitionListedManyTimesIsReadOnce(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("many", 1)
	fill(t, tb, "many", 5, 100_000)
	req := fetchRequest("many", make([]int32, 2000), 1<<20, 1, 0)
	c := tb.dial()
	c.send(req, 1)
	_, body := c.receive()
	require.Less(t, len(body), 1<<20, "one partition's worth of records")
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	require.NoError(t, resp.ReadFrom(body))
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches)
}

// TestAPartitionListedTwiceIsReadAtItsLastOffsets: as Kafka's map, the
// first listing fixes the place in the answer and the last the offsets.
func TestAPartitionListedTwiceIsReadAtItsLastOffsets(t *testing.T) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = 1 << 20
	part := func(p int32, offset int64) kmsg.FetchRequestTopicPartition {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset = p, offset
		return fp
	}
	req.Topics = []kmsg.FetchRequestTopic{
		{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{part(0, 5), part(1, 0)}},
		{Topic: "u", Partitions: []kmsg.FetchRequestTopicPartition{part(0, 0)}},
		{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{part(2, 0), part(3, 0), part(0, 10)}},
	}
	f := planFetch(req, 1<<30)
	var got []string
	for _, pt := range f.topics {
		for _, fp := range pt.partitions {
			got = append(got, fmt.Sprintf("%s-%d@%d", pt.topic, fp.Partition, fp.FetchOffset))
		}
	}
	require.Equal(t, []string{"t-0@10", "t-1@0", "u-0@0", "t-2@0", "t-3@0"}, got)
}

// TestFetchMaxBytesBoundsTheResponse: whatever a client asks for, a
// response carries at most fetch.max.bytes of records (plus, when the
// first batch alone is bigger, that batch: KIP-74).
func TestFetchMaxBytesBoundsTheResponse(t *testing.T) {
	tb := startBroker(t, "fetch.max.bytes", "65536")
	tb.createTopic("wide", 4)
	cl := tb.manualClient(kgo.ProducerBatchCompression(kgo.NoCompression())) // 800 KB, not 43 KB of snappy
	for p := range int32(4) {
		for range 10 {
			produceRecords(t, cl, "wide", p, string(make([]byte, 20_000)))
		}
	}
	c := tb.dial()
	c.send(fetchRequest("wide", []int32{0, 1, 2, 3}, 10<<20, 1, 0), 1)
	_, body := c.receive()
	require.LessOrEqual(t, len(body), 65536+1024, "records within fetch.max.bytes, plus the framing")
	require.Greater(t, len(body), 65536, "filled to fetch.max.bytes")
}

// TestARequestsMaxBytesBelowFetchMaxBytesBoundsTheResponse: the response
// honours the smaller of fetch.max.bytes and the request's own max_bytes
// (Kafka: min(fetchMaxBytes, request maxBytes)). The records it carries
// total at most max_bytes, spread over the partitions in order, each within
// its partition_max_bytes; a first batch bigger than max_bytes comes whole
// and alone (KIP-74).
func TestARequestsMaxBytesBelowFetchMaxBytesBoundsTheResponse(t *testing.T) {
	const maxBytes = 64 << 10
	tb := startBroker(t, "fetch.max.bytes", "52428800") // 50 MiB
	tb.createTopic("wide", 4)
	tb.createTopic("big-first", 2)
	cl := tb.manualClient(kgo.ProducerBatchCompression(kgo.NoCompression())) // zeros would shrink to nothing
	for p := range int32(4) {
		for range 10 {
			produceRecords(t, cl, "wide", p, string(make([]byte, 20_000)))
		}
	}
	produceRecords(t, cl, "big-first", 0, string(make([]byte, 100_000)), string(make([]byte, 100_000)))
	produceRecords(t, cl, "big-first", 1, string(make([]byte, 20_000)))

	// fetch returns the bytes of records in each partition's answer.
	fetch := func(topic string, partitions []int32, partitionMax int32) []int {
		req := fetchRequest(topic, partitions, partitionMax, 1, 0)
		req.MaxBytes = maxBytes
		c := tb.dial()
		c.send(req, 1)
		_, body := c.receive()
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(11)
		require.NoError(t, resp.ReadFrom(body))
		var sizes []int
		for _, fp := range resp.Topics[0].Partitions {
			require.Zero(t, fp.ErrorCode)
			sizes = append(sizes, len(fp.RecordBatches))
		}
		return sizes
	}
	firstBatch := func(topic string) int {
		p, _ := tb.Store().Partition(topic, 0)
		region, err := p.Log.Read(0, 1)
		require.NoError(t, err)
		return int(region.Size)
	}

	// 200 KB in each of four partitions, 30,000 bytes a partition at most:
	// 64 KiB in all, from the first three.
	sizes := fetch("wide", []int32{0, 1, 2, 3}, 30_000)
	require.Equal(t, []int{30_000, 30_000, maxBytes - 60_000, 0}, sizes)

	// The same with 1 MiB a partition: the first partition fills it.
	sizes = fetch("wide", []int32{0, 1, 2, 3}, 1<<20)
	require.Equal(t, maxBytes, sizes[0]+sizes[1]+sizes[2]+sizes[3])
	require.Greater(t, sizes[0], firstBatch("wide"), "more than one batch of the first partition")

	// A 100 KB first batch is over max_bytes: it comes whole, and nothing
	// else does.
	big := firstBatch("big-first")
	require.Greater(t, big, maxBytes)
	require.Equal(t, []int{big, 0}, fetch("big-first", []int32{0, 1}, 1<<20))
}

// TestAbandonedLongPollsAreFreedAtOnce: clients that send a long poll
// (24 days of max wait) and disconnect leave nothing behind: their
// connections close at once, their waits end, their watches go. Before,
// 1,100 of them held 1,100 sockets for the whole wait and new clients hung.
func TestAbandonedLongPollsAreFreedAtOnce(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("quiet", 1)
	before := runtime.NumGoroutine()
	req := fetchRequest("quiet", []int32{0}, 1<<20, 1, 24*24*time.Hour)
	for range 200 {
		nc, err := net.Dial("tcp", tb.addr())
		require.NoError(t, err)
		_, err = nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
		require.NoError(t, err)
		require.NoError(t, nc.Close())
	}
	p, _ := tb.Store().Partition("quiet", 0)
	require.Eventually(t, func() bool {
		watchers := p.Appended.Watchers()
		st := tb.NetworkStats()
		return st.ClosedByPeer >= 200 && st.InFlight == 0 && watchers == 0 && runtime.NumGoroutine() <= before+5
	}, 20*time.Second, 5*time.Millisecond, "abandoned long polls still held: %+v", tb.NetworkStats())
}

// TestALongPollsWaitIsCapped: a fetch may ask to wait 24 days; the broker
// answers (empty) well before, within maxFetchWait and within half of
// connections.max.idle.ms, which closes a connection that waits longer.
func TestALongPollsWaitIsCapped(t *testing.T) {
	tb := startBroker(t, "connections.max.idle.ms", "2000")
	tb.createTopic("slow", 1)
	c := tb.dial()
	start := time.Now()
	c.send(fetchRequest("slow", []int32{0}, 1<<20, 1, 24*24*time.Hour), 7)
	id, _ := c.receive()
	require.Equal(t, int32(7), id)
	require.Less(t, time.Since(start), 1900*time.Millisecond, "answered before the idle reaper")
}

// TestParkedFetchesCountAgainstMaxConnections: a connection waiting in a
// long poll is an open connection like any other.
func TestParkedFetchesCountAgainstMaxConnections(t *testing.T) {
	tb := startBroker(t, "max.connections", "5")
	_, err := tb.Store().CreateTopic("full", 1, nil) // no client connection of the test's own
	require.NoError(t, err)
	for range 5 {
		c := tb.dial()
		c.send(fetchRequest("full", []int32{0}, 1<<20, 1, 20*time.Second), 1)
	}
	require.Eventually(t, func() bool { return tb.NetworkStats().RequestsRead == 5 }, 10*time.Second, time.Millisecond)
	extra := tb.dial()
	require.True(t, extra.closedByBroker(), "the sixth connection is refused")
	require.Equal(t, uint64(1), tb.NetworkStats().RejectedConnections)
}

// countingSource counts the reads of each partition.
type countingSource struct {
	StoreFetchSource
	reads [2]atomic.Int64
}

func (s *countingSource) ReadPartition(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	if fp.Partition < 2 {
		s.reads[fp.Partition].Add(1)
	}
	s.StoreFetchSource.ReadPartition(replicaID, topic, fp, first, remaining, out)
}

// TestAnAppendWakesOnlyTheFetchesWaitingOnItsPartition: fetches parked on
// partition 0 are not woken, and do not read, when partition 1 grows.
func TestAnAppendWakesOnlyTheFetchesWaitingOnItsPartition(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: quietLogger})
	require.NoError(t, err)
	src := &countingSource{StoreFetchSource: StoreFetchSource{b.Store()}}
	b.Register(FetchAPI(src)) // before Start
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t}
	t.Cleanup(tb.stop)
	tb.createTopic("two", 2)

	const parked = 50
	var conns []*rawConn
	for range parked {
		c := tb.dial()
		c.send(fetchRequest("two", []int32{0}, 1<<20, 1, 20*time.Second), 1)
		conns = append(conns, c)
	}
	require.Eventually(t, func() bool { return src.reads[0].Load() >= 2*parked }, 10*time.Second, time.Millisecond)
	settled := src.reads[0].Load() // each read once, and once more after registering
	cl := tb.manualClient()
	for range 20 {
		produceRecords(t, cl, "two", 1, "elsewhere")
	}
	produceRecords(t, cl, "two", 0, "here")
	for _, c := range conns {
		id, _ := c.receive()
		require.Equal(t, int32(1), id)
	}
	// Every read a fetch makes happens before it answers: by now each read
	// partition 0 exactly once more, for the append to it. A fetch woken by
	// the 20 appends to partition 1 would have read it more often.
	require.Equal(t, settled+parked, src.reads[0].Load(), "reads of partition 0 before %d, after %d", settled, src.reads[0].Load())
}
