package compat_test

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
)

// codecs are the four codecs every client is asked to use.
var codecs = []record.Codec{record.CodecGzip, record.CodecSnappy, record.CodecLZ4, record.CodecZstd}

// lines are n values worth compressing, distinct per prefix.
func lines(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %04d %s", prefix, i, strings.Repeat("compressible ", 6))
	}
	return out
}

// TestClients is the compatibility matrix of docs/07-final.md: one
// cluster of three final brokers on a three-node ensemble, and a subtest
// per client and feature.
func TestClients(t *testing.T) {
	c := startCluster(t)
	t.Run("kcat", func(t *testing.T) { testKcat(t, c) })
	t.Run("franz-go", func(t *testing.T) { testFranz(t, c) })
	t.Run("kadm", func(t *testing.T) { testKadm(t, c) })
	t.Run("sarama", func(t *testing.T) { testSarama(t, c) })
	t.Run("sarama admin", func(t *testing.T) { testSaramaAdmin(t, c) })
	t.Run("kafka-go", func(t *testing.T) { testKafkaGo(t, c) })
	t.Run("transactions", func(t *testing.T) { testTransactions(t, c) })
}

// runKcat runs kcat with args and a deadline, and returns its standard
// output.
func runKcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat(t), args...)
	var stderr strings.Builder
	cmd.Stdin, cmd.Stderr = strings.NewReader(stdin), &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kcat %s\n%s", strings.Join(args, " "), stderr.String())
	return string(out)
}

func testKcat(t *testing.T, c *brokertest.Cluster) {
	bootstrap := strings.Join(c.Addrs(), ",")
	for _, codec := range codecs {
		t.Run("produce and consume "+codec.String(), func(t *testing.T) {
			topic := "kcat-" + codec.String()
			createTopic(t, c, topic, 1, 3, nil)
			want := lines("kcat "+codec.String(), 300)
			runKcat(t, strings.Join(want, "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-z", codec.String(), "-X", "linger.ms=50")
			batches := storedBatches(t, c, topic, 0, len(want))
			for _, b := range batches {
				require.Equal(t, codec, b.Codec, "kcat's batch is stored as %s: librdkafka believed the broker reads it", codec)
			}
			require.Equal(t, want, values(batches))
			got := runKcat(t, "", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")
			require.Equal(t, want, strings.Split(strings.TrimSuffix(got, "\n"), "\n"), "kcat reads back what it wrote")
		})
	}

	t.Run("idempotent producer", func(t *testing.T) {
		topic := "kcat-idempotent"
		createTopic(t, c, topic, 1, 3, nil)
		want := lines("kcat idempotent", 200)
		runKcat(t, strings.Join(want, "\n")+"\n", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-X", "enable.idempotence=true")
		batches := storedBatches(t, c, topic, 0, len(want))
		for _, b := range batches {
			require.GreaterOrEqual(t, b.ProducerID, int64(0), "every batch carries the producer id InitProducerId gave librdkafka")
		}
		require.Equal(t, want, values(batches))
	})

	t.Run("balanced consumer group (-G)", func(t *testing.T) {
		topic, group := "kcat-group", "kcat-group"
		createTopic(t, c, topic, 3, 3, nil)
		want := lines("kcat -G", 150)
		produceKgo(t, c, topic, want)
		got := runKcat(t, "", "-b", bootstrap, "-G", group, "-o", "beginning", "-c", strconv.Itoa(len(want)), "-f", "%s\n", topic)
		gotLines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		require.ElementsMatch(t, want, gotLines, "the group member read every record once")
		requireCommitted(t, c, group, topic, int64(len(want)))
	})

	t.Run("offsets for times (-Q)", func(t *testing.T) {
		topic := "kcat-times"
		createTopic(t, c, topic, 1, 3, nil)
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		var records []*kgo.Record
		for i := range 10 {
			records = append(records, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(strconv.Itoa(i)), Timestamp: base.Add(time.Duration(i) * time.Minute)})
		}
		produceRecords(t, c, records)
		for i, want := range []int64{0, 5, 9} {
			at := base.Add(time.Duration([]int{0, 5, 9}[i])*time.Minute - 30*time.Second)
			out := runKcat(t, "", "-b", bootstrap, "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, at.UnixMilli()))
			m := regexp.MustCompile(`offset (-?\d+)`).FindStringSubmatch(out)
			require.NotNil(t, m, "kcat -Q printed %q", out)
			require.Equal(t, strconv.FormatInt(want, 10), m[1], "the first record at or after %v", at)
		}
	})
}

// produceKgo produces values round-robin over a topic's partitions with
// franz-go, acks=all, and waits for every acknowledgement.
func produceKgo(t *testing.T, c *brokertest.Cluster, topic string, vals []string) {
	t.Helper()
	n := partitionsOf(t, c, topic)
	var records []*kgo.Record
	for i, v := range vals {
		records = append(records, &kgo.Record{Topic: topic, Partition: int32(i % n), Value: []byte(v)})
	}
	produceRecords(t, c, records)
}

// produceRecords produces records to the partitions they name, acks=all,
// and waits for every acknowledgement.
func produceRecords(t *testing.T, c *brokertest.Cluster, records []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, records...).FirstErr())
}

// partitionsOf is a topic's partition count.
func partitionsOf(t *testing.T, c *brokertest.Cluster, topic string) int {
	t.Helper()
	adm, _ := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	require.NoError(t, err)
	return len(md.Topics[topic].Partitions)
}

// requireCommitted waits until group's committed offsets on topic add up
// to total.
func requireCommitted(t *testing.T, c *brokertest.Cluster, group, topic string, total int64) {
	t.Helper()
	adm, _ := admin(t, c)
	var sum int64
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offsets, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		sum = 0
		offsets.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.Err == nil {
				sum += o.At
			}
		})
		return sum == total
	}, 30*time.Second, 100*time.Millisecond, "group %s committed %d of %d on %s", group, sum, total, topic)
}

