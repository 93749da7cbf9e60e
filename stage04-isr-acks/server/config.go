package server

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
)

// The keys this stage adds, with Kafka's names and defaults.
const (
	// KeyLagTimeMax: how long a follower may go without catching up before
	// the leader removes it from the ISR. 30000 since Kafka 2.5 (KIP-537);
	// the seed's 10 s was the default before.
	KeyLagTimeMax = "replica.lag.time.max.ms"
	// KeyMinInsyncReplicas: the fewest ISR members with which an acks=all
	// produce is accepted. Broker default and per-topic. Default 1.
	KeyMinInsyncReplicas = "min.insync.replicas"
	// KeyUncleanLeaderElection: whether the controller may elect a leader
	// outside the ISR when no ISR member is alive (losing what only the
	// ISR had). Broker default and per-topic. Default false since 0.11.
	KeyUncleanLeaderElection = "unclean.leader.election.enable"
	// KeyProducerIDExpiration: a producer idle this long is forgotten by
	// the partitions. Kafka 2.x uses transactional.id.expiration.ms
	// (7 days) for it. Default 604800000.
	KeyProducerIDExpiration = "transactional.id.expiration.ms"
	// KeyProducerIDExpirationCheck: how often partitions look for idle
	// producers. Default 600000.
	KeyProducerIDExpirationCheck = "producer.id.expiration.check.interval.ms"
)

// Not Kafka's keys: when a leader tells the controller of its ISR changes
// (isr.IsrChangePropagationConfig). Kafka fixes these at 2500, 5000 and
// 60000 ms (ZkIsrManager.DefaultIsrPropagationConfig, a field its own tests
// override); here they are keys so that tests of brokers that run as
// processes (stage 05) can shorten them. The defaults are Kafka's values.
const (
	KeyIsrChangePropagationCheckInterval = "isr.change.propagation.check.interval.ms"
	KeyIsrChangePropagationLinger        = "isr.change.propagation.linger.ms"
	KeyIsrChangePropagationMaxDelay      = "isr.change.propagation.max.delay.ms"
)

// Config is a stage 04 broker's configuration: stage 03's, and the ISR and
// acks keys.
type Config struct {
	server.Config
	LagTimeMax time.Duration
	// ProducerIDExpiration and ProducerIDExpirationCheck: see the keys.
	ProducerIDExpiration      time.Duration
	ProducerIDExpirationCheck time.Duration
	// IsrChangePropagation: see KeyIsrChangePropagationLinger.
	IsrChangePropagation isr.IsrChangePropagationConfig
	// Topic is the broker-wide default of the topic-level keys.
	Topic TopicConfig
}

// TopicConfig holds the keys a topic may override.
type TopicConfig struct {
	MinInsyncReplicas     int
	UncleanLeaderElection bool
}

// DefaultTopicConfig is Kafka's.
func DefaultTopicConfig() TopicConfig { return TopicConfig{MinInsyncReplicas: 1} }

// keys are this stage's.
var keys = []string{KeyLagTimeMax, KeyMinInsyncReplicas, KeyUncleanLeaderElection, KeyProducerIDExpiration, KeyProducerIDExpirationCheck,
	KeyIsrChangePropagationCheckInterval, KeyIsrChangePropagationLinger, KeyIsrChangePropagationMaxDelay}

// Keys lists every key ParseConfig knows: stage 03's and this stage's.
func Keys() []string { return append(server.Keys(), keys...) }

// ParseConfig reads a broker's configuration; every key must be known:
// this stage's, the stages' below, or one of extraKeys, which a later
// stage parses itself (stage 05's zookeeper.connect).
func ParseConfig(props map[string]string, logger *slog.Logger, extraKeys ...string) (Config, error) {
	base, err := server.ParseConfig(props, logger, append(slices.Clone(keys), extraKeys...)...)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Config: base, LagTimeMax: isr.DefaultLagTimeMax,
		ProducerIDExpiration: 7 * 24 * time.Hour, ProducerIDExpirationCheck: 10 * time.Minute,
		IsrChangePropagation: isr.DefaultIsrChangePropagation}
	for key, d := range map[string]*time.Duration{KeyLagTimeMax: &cfg.LagTimeMax,
		KeyProducerIDExpiration: &cfg.ProducerIDExpiration, KeyProducerIDExpirationCheck: &cfg.ProducerIDExpirationCheck,
		KeyIsrChangePropagationCheckInterval: &cfg.IsrChangePropagation.CheckInterval,
		KeyIsrChangePropagationLinger:        &cfg.IsrChangePropagation.Linger,
		KeyIsrChangePropagationMaxDelay:      &cfg.IsrChangePropagation.MaxDelay} {
		if raw, ok := props[key]; ok {
			ms, err := parseInt(key, raw, 1)
			if err != nil {
				return cfg, err
			}
			*d = time.Duration(ms) * time.Millisecond
		}
	}
	cfg.Topic, err = ParseTopicConfig(DefaultTopicConfig(), props)
	return cfg, err
}

// ParseTopicConfig reads the topic-level keys of props over base; other
// keys are left to whoever reads them.
func ParseTopicConfig(base TopicConfig, props map[string]string) (TopicConfig, error) {
	out := base
	if raw, ok := props[KeyMinInsyncReplicas]; ok {
		n, err := parseInt(KeyMinInsyncReplicas, raw, 1)
		if err != nil {
			return base, err
		}
		out.MinInsyncReplicas = int(n)
	}
	if raw, ok := props[KeyUncleanLeaderElection]; ok {
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return base, &commitlog.ConfigError{Key: KeyUncleanLeaderElection, Value: raw, Reason: "not true or false"}
		}
		out.UncleanLeaderElection = b
	}
	return out, nil
}

func parseInt(key, raw string, lowest int64) (int64, error) {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, &commitlog.ConfigError{Key: key, Value: raw, Reason: "not a number"}
	}
	if n < lowest || n > math.MaxInt32 {
		return 0, &commitlog.ConfigError{Key: key, Value: raw, Reason: fmt.Sprintf("value must be in [%d, %d]", lowest, math.MaxInt32)}
	}
	return n, nil
}

// topicConfigs holds each topic's overrides of the topic-level keys. In a
// cluster they come from the controller (stage 05: /config/topics/<t> in
// ZooKeeper); here the harness sets them.
type topicConfigs struct {
	mu        sync.RWMutex
	defaults  TopicConfig
	overrides map[string]TopicConfig // Protected by mu.
}

func (c *topicConfigs) get(topic string) TopicConfig {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t, ok := c.overrides[topic]; ok {
		return t
	}
	return c.defaults
}

func (c *topicConfigs) set(topic string, props map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if k != KeyMinInsyncReplicas && k != KeyUncleanLeaderElection {
			return &commitlog.ConfigError{Key: k, Value: props[k], Reason: "not a topic-level key of this stage"}
		}
	}
	t, err := ParseTopicConfig(c.defaults, props)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overrides == nil {
		c.overrides = map[string]TopicConfig{}
	}
	c.overrides[topic] = t
	return nil
}
