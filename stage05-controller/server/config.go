package server

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/txn"
)

// The keys this stage adds, with Kafka's names and defaults.
const (
	// KeyZookeeperConnect: host:port[,host:port...][/chroot] of the
	// ensemble; with a chroot every znode of the cluster is under it,
	// created at start if missing (as Kafka's). Required.
	KeyZookeeperConnect = "zookeeper.connect"
	// KeyZookeeperSessionTimeout: how long the ensemble keeps this
	// broker's session (and its registration) after it last heard from
	// it. Default 18000.
	KeyZookeeperSessionTimeout = "zookeeper.session.timeout.ms"
	// KeyZookeeperConnectionTimeout: how long start-up waits for a first
	// session. Default: the session timeout.
	KeyZookeeperConnectionTimeout = "zookeeper.connection.timeout.ms"
	// KeyControlledShutdownEnable: ask the controller to move this
	// broker's leaderships away before stopping. Default true.
	KeyControlledShutdownEnable = "controlled.shutdown.enable"
	// KeyControlledShutdownMaxRetries: how many times to ask when some
	// leaderships could not move. Default 3.
	KeyControlledShutdownMaxRetries = "controlled.shutdown.max.retries"
	// KeyControlledShutdownRetryBackoff: the pause between those asks.
	// Default 5000.
	KeyControlledShutdownRetryBackoff = "controlled.shutdown.retry.backoff.ms"
	// KeyNumPartitions and KeyDefaultReplicationFactor: what CreateTopics
	// uses when a request leaves them to the broker (-1). Default 1 and 1.
	KeyNumPartitions            = "num.partitions"
	KeyDefaultReplicationFactor = "default.replication.factor"
	// KeyBrokerRack: broker.rack, written in the registration. Default none.
	KeyBrokerRack = "broker.rack"
	// KeyAutoLeaderRebalance, KeyLeaderImbalanceCheckInterval and
	// KeyLeaderImbalancePerBrokerPercentage: the controller's preferred
	// leader election. Defaults true, 300 and 10.
	KeyAutoLeaderRebalance                = "auto.leader.rebalance.enable"
	KeyLeaderImbalanceCheckInterval       = "leader.imbalance.check.interval.seconds"
	KeyLeaderImbalancePerBrokerPercentage = "leader.imbalance.per.broker.percentage"
)

// Config is a stage 05 broker's configuration: stage 04's and the keys
// above.
type Config struct {
	server.Config
	ZookeeperConnect           string
	ZookeeperSessionTimeout    time.Duration
	ZookeeperConnectionTimeout time.Duration
	ControlledShutdown         bool
	ControlledShutdownRetries  int
	ControlledShutdownBackoff  time.Duration
	NumPartitions              int
	DefaultReplicationFactor   int
	Rack                       string
	AutoLeaderRebalance        bool
	LeaderImbalanceCheck       time.Duration
	LeaderImbalancePercentage  int
	// Group is the group coordinator's configuration; the offsets topic's
	// replication factor and segment size are used when it is created.
	Group                    group.Config
	OffsetsReplicationFactor int
	OffsetsSegmentBytes      int64
	// Txn is the transaction coordinator's configuration;
	// __transaction_state's replication factor, min.insync.replicas and
	// segment size are used when it is created.
	Txn                  txn.Config
	TxnReplicationFactor int
	TxnMinISR            int
	TxnSegmentBytes      int64
	// Props are the properties ParseConfig read: DescribeConfigs answers
	// them as STATIC_BROKER_CONFIG. A Config built by hand may leave it
	// nil (every key is then answered with Kafka's default).
	Props map[string]string
}

// ownKeys are this stage's keys.
func ownKeys() []string {
	return append([]string{KeyZookeeperConnect, KeyZookeeperSessionTimeout, KeyZookeeperConnectionTimeout,
		KeyControlledShutdownEnable, KeyControlledShutdownMaxRetries, KeyControlledShutdownRetryBackoff,
		KeyNumPartitions, KeyDefaultReplicationFactor, KeyBrokerRack,
		KeyAutoLeaderRebalance, KeyLeaderImbalanceCheckInterval, KeyLeaderImbalancePerBrokerPercentage}, append(groupKeys, txnKeys...)...)
}