// consumeKgo reads n records of a topic from the beginning with franz-go.
func consumeKgo(t *testing.T, c *brokertest.Cluster, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(out), n)
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

func testFranz(t *testing.T, c *brokertest.Cluster) {
	t.Run("idempotent acks=all producer and group consumer", func(t *testing.T) {
		topic, group := "franz", "franz-group"
		createTopic(t, c, topic, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
		want := lines("franz", 1000)
		produceKgo(t, c, topic, want)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var got []string
		for len(got) < len(want) {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), len(want))
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		require.NoError(t, cl.CommitUncommittedOffsets(ctx))
		require.ElementsMatch(t, want, got)
		requireCommitted(t, c, group, topic, int64(len(want)))
	})
	for _, codec := range codecs {
		t.Run("produce "+codec.String(), func(t *testing.T) {
			topic := "franz-" + codec.String()
			createTopic(t, c, topic, 1, 3, nil)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ProducerBatchCompression(franzCodec(codec)), kgo.ProducerLinger(20*time.Millisecond))
			require.NoError(t, err)
			defer cl.Close()
			want := lines("franz "+codec.String(), 300)
			var records []*kgo.Record
			for _, v := range want {
				records = append(records, &kgo.Record{Topic: topic, Value: []byte(v)})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			require.NoError(t, cl.ProduceSync(ctx, records...).FirstErr())
			batches := storedBatches(t, c, topic, 0, len(want))
			for _, b := range batches {
				require.Equal(t, codec, b.Codec)
			}
			require.Equal(t, want, values(batches))
			require.Equal(t, want, consumeKgo(t, c, topic, len(want)))
		})
	}
}

