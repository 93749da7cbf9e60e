package broker

import (
	"context"
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
	resp, err := req.RequestWith(ctx, tb.client())
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
	_, err = req.RequestWith(ctx, tb.client())
	require.NoError(t, err, "the fetch must be answered after its 200 ms wait, not hang its handler")
}