// Keys lists every key ParseConfig knows, sorted: stage 04's (and so
// every stage's below) and this stage's.
func Keys() []string {
	out := append(server.Keys(), ownKeys()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// ParseConfig reads a broker's configuration; every key must be known,
// and a bad value is an error that names the key and the value.
func ParseConfig(props map[string]string, logger *slog.Logger) (Config, error) {
	base, err := server.ParseConfig(props, logger, ownKeys()...)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Config: base, ZookeeperConnect: strings.TrimSpace(props[KeyZookeeperConnect]),
		ZookeeperSessionTimeout: kafkazk.DefaultSessionTimeout, ControlledShutdown: true, ControlledShutdownRetries: 3,
		ControlledShutdownBackoff: 5 * time.Second, NumPartitions: 1, DefaultReplicationFactor: 1, Rack: props[KeyBrokerRack],
		AutoLeaderRebalance: true, LeaderImbalanceCheck: 300 * time.Second, LeaderImbalancePercentage: 10, Props: maps.Clone(props)}
	if cfg.ZookeeperConnect == "" {
		return Config{}, &commitlog.ConfigError{Key: KeyZookeeperConnect, Value: props[KeyZookeeperConnect],
			Reason: "required: the ZooKeeper ensemble, host:port[,host:port...][/chroot]"}
	}
	if _, _, err := kafkazk.ParseConnect(cfg.ZookeeperConnect); err != nil {
		return Config{}, &commitlog.ConfigError{Key: KeyZookeeperConnect, Value: cfg.ZookeeperConnect, Reason: err.Error()}
	}
	for key, d := range map[string]*time.Duration{KeyZookeeperSessionTimeout: &cfg.ZookeeperSessionTimeout,
		KeyZookeeperConnectionTimeout: &cfg.ZookeeperConnectionTimeout, KeyControlledShutdownRetryBackoff: &cfg.ControlledShutdownBackoff} {
		if raw, ok := props[key]; ok {
			ms, err := parseInt(key, raw, 0)
			if err != nil {
				return Config{}, err
			}
			*d = time.Duration(ms) * time.Millisecond
		}
	}
	if cfg.ZookeeperConnectionTimeout == 0 {
		cfg.ZookeeperConnectionTimeout = cfg.ZookeeperSessionTimeout
	}
	for key, n := range map[string]*int{KeyControlledShutdownMaxRetries: &cfg.ControlledShutdownRetries,
		KeyNumPartitions: &cfg.NumPartitions, KeyDefaultReplicationFactor: &cfg.DefaultReplicationFactor} {
		if raw, ok := props[key]; ok {
			min := int64(1)
			if key == KeyControlledShutdownMaxRetries {
				min = 0
			}
			v, err := parseInt(key, raw, min)
			if err != nil {
				return Config{}, err
			}
			*n = int(v)
		}
	}
	for key, b := range map[string]*bool{KeyControlledShutdownEnable: &cfg.ControlledShutdown, KeyAutoLeaderRebalance: &cfg.AutoLeaderRebalance} {
		if raw, ok := props[key]; ok {
			v, err := strconv.ParseBool(strings.TrimSpace(raw))
			if err != nil {
				return Config{}, &commitlog.ConfigError{Key: key, Value: raw, Reason: "not true or false"}
			}
			*b = v
		}
	}
	if raw, ok := props[KeyLeaderImbalanceCheckInterval]; ok {
		v, err := parseInt(KeyLeaderImbalanceCheckInterval, raw, 1)
		if err != nil {
			return Config{}, err
		}
		cfg.LeaderImbalanceCheck = time.Duration(v) * time.Second
	}
	if raw, ok := props[KeyLeaderImbalancePerBrokerPercentage]; ok {
		v, err := parseInt(KeyLeaderImbalancePerBrokerPercentage, raw, 0)
		if err != nil {
			return Config{}, err
		}
		if v > 100 {
			return Config{}, &commitlog.ConfigError{Key: KeyLeaderImbalancePerBrokerPercentage, Value: raw, Reason: "a percentage: at most 100"}
		}
		cfg.LeaderImbalancePercentage = int(v)
	}
	if err := parseTxnConfig(props, &cfg); err != nil {
		return Config{}, err
	}
	if err := parseGroupConfig(props, &cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseInt reads a whole number of at least min.
func parseInt(key, raw string, min int64) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return 0, &commitlog.ConfigError{Key: key, Value: raw, Reason: "not a whole number"}
	}
	if v < min {
		return 0, &commitlog.ConfigError{Key: key, Value: raw, Reason: "must be at least " + strconv.FormatInt(min, 10)}
	}
	return v, nil
}
