package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// topicConfig describes one topic key through kadm (with synonyms).
func topicConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, rc.Err)
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("topic %s: no config %s", topic, key)
	return kadm.Config{}
}

// brokerConfig describes one key of broker id (or with id < 0 the
// cluster-wide dynamic config); ok is false when it is not listed.
func brokerConfig(t *testing.T, adm *kadm.Client, id int32, key string) (kadm.Config, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []int32
	if id >= 0 {
		ids = append(ids, id)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
	require.NoError(t, err)
	require.Len(t, rcs, 1)
	require.NoError(t, rcs[0].Err)
	for _, c := range rcs[0].Configs {
		if c.Key == key {
			return c, true
		}
	}
	return kadm.Config{}, false
}

// alter runs one alteration and returns its error.
func alter(t *testing.T, f func(ctx context.Context) (kadm.AlterConfigsResponses, error)) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := f(ctx)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	if rs[0].Err != nil && rs[0].ErrMessage != "" {
		t.Logf("%s: %v: %s", rs[0].Name, rs[0].Err, rs[0].ErrMessage)
	}
	return rs[0].Err
}

// produceAcksAll produces one record with acks=all and few retries, and
// returns the error.
func produceAcksAll(t *testing.T, c *brokertest.Cluster, topic string) error {
	t.Helper()
	p := client(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr() // keyed: the topic may be compacted
}

// value is a described config's value ("" for null).
func value(c kadm.Config) string { return c.MaybeValue() }

func set(name, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}
}

// TestTopicConfigsAreDescribedAndAlteredThroughKadm: franz-go's admin
// client reads every topic key with its value and source, changes it
// incrementally (SET, DELETE, APPEND and SUBTRACT on cleanup.policy) and
// as a whole (legacy AlterConfigs); the znode is Kafka's, a bad key or
// value is INVALID_CONFIG naming it, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION; min.insync.replicas=4 on a topic of three
// replicas makes an acks=all produce fail with NOT_ENOUGH_REPLICAS, on
// whichever broker leads, and deleting it makes the produce work again.
func TestTopicConfigsAreDescribedAndAlteredThroughKadm(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, map[string]string{"log.retention.hours": "48"})
	zk := observer(t, ens)
	adm := kadm.NewClient(client(t, c))
	createTopic(t, c, "orders", 2, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})

	own := topicConfig(t, adm, "orders", "segment.bytes")
	require.Equal(t, "1048576", own.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, own.Source)
	require.Equal(t, []kadm.ConfigSynonym{{Key: "segment.bytes", Value: kadm.StringPtr("1048576"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "log.segment.bytes", Value: kadm.StringPtr("1073741824"), Source: kmsg.ConfigSourceDefaultConfig}}, own.Synonyms)
	static := topicConfig(t, adm, "orders", "retention.ms")
	require.Equal(t, "172800000", static.MaybeValue(), "log.retention.hours=48 in the properties, in milliseconds")
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, static.Source)
	require.Equal(t, []kadm.ConfigSynonym{{Key: "log.retention.hours", Value: kadm.StringPtr("48"), Source: kmsg.ConfigSourceStaticBrokerConfig},
		{Key: "log.retention.hours", Value: kadm.StringPtr("168"), Source: kmsg.ConfigSourceDefaultConfig}}, static.Synonyms)
	def := topicConfig(t, adm, "orders", "cleanup.policy")
	require.Equal(t, "delete", def.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, def.Source)

	// Incremental: SET, APPEND, SUBTRACT, DELETE.
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("retention.ms", "3600000"),
			{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, "orders")
	}))
	require.Equal(t, "3600000", value(topicConfig(t, adm, "orders", "retention.ms")))
	require.Equal(t, "delete,compact", value(topicConfig(t, adm, "orders", "cleanup.policy")), "appended to the default")
	data, _, err := zk.Conn().Get(kafkazk.ConfigTopicPath("orders"))
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"config":{"cleanup.policy":"delete,compact","retention.ms":"3600000","segment.bytes":"1048576"}}`, string(data))
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")},
			{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "orders")
	}))
	require.Equal(t, "compact", value(topicConfig(t, adm, "orders", "cleanup.policy")))
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, topicConfig(t, adm, "orders", "retention.ms").Source, "deleted: the broker's again")

	// Refusals.
	for _, tt := range []struct {
		name  string
		op    kadm.AlterConfig
		topic string
		want  error
	}{
		{"unknown key", set("no.such.key", "1"), "orders", kerr.InvalidConfig},
		{"bad value", set("retention.ms", "soon"), "orders", kerr.InvalidConfig},
		{"append to a non-list key", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}, "orders", kerr.InvalidConfig},
		{"unknown topic", set("retention.ms", "1"), "missing", kerr.UnknownTopicOrPartition},
	} {
		err := alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
			return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tt.op}, tt.topic)
		})
		require.ErrorIs(t, err, tt.want, tt.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("retention.ms", "soon")}, "orders")
	require.NoError(t, err)
	require.Contains(t, rs[0].ErrMessage, "retention.ms")
	require.Contains(t, rs[0].ErrMessage, "soon")
	rcs, err := adm.DescribeTopicConfigs(ctx, "missing")
	require.NoError(t, err)
	require.ErrorIs(t, rcs[0].Err, kerr.UnknownTopicOrPartition)

	// validate_only changes nothing.
	rs, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{set("retention.ms", "1000")}, "orders")
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, topicConfig(t, adm, "orders", "retention.ms").Source)

	// min.insync.replicas=4 on three replicas: acks=all is refused on
	// every leader; deleting it restores the default.
	require.NoError(t, produceAcksAll(t, c, "orders"))
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("min.insync.replicas", "4")}, "orders")
	}))
	require.Eventually(t, func() bool {
		return produceAcksAll(t, c, "orders") != nil
	}, 30*time.Second, 100*time.Millisecond)
	require.ErrorIs(t, produceAcksAll(t, c, "orders"), kerr.NotEnoughReplicas)
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}}, "orders")
	}))
	require.Eventually(t, func() bool { return produceAcksAll(t, c, "orders") == nil }, 30*time.Second, 100*time.Millisecond)

	// Legacy AlterConfigs replaces the whole config.
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{set("retention.bytes", "1000000")}, "orders")
	}))
	data, _, err = zk.Conn().Get(kafkazk.ConfigTopicPath("orders"))
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"config":{"retention.bytes":"1000000"}}`, string(data))
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, topicConfig(t, adm, "orders", "segment.bytes").Source, "left out: removed")
}