func franzCodec(c record.Codec) kgo.CompressionCodec {
	switch c {
	case record.CodecGzip:
		return kgo.GzipCompression()
	case record.CodecSnappy:
		return kgo.SnappyCompression()
	case record.CodecLZ4:
		return kgo.Lz4Compression()
	case record.CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// saramaConfig is Sarama's configuration for a Kafka 2.8 cluster (the
// last ZooKeeper-era version this broker's APIs are modelled on).
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "compat-sarama"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

func saramaCodec(c record.Codec) sarama.CompressionCodec {
	switch c {
	case record.CodecGzip:
		return sarama.CompressionGZIP
	case record.CodecSnappy:
		return sarama.CompressionSnappy
	case record.CodecLZ4:
		return sarama.CompressionLZ4
	case record.CodecZstd:
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

func testSarama(t *testing.T, c *brokertest.Cluster) {
	for _, codec := range codecs {
		t.Run("idempotent producer "+codec.String(), func(t *testing.T) {
			topic := "sarama-" + codec.String()
			createTopic(t, c, topic, 1, 3, nil)
			cfg := saramaConfig()
			cfg.Producer.Compression = saramaCodec(codec)
			cfg.Producer.Idempotent = true
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Retry.Max = 5
			cfg.Producer.Flush.Messages = 50
			cfg.Producer.Flush.Frequency = 20 * time.Millisecond
			p, err := sarama.NewAsyncProducer(c.Addrs(), cfg)
			require.NoError(t, err)
			want := lines("sarama "+codec.String(), 300)
			go func() {
				for _, v := range want {
					p.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}
				}
			}()
			for range want {
				select {
				case <-p.Successes():
				case err := <-p.Errors():
					t.Fatalf("sarama: %v", err)
				case <-time.After(60 * time.Second):
					t.Fatal("sarama: no acknowledgement within a minute")
				}
			}
			require.NoError(t, p.Close())
			batches := storedBatches(t, c, topic, 0, len(want))
			for _, b := range batches {
				require.Equal(t, codec, b.Codec)
				require.GreaterOrEqual(t, b.ProducerID, int64(0), "Sarama's idempotent batches carry its producer id")
			}
			require.Equal(t, want, values(batches))
		})
	}

	t.Run("consumer group", func(t *testing.T) {
		topic, group := "sarama-group", "sarama-group"
		createTopic(t, c, topic, 3, 3, nil)
		want := lines("sarama group", 300)
		produceKgo(t, c, topic, want)
		cfg := saramaConfig()
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
		cg, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
		require.NoError(t, err)
		h := &saramaHandler{got: make(chan string, len(want))}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, h); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		var got []string
		for len(got) < len(want) {
			select {
			case v := <-h.got:
				got = append(got, v)
			case <-ctx.Done():
				t.Fatalf("Sarama's group read %d of %d records", len(got), len(want))
			}
		}
		require.ElementsMatch(t, want, got)
		requireCommitted(t, c, group, topic, int64(len(want)))
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, cg.Close())
	})
}

// saramaHandler hands each message's value to got and marks it consumed.
type saramaHandler struct{ got chan string }

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.got <- string(m.Value)
		s.MarkMessage(m, "")
	}
	return nil
}

func testKafkaGo(t *testing.T, c *brokertest.Cluster) {
	topic, group := "kafka-go", "kafka-go-group"
	createTopic(t, c, topic, 3, 3, nil)
	want := lines("kafka-go", 300)
	w := &kafkago.Writer{Addr: kafkago.TCP(c.Addrs()...), Topic: topic, RequiredAcks: kafkago.RequireAll,
		Balancer: &kafkago.RoundRobin{}, BatchTimeout: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var msgs []kafkago.Message
	for _, v := range want {
		msgs = append(msgs, kafkago.Message{Value: []byte(v)})
	}
	require.NoError(t, w.WriteMessages(ctx, msgs...))
	require.NoError(t, w.Close())

	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: c.Addrs(), GroupID: group, Topic: topic,
		StartOffset: kafkago.FirstOffset, MaxWait: 100 * time.Millisecond, CommitInterval: 0})
	defer r.Close()
	var got []string
	for len(got) < len(want) {
		m, err := r.FetchMessage(ctx)
		require.NoError(t, err, "kafka-go's group reader after %d of %d records", len(got), len(want))
		got = append(got, string(m.Value))
		require.NoError(t, r.CommitMessages(ctx, m))
	}
	require.ElementsMatch(t, want, got)
	requireCommitted(t, c, group, topic, int64(len(want)))
}
