package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// fetchVersions counts the Fetch requests a broker served, by version: a
// seam in front of the registered handler, so that a test can say from
// the broker's side which version a client used.
type fetchVersions struct {
	mu    sync.Mutex
	count map[int16]int
}

func (fv *fetchVersions) atLeast(v int16) int {
	fv.mu.Lock()
	defer fv.mu.Unlock()
	n := 0
	for version, c := range fv.count {
		if version >= v {
			n += c
		}
	}
	return n
}

// startCountingFetches starts a broker whose Fetch handler counts versions.
func startCountingFetches(t *testing.T) (*testBroker, *fetchVersions) {
	t.Helper()
	props := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": filepath.Join(t.TempDir(), "kafka-logs")}
	cfg, err := ParseConfig(props, quietLogger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: quietLogger})
	require.NoError(t, err)
	fv := &fetchVersions{count: map[int16]int{}}
	inner := fetchAPI
	counting := inner
	counting.Handle = func(r *Request) {
		fv.mu.Lock()
		fv.count[r.Header.APIVersion]++
		fv.mu.Unlock()
		inner.Handle(r)
	}
	b.Register(counting)
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t, dir: props["log.dirs"], props: props, logger: quietLogger}
	t.Cleanup(func() { tb.stop() })
	return tb, fv
}

// TestFranzGoFetchesByTopicID: franz-go fetches by topic id (v13+) when the
// broker advertises it, and reads every record produced.
func TestFranzGoFetchesByTopicID(t *testing.T) {
	tb, fv := startCountingFetches(t)
	tb.createTopic("by-id", 2)
	cl := tb.manualClient()
	var want []string
	for i := range 200 {
		v := fmt.Sprintf("record-%03d", i)
		produceRecords(t, cl, "by-id", int32(i%2), v)
		want = append(want, v)
	}
	var got []string
	for _, r := range consumeAll(t, tb, "by-id", 2, len(want)) {
		got = append(got, string(r.Value))
	}
	require.ElementsMatch(t, want, got)
	require.Positive(t, fv.atLeast(13), "franz-go fetched by topic id (Fetch v13+)")
}

// TestTopicIDIsWrittenBesideEachPartitionAndKeptAcrossRestarts: a topic
// gets an id when it is created, written as Kafka writes it into each
// partition's partition.metadata, and read back at the next start.
func TestTopicIDIsWrittenBesideEachPartitionAndKeptAcrossRestarts(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("kept", 2)
	id, ok := tb.Store().TopicID("kept")
	require.True(t, ok)
	for p := range 2 {
		data, err := os.ReadFile(filepath.Join(tb.dir, fmt.Sprintf("kept-%d", p), "partition.metadata"))
		require.NoError(t, err)
		require.Equal(t, "version: 0\ntopic_id: "+id.String(), string(data))
	}
	require.Equal(t, id, metadataTopicID(t, tb, "kept"), "Metadata v10+ carries it")

	tb.restart()
	again, ok := tb.Store().TopicID("kept")
	require.True(t, ok)
	require.Equal(t, id, again)
	name, ok := tb.Store().TopicName(id)
	require.True(t, ok)
	require.Equal(t, "kept", name)
}

// TestTopicDeletedAndCreatedAgainGetsANewIDAndTheOldOneIsUnknown: the name
// comes back, the id does not: a fetch or a Metadata request naming the
// old id is answered UNKNOWN_TOPIC_ID, never with the new topic's records.
func TestTopicDeletedAndCreatedAgainGetsANewIDAndTheOldOneIsUnknown(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("reborn", 1)
	produceRecords(t, tb.client(), "reborn", 0, "old")
	old, _ := tb.Store().TopicID("reborn")
	require.NoError(t, tb.Store().DeleteTopic("reborn"))
	_, ok := tb.Store().TopicName(old)
	require.False(t, ok, "the id went with the topic")

	tb.createTopic("reborn", 1)
	produceRecords(t, tb.client(), "reborn", 0, "new")
	id, _ := tb.Store().TopicID("reborn")
	require.NotEqual(t, old, id)

	cl := dialBroker(t, tb)
	fetch := fetchByID(t, cl, old, 0)
	require.Equal(t, kerr.UnknownTopicID.Code, fetch.Topics[0].Partitions[0].ErrorCode)
	require.Empty(t, fetch.Topics[0].Partitions[0].RecordBatches)

	fetch = fetchByID(t, cl, id, 0)
	require.Zero(t, fetch.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, [16]byte(id), fetch.Topics[0].TopicID)
	require.NotEmpty(t, fetch.Topics[0].Partitions[0].RecordBatches, "the new topic's record")

	meta := metadataByID(t, cl, old, id)
	require.Len(t, meta.Topics, 2)
	require.Equal(t, kerr.UnknownTopicID.Code, meta.Topics[0].ErrorCode)
	require.Nil(t, meta.Topics[0].Topic)
	require.Equal(t, [16]byte(old), meta.Topics[0].TopicID)
	require.Zero(t, meta.Topics[1].ErrorCode)
	require.Equal(t, "reborn", *meta.Topics[1].Topic)
}

