package cluster

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Images the launcher runs; scripts/images.sh (`make images`) builds them.
const (
	BrokerImage     = "kafkaworkbook/broker:dev"
	ZooKeeperImage  = zktest.DefaultImage
	PrometheusImage = "kafkaworkbook/prometheus:2.42.0"
)

// Container ports.
const (
	ClientPort   = 9092 // PLAINTEXT, published on 127.0.0.1
	InternalPort = 9093 // INTERNAL, between brokers, on the network only
	MetricsPort  = 9404 // metrics.prometheus.listener
	zkClientPort = 2181
	promPort     = 9090
)

// Config says what Up starts. The zero value is `make cluster`'s cluster
// with free host ports.
type Config struct {
	// Name prefixes every container, volume and the network, and labels
	// them (default "kafkaworkbook").
	Name string
	// ZooKeepers is the ensemble's size (default 3); Brokers the number of
	// brokers, ids 0..Brokers-1 (default 3).
	ZooKeepers, Brokers int
	// BrokerPorts are the 127.0.0.1 ports of the brokers' PLAINTEXT
	// listeners, by id; a missing or zero port is a free one.
	BrokerPorts []int
	// Prometheus starts Prometheus too, scraping every broker each second,
	// on 127.0.0.1:PrometheusPort (zero: a free port).
	Prometheus     bool
	PrometheusPort int
	// BrokerProps are set over DefaultBrokerProps for every broker.
	BrokerProps map[string]string
	// Labels are added to every container, volume and the network (the
	// test harness adds its owner's, so that a dead test's leftovers are
	// found).
	Labels map[string]string
	// ZooKeeperOnly starts the ensemble and no broker: for a caller that
	// runs brokers of its own elsewhere (clusterbench's brokers as
	// processes on this machine), on ZooKeeperConnect's addresses.
	ZooKeeperOnly bool
	// Images override the defaults above.
	BrokerImage, ZooKeeperImage, PrometheusImage string
	// Logf, when set, is told what the launcher does.
	Logf func(format string, args ...any)
}

// DefaultBrokerProps are the brokers' settings over the sample
// configuration (final/config/server.properties): a three-broker cluster's
// durable defaults (replication factor 3, min.insync.replicas 2), and
// timeouts short enough for a demo and a fault suite to see a failure
// handled in seconds rather than half a minute. Each is a documented key
// a reader may set the same way.
var DefaultBrokerProps = map[string]string{
	"default.replication.factor":       "3",
	"offsets.topic.replication.factor": "3",
	"min.insync.replicas":              "2",
	"group.initial.rebalance.delay.ms": "0",
	// The ensemble grants sessions of 2 to 20 ticks of 500 ms (zktest's
	// zoo.cfg); Kafka's 18 s default would be cut to 10 s anyway.
	"zookeeper.session.timeout.ms": "6000",
	// A follower that fetched nothing for 10 s leaves the ISR (Kafka: 30 s).
	"replica.lag.time.max.ms":     "10000",
	"metrics.prometheus.listener": fmt.Sprintf("0.0.0.0:%d", MetricsPort),
}

func (cfg *Config) defaults() {
	if cfg.Name == "" {
		cfg.Name = "kafkaworkbook"
	}
	if cfg.ZooKeepers == 0 {
		cfg.ZooKeepers = 3
	}
	if cfg.Brokers == 0 {
		cfg.Brokers = 3
	}
	if cfg.BrokerImage == "" {
		cfg.BrokerImage = BrokerImage
	}
	if cfg.ZooKeeperImage == "" {
		cfg.ZooKeeperImage = zktest.Image()
	}
	if cfg.PrometheusImage == "" {
		cfg.PrometheusImage = PrometheusImage
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
}

// brokerSettings are broker id's --override arguments.
func (cfg *Config) brokerSettings(id int, name, hostAddr, zkConnect string) map[string]string {
	s := maps.Clone(DefaultBrokerProps)
	maps.Copy(s, map[string]string{
		"broker.id":                      strconv.Itoa(id),
		"zookeeper.connect":              zkConnect,
		"listeners":                      fmt.Sprintf("PLAINTEXT://0.0.0.0:%d,INTERNAL://0.0.0.0:%d", ClientPort, InternalPort),
		"advertised.listeners":           fmt.Sprintf("PLAINTEXT://%s,INTERNAL://%s:%d", hostAddr, name, InternalPort),
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
		"inter.broker.listener.name":     "INTERNAL",
	})
	maps.Copy(s, cfg.BrokerProps)
	return s
}
