package compat_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage06-performance/consumer"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// testTransactions: three transactional producers (franz-go, Sarama, the
// course's own) each commit and abort transactions on one topic; three
// read_committed readers (kcat, franz-go, the course's
// consumer) must each read exactly the committed records. (kafka-go
// has no transactions: see below.)
func testTransactions(t *testing.T, c *brokertest.Cluster) {
	const topic = "compat-txn"
	createTopic(t, c, topic, 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var committed []string
	write := func(who string, begin func() error, send func(v string, partition int32) error, end func(commit bool) error) {
		for i := range 6 {
			require.NoError(t, begin(), "%s: begin", who)
			commit := i%2 == 0
			for j := range 3 {
				v := fmt.Sprintf("%s-txn%d-%d", who, i, j)
				require.NoError(t, send(v, int32(j)), "%s: send", who)
				if commit {
					committed = append(committed, v)
				}
			}
			require.NoError(t, end(commit), "%s: end", who)
		}
	}

	franz, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID("compat-franz"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer franz.Close()
	write("franz", franz.BeginTransaction, func(v string, p int32) error {
		return franz.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr()
	}, func(commit bool) error { return franz.EndTransaction(ctx, kgo.TransactionEndTry(commit)) })

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent, cfg.Producer.RequiredAcks, cfg.Producer.Return.Successes = true, sarama.WaitForAll, true
	cfg.Producer.Transaction.ID, cfg.Producer.Partitioner, cfg.Net.MaxOpenRequests = "compat-sarama", sarama.NewManualPartitioner, 1
	sp, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	require.NoError(t, err)
	defer sp.Close()
	write("sarama", sp.BeginTxn, func(v string, p int32) error {
		_, _, err := sp.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(v)})
		return err
	}, func(commit bool) error {
		if commit {
			return sp.CommitTxn()
		}
		return sp.AbortTxn()
	})

	pcfg, err := producer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(c.Addrs(), ","), "transactional.id": "compat-ours"})
	require.NoError(t, err)
	ours, err := producer.New(pcfg, producer.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer ours.Close(ctx)
	require.NoError(t, ours.InitTransactions(ctx))
	write("ours", ours.BeginTransaction, func(v string, _ int32) error {
		return ours.Produce(ctx, &producer.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}, nil)
	}, func(commit bool) error {
		if commit {
			return ours.CommitTransaction(ctx)
		}
		return ours.AbortTransaction(ctx)
	})
	slices.Sort(committed)

	// Every transaction decided and marked: the LSO is the high watermark.
	adm := kadm.NewClient(franz)
	require.Eventually(t, func() bool {
		ends, err1 := adm.ListEndOffsets(ctx, topic)
		stable, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return false
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			s, _ := stable.Lookup(topic, o.Partition)
			same = same && s.Offset == o.Offset
		})
		return same
	}, 30*time.Second, 50*time.Millisecond)

	sorted := func(vs []string) []string { slices.Sort(vs); return vs }
	t.Run("kcat read_committed", func(t *testing.T) {
		out := runKcat(t, "", "-b", strings.Join(c.Addrs(), ","), "-C", "-q", "-t", topic, "-o", "beginning", "-e",
			"-X", "isolation.level=read_committed", "-f", "%s\n")
		require.Equal(t, committed, sorted(strings.Fields(out)))
	})
	// kafka-go is no judge here: it sends isolation_level but neither
	// drops an aborted transaction's records nor skips control batches
	// (it hands the markers to the application as records), so it reads
	// what read_uncommitted reads, and more.
	t.Run("franz-go read_committed", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		var got []string
		for len(got) < len(committed) {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		require.Equal(t, committed, sorted(got))
	})
	t.Run("ours read_committed", func(t *testing.T) {
		ccfg, err := consumer.ParseConfig(map[string]string{"bootstrap.servers": strings.Join(c.Addrs(), ","),
			"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
		require.NoError(t, err)
		cs, err := consumer.New(ccfg, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		defer cs.Close(ctx)
		require.NoError(t, cs.Assign(ctx, consumer.TopicPartition{Topic: topic, Partition: 0},
			consumer.TopicPartition{Topic: topic, Partition: 1}, consumer.TopicPartition{Topic: topic, Partition: 2}))
		var got []string
		for len(got) < len(committed) {
			recs, err := cs.Poll(ctx)
			require.NoError(t, err)
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
		require.Equal(t, committed, sorted(got))
	})
	t.Run("offsets in a transaction", func(t *testing.T) {
		// Our producer's SendOffsetsToTransaction: the group's offset is
		// the transaction's only once it commits; meanwhile an OffsetFetch
		// with require_stable answers UNSTABLE_OFFSET_COMMIT.
		fetch := func(stable bool) (int64, int16) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group, req.RequireStable = "compat-offsets", stable
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{1}}}
			var resp *kmsg.OffsetFetchResponse
			require.Eventually(t, func() bool {
				r, err := req.RequestWith(ctx, franz)
				if err != nil || r.ErrorCode != 0 || len(r.Topics) == 0 {
					return false
				}
				resp = r
				return true
			}, 30*time.Second, 50*time.Millisecond)
			p := resp.Topics[0].Partitions[0]
			return p.Offset, p.ErrorCode
		}
		group := producer.GroupMetadata{GroupID: "compat-offsets", Generation: -1}
		for _, step := range []struct {
			offset int64
			commit bool
			want   int64
		}{{10, true, 10}, {20, false, 10}, {30, true, 30}} {
			require.NoError(t, ours.BeginTransaction())
			require.NoError(t, ours.Produce(ctx, &producer.Record{Topic: topic, Value: []byte("offsets")}, nil))
			require.NoError(t, ours.SendOffsetsToTransaction(ctx, group, map[string]map[int32]int64{topic: {1: step.offset}}))
			_, code := fetch(true)
			require.Equal(t, kerr.UnstableOffsetCommit.Code, code, "offset %d pending", step.offset)
			if step.commit {
				require.NoError(t, ours.CommitTransaction(ctx))
			} else {
				require.NoError(t, ours.AbortTransaction(ctx))
			}
			require.Eventually(t, func() bool {
				got, code := fetch(true)
				return code == 0 && got == step.want
			}, 30*time.Second, 50*time.Millisecond, "after offset %d, commit %v", step.offset, step.commit)
		}
	})
}