// TestFetchByRandomTopicIDIsUnknownTopicID: an id nobody gave answers
// UNKNOWN_TOPIC_ID, and the broker goes on serving the connection.
func TestFetchByRandomTopicIDIsUnknownTopicID(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("known", 1)
	cl := dialBroker(t, tb)
	resp := fetchByID(t, cl, store.NewTopicID(), 0)
	require.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[0].Partitions[0].ErrorCode)
	meta := metadataByID(t, cl, store.NewTopicID())
	require.Equal(t, kerr.UnknownTopicID.Code, meta.Topics[0].ErrorCode)
	require.Equal(t, metadataTopicID(t, tb, "known"), fetchByIDTopic(t, cl, tb, "known"))
}

// fetchByName sends a Fetch that names its topics by name: v12 at most,
// the last version before topic ids.
func fetchByName(ctx context.Context, cl *kgo.Client, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, err := cl.Request(ctx, protocol.CapVersion(req, 12))
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

func dialBroker(t *testing.T, tb *testBroker) *protocol.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := protocol.Dial(ctx, tb.addr(), "topic-ids-test")
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// fetchByID fetches a partition from offset 0 naming its topic by id, at
// the highest version both sides know (v17 against this broker).
func fetchByID(t *testing.T, cl *protocol.Client, id store.TopicID, partition int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = partition, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(context.Background(), req)
	require.NoError(t, err)
	require.GreaterOrEqual(t, req.GetVersion(), int16(13))
	fr := resp.(*kmsg.FetchResponse)
	require.Len(t, fr.Topics, 1)
	require.Len(t, fr.Topics[0].Partitions, 1)
	return fr
}

// fetchByIDTopic fetches topic's partition 0 by its id and returns the id
// the response names.
func fetchByIDTopic(t *testing.T, cl *protocol.Client, tb *testBroker, topic string) store.TopicID {
	t.Helper()
	id, ok := tb.Store().TopicID(topic)
	require.True(t, ok)
	resp := fetchByID(t, cl, id, 0)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	return resp.Topics[0].TopicID
}

// metadataByID asks Metadata v12 for topics by id.
func metadataByID(t *testing.T, cl *protocol.Client, ids ...store.TopicID) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, id := range ids {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.Request(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, int16(12), req.GetVersion())
	return resp.(*kmsg.MetadataResponse)
}

// metadataTopicID is the id Metadata (by name) gives topic.
func metadataTopicID(t *testing.T, tb *testBroker, topic string) store.TopicID {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), tb.client())
	require.NoError(t, err)
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].ErrorCode)
	return resp.Topics[0].TopicID
}

// TestFetchV15TakesTheFollowersIDFromReplicaState: KIP-903 moved a
// follower's id from ReplicaID into the tagged ReplicaState; a v15+ fetch
// that left ReplicaState out is a consumer's.
func TestFetchV15TakesTheFollowersIDFromReplicaState(t *testing.T) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID = 14, 3
	require.Equal(t, int32(3), planFetch(req, 1<<30).replicaID)
	req.Version, req.ReplicaID, req.ReplicaState.ID = 15, -1, 2
	require.Equal(t, int32(2), planFetch(req, 1<<30).replicaID)
	consumer := kmsg.NewPtrFetchRequest()
	consumer.Version = 17
	require.Equal(t, int32(-1), planFetch(consumer, 1<<30).replicaID)
}