// TestBrokerConfigsAreDescribedAndAlteredThroughKadm: a broker describes
// its static keys (STATIC_BROKER_CONFIG, read-only unless dynamic) and
// the defaults of the topic keys (DEFAULT_CONFIG); a cluster-wide dynamic
// min.insync.replicas=4 reaches every broker without a restart (acks=all
// refused with NOT_ENOUGH_REPLICAS on a topic without its own value),
// survives a broker's restart (it is in ZooKeeper) and, deleted, restores
// the default; a per-broker value is that broker's only, is altered
// through that broker only, and a static key is refused as Kafka refuses
// it.
func TestBrokerConfigsAreDescribedAndAlteredThroughKadm(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, map[string]string{"log.retention.hours": "48"})
	zk := observer(t, ens)
	adm := kadm.NewClient(client(t, c))
	createTopic(t, c, "orders", 3, nil)

	hours, ok := brokerConfig(t, adm, 0, "log.retention.hours")
	require.True(t, ok)
	require.Equal(t, "48", value(hours))
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, hours.Source)
	zkc, ok := brokerConfig(t, adm, 0, "zookeeper.connect")
	require.True(t, ok)
	require.Equal(t, c.ConnectString(), value(zkc))
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, zkc.Source)
	segment, ok := brokerConfig(t, adm, 0, "log.segment.bytes")
	require.True(t, ok)
	require.Equal(t, "1073741824", value(segment))
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, segment.Source)

	// Cluster-wide: every broker applies it to topics without their own.
	require.NoError(t, produceAcksAll(t, c, "orders"))
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("min.insync.replicas", "4")})
	}))
	data, _, err := zk.Conn().Get(kafkazk.ConfigBrokerPath(kafkazk.ConfigBrokerDefault))
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"config":{"min.insync.replicas":"4"}}`, string(data))
	require.Eventually(t, func() bool { // the answering broker may not have read the notification yet
		def, ok := brokerConfig(t, adm, -1, "min.insync.replicas")
		return ok && def.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}, 30*time.Second, 50*time.Millisecond)
	for id := range int32(3) {
		require.Eventually(t, func() bool {
			c, _ := brokerConfig(t, adm, id, "min.insync.replicas")
			return c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && value(c) == "4"
		}, 30*time.Second, 50*time.Millisecond, "broker %d reads the dynamic default", id)
	}
	mir := topicConfig(t, adm, "orders", "min.insync.replicas")
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, mir.Source)
	require.Equal(t, "4", value(mir))
	require.Equal(t, []kadm.ConfigSynonym{{Key: "min.insync.replicas", Value: kadm.StringPtr("4"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{Key: "min.insync.replicas", Value: kadm.StringPtr("1"), Source: kmsg.ConfigSourceDefaultConfig}}, mir.Synonyms)
	require.ErrorIs(t, produceAcksAll(t, c, "orders"), kerr.NotEnoughReplicas, "every partition's leader refuses")

	// A restart keeps it: it is in ZooKeeper.
	c.Broker(0).Stop(60 * time.Second)
	c.Broker(0).Start()
	waitTopicEverywhere(t, c, "orders", 3)
	adm = kadm.NewClient(client(t, c)) // broker 0 listens on a new port
	restarted, _ := brokerConfig(t, adm, 0, "min.insync.replicas")
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, restarted.Source)
	require.ErrorIs(t, produceAcksAll(t, c, "orders"), kerr.NotEnoughReplicas)

	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}})
	}))
	require.Eventually(t, func() bool { return produceAcksAll(t, c, "orders") == nil }, 30*time.Second, 100*time.Millisecond)

	// Per broker: broker 1's only, with its synonyms in Kafka's order.
	require.NoError(t, alter(t, func(ctx context.Context) (kadm.AlterConfigsResponses, error) {
		return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "3600000")}, 1)
	}))
	require.Eventually(t, func() bool {
		c, _ := brokerConfig(t, adm, 1, "log.retention.ms")
		return c.Source == kmsg.ConfigSourceDynamicBrokerConfig
	}, 30*time.Second, 50*time.Millisecond)
	_, ok = brokerConfig(t, adm, 0, "log.retention.ms")
	require.False(t, ok, "broker 0 has no log.retention.ms")
	ms, _ := brokerConfig(t, adm, 1, "log.retention.ms")
	require.Equal(t, []kadm.ConfigSynonym{{Key: "log.retention.ms", Value: kadm.StringPtr("3600000"), Source: kmsg.ConfigSourceDynamicBrokerConfig},
		{Key: "log.retention.hours", Value: kadm.StringPtr("48"), Source: kmsg.ConfigSourceStaticBrokerConfig},
		{Key: "log.retention.hours", Value: kadm.StringPtr("168"), Source: kmsg.ConfigSourceDefaultConfig}}, ms.Synonyms)

	// Refusals, with Kafka's codes and messages.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("zookeeper.connect", "elsewhere:2181")}, 0)
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, kerr.InvalidRequest)
	require.Equal(t, "Cannot update these configs dynamically: Set(zookeeper.connect)", rs[0].ErrMessage)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "soon")})
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, kerr.InvalidRequest)
	require.Contains(t, rs[0].ErrMessage, "log.retention.ms")
	pc, err := protocol.Dial(ctx, c.Broker(0).Addr(), "test")
	require.NoError(t, err)
	defer pc.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	res.Configs = append(res.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "log.retention.ms", Value: kadm.StringPtr("1")})
	req.Resources = append(req.Resources, res)
	resp, err := pc.Request(ctx, req)
	require.NoError(t, err)
	got := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	require.Equal(t, kerr.InvalidRequest.Code, got.ErrorCode, "broker 1's config is altered through broker 1")
	require.Equal(t, "Unexpected broker id, expected 0, but received 1", *got.ErrorMessage)

	// An operation kmsg does not name (here -1) is refused, not ignored.
	for _, op := range []kmsg.IncrementalAlterConfigOp{-1, 4} {
		req.Resources[0].ResourceName = "0"
		req.Resources[0].Configs[0].Op = op
		resp, err = pc.Request(ctx, req)
		require.NoError(t, err)
		got = resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		require.Equal(t, kerr.InvalidRequest.Code, got.ErrorCode, "op %d", op)
		require.Equal(t, fmt.Sprintf("Unknown operations type %d", op), *got.ErrorMessage)
	}
}

// TestSaramaListsTopicsWithTheirConfigs: Sarama's ClusterAdmin.ListTopics
// describes every topic's config (it failed outright before the broker
// served DescribeConfigs), and DescribeConfig answers for a topic and a
// broker, at Sarama's 2.8 and 3.9 protocol versions.
func TestSaramaListsTopicsWithTheirConfigs(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, nil)
	createTopic(t, c, "orders", 2, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	createTopic(t, c, "payments", 1, nil)
	for _, version := range []sarama.KafkaVersion{sarama.V2_8_0_0, sarama.V3_9_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Version = version
			admin, err := sarama.NewClusterAdmin(c.Addrs(), cfg)
			require.NoError(t, err)
			defer admin.Close()
			topics, err := admin.ListTopics()
			require.NoError(t, err)
			require.Contains(t, topics, "orders")
			require.Contains(t, topics, "payments")
			require.Equal(t, int32(2), topics["orders"].NumPartitions)
			require.Equal(t, int16(3), topics["orders"].ReplicationFactor)
			require.Equal(t, "compact", *topics["orders"].ConfigEntries["cleanup.policy"])
			require.NotContains(t, topics["payments"].ConfigEntries, "cleanup.policy", "Sarama keeps the values that are not defaults")

			entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "orders"})
			require.NoError(t, err)
			var policy *sarama.ConfigEntry
			for _, e := range entries {
				if e.Name == "cleanup.policy" {
					policy = &e
				}
			}
			require.NotNil(t, policy)
			require.Equal(t, "compact", policy.Value)
			require.Equal(t, sarama.SourceTopic, policy.Source)

			entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1"})
			require.NoError(t, err)
			var zkc *sarama.ConfigEntry
			for _, e := range entries {
				if e.Name == "zookeeper.connect" {
					zkc = &e
				}
			}
			require.NotNil(t, zkc)
			require.True(t, zkc.ReadOnly)
			require.Equal(t, sarama.SourceStaticBroker, zkc.Source)
		})
	}
}

// TestDescribeConfigsShowsALaterStagesKeysAndHidesSecrets: the keys a
// later stage hands in (Options.BrokerConfigs) are described with the
// stage's own; a secret is answered as null with is_sensitive and the
// type PASSWORD. A v0 request gets is_default, a v3 request types and
// documentation; BROKER_LOGGER is not served (INVALID_REQUEST).
func TestDescribeConfigsShowsALaterStagesKeysAndHidesSecrets(t *testing.T) {
	ens := zktest.StartStandalone(t)
	cfg, err := server.ParseConfig(map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs": t.TempDir(), "zookeeper.connect": strings.Join(ens.Addrs(), ",")}, slog.Default())
	require.NoError(t, err)
	s, err := server.New(cfg, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BrokerConfigs: []server.BrokerConfigEntry{
		{Name: "ssl.keystore.location", Value: "/etc/kafka/broker.p12", Type: kmsg.ConfigTypeString},
		{Name: "ssl.keystore.password", Value: "hunter2", Sensitive: true},
	}})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// describe asks at version (a client pinned to it: the workbook's
	// protocol client always asks at the highest common version).
	describe := func(version int16, typ kmsg.ConfigResourceType, name string) kmsg.DescribeConfigsResponseResource {
		versions := kversion.V3_9_0()
		versions.SetMaxKeyVersion(32, version)
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Endpoint().HostPort()), kgo.MaxVersions(versions))
		require.NoError(t, err)
		defer cl.Close()
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeSynonyms, req.IncludeDocumentation = version >= 1, version >= 3
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		req.Resources = append(req.Resources, res)
		kresp, err := cl.Broker(0).Request(ctx, req) // to broker 0, whatever the resource names
		require.NoError(t, err)
		resp := kresp.(*kmsg.DescribeConfigsResponse)
		require.Equal(t, version, resp.Version)
		return resp.Resources[0]
	}
	find := func(r kmsg.DescribeConfigsResponseResource, name string) kmsg.DescribeConfigsResponseResourceConfig {
		for _, c := range r.Configs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no config %s", name)
		return kmsg.DescribeConfigsResponseResourceConfig{}
	}

	b := describe(4, kmsg.ConfigResourceTypeBroker, "0")
	require.Zero(t, b.ErrorCode)
	loc := find(b, "ssl.keystore.location")
	require.Equal(t, "/etc/kafka/broker.p12", *loc.Value)
	require.Equal(t, kmsg.ConfigSourceStaticBrokerConfig, loc.Source)
	require.True(t, loc.ReadOnly)
	pw := find(b, "ssl.keystore.password")
	require.Nil(t, pw.Value)
	require.True(t, pw.IsSensitive)
	require.Equal(t, kmsg.ConfigTypePassword, pw.ConfigType)
	require.Nil(t, pw.ConfigSynonyms[0].Value)

	v0 := describe(0, kmsg.ConfigResourceTypeBroker, "0")
	require.True(t, find(v0, "log.segment.bytes").IsDefault)
	require.False(t, find(v0, "zookeeper.connect").IsDefault)
	v3 := describe(3, kmsg.ConfigResourceTypeBroker, "0")
	seg := find(v3, "log.segment.bytes")
	require.Equal(t, kmsg.ConfigTypeInt, seg.ConfigType)
	require.NotNil(t, seg.Documentation)
	require.Equal(t, kmsg.ConfigTypeInt, find(v3, "log.retention.hours").ConfigType)

	logger := describe(4, kmsg.ConfigResourceTypeBrokerLogger, "0")
	require.Equal(t, kerr.InvalidRequest.Code, logger.ErrorCode)
	other := describe(4, kmsg.ConfigResourceTypeBroker, "7")
	require.Equal(t, kerr.InvalidRequest.Code, other.ErrorCode)
	require.Equal(t, "Unexpected broker id, expected 0 or empty string, but received 7", *other.ErrorMessage)
}
