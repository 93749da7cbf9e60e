package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// racingSource has no data on its first read, and data arrives right after
// that read (its signal fires before the fetch has registered to watch it):
// the window in which a long poll can lose its wake-up.
type racingSource struct {
	StoreFetchSource
	reads int
}

func (s *racingSource) ReadPartition(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	s.reads++
	p, _ := s.Store.Partition(topic, fp.Partition)
	if s.reads == 1 {
		out.HighWatermark = 0
		p.Appended.Notify() // an append lands now, before Watch: nobody hears it
		return
	}
	s.StoreFetchSource.ReadPartition(replicaID, topic, fp, first, remaining, out)
}

func TestLongPollDoesNotMissAnAppendBetweenReadAndWatch(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: quietLogger})
	require.NoError(t, err)
	b.Register(FetchAPI(&racingSource{StoreFetchSource: StoreFetchSource{b.Store()}})) // before Start
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t}
	t.Cleanup(tb.stop)
	tb.createTopic("race", 1)
	produceRecords(t, tb.client(), "race", 0, "already there")

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 60_000, 1, 1<<20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "race", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fetchByName(ctx, tb.client(), req)
	require.NoError(t, err, "the fetch slept through the append (its max wait is 60 s)")
	require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches)
}

// eagerSource signals its watchers the moment they register: an append
// landing right after the fetch registered, before it looked once more.
type eagerSource struct{ StoreFetchSource }

func (s eagerSource) Watch(replicaID int32, topic string, partition int32, ch chan struct{}) func() {
	unwatch := s.StoreFetchSource.Watch(replicaID, topic, partition, ch)
	p, _ := s.Store.Partition(topic, partition)
	p.Appended.Notify()
	return unwatch
}

func TestLongPollSurvivesAnAppendRightAfterItRegistered(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: quietLogger})
	require.NoError(t, err)
	b.Register(FetchAPI(eagerSource{StoreFetchSource{b.Store()}})) // before Start
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t}
	t.Cleanup(tb.stop)
	tb.createTopic("eager", 1)

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 200, 1, 1<<20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "eager", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = fetchByName(ctx, tb.client(), req)
	require.NoError(t, err, "the fetch must be answered after its 200 ms wait, not hang its handler")
}

// recordingSource counts how often the fetch is recorded and read.
type recordingSource struct {
	StoreFetchSource
	mu             sync.Mutex
	records, reads int
	refuse         bool
}

func (s *recordingSource) RecordFetch(_ int32, _ string, _ *kmsg.FetchRequestTopicPartition, out *protocol.FetchPartition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records++
	if s.refuse {
		out.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
	}
}

func (s *recordingSource) ReadPartition(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	s.StoreFetchSource.ReadPartition(replicaID, topic, fp, first, remaining, out)
}

// TestAWaitingFetchIsRecordedOnceNotAtEveryWakeUp: a follower's fetch that
// waits at its leader is read again at every append and at its deadline;
// it must be recorded (the follower's position and fetch time) only when
// it arrived, or a follower that died during the wait would look alive.
func TestAWaitingFetchIsRecordedOnceNotAtEveryWakeUp(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	b, err := New(cfg, Options{Logger: quietLogger})
	require.NoError(t, err)
	src := &recordingSource{StoreFetchSource: StoreFetchSource{b.Store()}}
	b.Register(FetchAPI(src)) // before Start
	require.NoError(t, b.Start())
	tb := &testBroker{Broker: b, t: t}
	t.Cleanup(tb.stop)
	tb.createTopic("once", 1)

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 1, 500, 1<<20, 1<<20 // more than will come
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "once", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	done := make(chan error, 1)
	go func() {
		_, err := fetchByName(context.Background(), tb.client(), req)
		done <- err
	}()
	producer := tb.client()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			require.NoError(t, err)
			src.mu.Lock()
			records, reads := src.records, src.reads
			src.mu.Unlock()
			require.Equal(t, 1, records, "recorded when it arrived, not at each of its %d reads", reads)
			require.Greater(t, reads, 2, "woken by the appends")
			goto refused
		default:
			produceRecords(t, producer, "once", 0, "wake up")
		}
		require.Less(t, i, 10_000)
	}
refused:
	src.mu.Lock()
	src.refuse, src.records, src.reads = true, 0, 0
	src.mu.Unlock()
	resp, err := fetchByName(context.Background(), tb.client(), req)
	require.NoError(t, err)
	require.EqualValues(t, 6, resp.Topics[0].Partitions[0].ErrorCode, "a refused partition answers with the recorder's error, at once")
	src.mu.Lock()
	defer src.mu.Unlock()
	require.Zero(t, src.reads, "and is not read")
}
