package compat_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

func TestMain(m *testing.M) {
	brokertest.MainWith(m, "github.com/kafkaworkbook/workbook/final/cmd/broker")
}

// startCluster starts the suite's cluster: a three-node ensemble and three
// final brokers, with the consumer offsets topic replicated on all three.
func startCluster(t *testing.T) *brokertest.Cluster {
	t.Helper()
	ens := zktest.StartEnsemble(t, 3)
	return brokertest.Start(t, ens, 3, map[string]string{
		"offsets.topic.replication.factor":     "3",
		"offsets.topic.num.partitions":         "3",
		"group.initial.rebalance.delay.ms":     "0",
		"transaction.state.log.num.partitions": "3",
	})
}

// kcat is the path of the kcat binary (make test installs it).
func kcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed: run ./scripts/deps.sh kcat (make test does): %v", err)
	}
	return p
}

// admin is a kadm client on the cluster, closed at cleanup.
func admin(t *testing.T, c *brokertest.Cluster) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

// createTopic creates a topic and waits until every broker's metadata
// shows every partition with a leader.
func createTopic(t *testing.T, c *brokertest.Cluster, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	adm, _ := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err, "create %s", topic)
	_, cl := admin(t, c)
	for id := range int32(len(c.Addrs())) {
		require.Eventually(t, func() bool {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			raw, err := cl.Broker(int(id)).Request(ctx, req)
			if err != nil {
				return false
			}
			m := raw.(*kmsg.MetadataResponse)
			if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != int(partitions) {
				return false
			}
			for _, p := range m.Topics[0].Partitions {
				if p.Leader < 0 {
					return false
				}
			}
			return true
		}, 30*time.Second, 50*time.Millisecond, "broker %d never showed %s with leaders", id, topic)
	}
}

// storedBatch is what the suite checks of a batch as the leader stores it.
type storedBatch struct {
	Codec      record.Codec
	ProducerID int64
	Values     []string
}

// storedBatches reads a partition from its leader with raw Fetch
// requests until want records came back, and returns its batches as
// stored: the codec and producer id of each batch's header, which no
// client library shows, and the values (decoded by stage 01's reader).
func storedBatches(t *testing.T, c *brokertest.Cluster, topic string, partition int32, want int) []storedBatch {
	t.Helper()
	// Fetch v13+ names topics by id: this reader names them, at v12.
	byName := kversion.Stable()
	byName.SetMaxKeyVersion(1, 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(byName))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := record.GetReader(0)
	defer record.PutReader(reader)
	var out []storedBatch
	for n, offset := 0, int64(0); n < want; {
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", n, want, topic)
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 500, 1, 16<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = partition, offset, 16<<20, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		raw, err := cl.Broker(int(leaderOf(ctx, t, cl, topic, partition))).Request(ctx, req)
		if err != nil {
			continue // a leader that just moved: ask again
		}
		resp := raw.(*kmsg.FetchResponse)
		require.Len(t, resp.Topics, 1)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			continue
		}
		for data := p.RecordBatches; len(data) >= record.HeaderSize; {
			h, err := record.ReadHeader(data)
			require.NoError(t, err)
			if h.Size() > len(data) {
				break // a partial batch at the end of the answer
			}
			b := storedBatch{Codec: h.Attributes.Codec(), ProducerID: h.ProducerID}
			it, err := reader.Records(data[:h.Size()])
			require.NoError(t, err)
			for it.Next() {
				b.Values = append(b.Values, string(it.Record().Value))
			}
			require.NoError(t, it.Err())
			out, n = append(out, b), n+len(b.Values)
			offset, data = h.NextOffset(), data[h.Size():]
		}
	}
	return out
}

// values are the values of batches, in order.
func values(batches []storedBatch) []string {
	var out []string
	for _, b := range batches {
		out = append(out, b.Values...)
	}
	return out
}

// leaderOf asks the cluster for a partition's leader.
func leaderOf(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	raw, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, p := range raw.Topics[0].Partitions {
		if p.Partition == partition {
			return p.Leader
		}
	}
	require.NoError(t, errors.New("no such partition"))
	return -1
}
