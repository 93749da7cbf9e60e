package broker

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// Config is a broker's configuration, read from Kafka's broker keys.
type Config struct {
	BrokerID int32 // broker.id
	// Listeners are every listener, in the order of listeners, with their
	// security protocols and advertised addresses (see Listener).
	Listeners []Listener
	// InterBrokerListener names the listener other brokers reach this one
	// on (inter.broker.listener.name, or security.inter.broker.protocol;
	// PLAINTEXT by default).
	InterBrokerListener string
	// Listener is the inter-broker listener's address to listen on, and
	// AdvertisedHost and AdvertisedPort its advertised address: with one
	// listener (PLAINTEXT://host:port), the broker's only address.
	Listener       string
	AdvertisedHost string
	AdvertisedPort int32
	LogDir         string // log.dirs (or log.dir); one directory
	// NumPartitions is num.partitions, for topics created without a count.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	AutoCreateTopics         bool  // auto.create.topics.enable
	MessageMaxBytes          int32 // message.max.bytes: the largest batch accepted
	FetchMaxBytes            int32 // fetch.max.bytes: the most record bytes one fetch response carries
	Network                  network.Config
	Log                      commitlog.ManagerConfig
}

// Ignored lists keys a Kafka server.properties carries that this stage
// accepts but does not use yet (with the stage that does), so that Kafka's
// own sample file starts a broker.
var Ignored = map[string]string{
	"zookeeper.connect":                        "stage 05",
	"zookeeper.connection.timeout.ms":          "stage 05",
	"zookeeper.session.timeout.ms":             "stage 05",
	"num.recovery.threads.per.data.dir":        "recovery runs on one goroutine per log directory",
	"offsets.topic.replication.factor":         "stage 05 (consumer groups)",
	"transaction.state.log.replication.factor": "stage 05 (transactions)",
	"transaction.state.log.min.isr":            "stage 05 (transactions)",
	"group.initial.rebalance.delay.ms":         "stage 05 (consumer groups)",
	"delete.topic.enable":                      "topics can always be deleted",
}

// brokerKeys parse into Config; each knows its key, Kafka's default and
// where the value goes.
type brokerKey struct {
	name string
	def  string
	set  func(c *Config, v string) error
}

var brokerKeys = []brokerKey{
	{"broker.id", "0", intKey(0, math.MaxInt32, func(c *Config, v int64) { c.BrokerID = int32(v) })},
	{"log.dirs", "/tmp/kafka-logs", func(c *Config, v string) error {
		if strings.Contains(v, ",") {
			return fmt.Errorf("more than one log directory is not supported")
		}
		c.LogDir = v
		return nil
	}},
	{"num.partitions", "1", intKey(1, math.MaxInt32, func(c *Config, v int64) { c.NumPartitions = int32(v) })},
	{"default.replication.factor", "1", intKey(1, math.MaxInt16, func(c *Config, v int64) { c.DefaultReplicationFactor = int16(v) })},
	{"auto.create.topics.enable", "true", func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		c.AutoCreateTopics = b
		if err != nil {
			return fmt.Errorf("not a boolean")
		}
		return nil
	}},
	{"message.max.bytes", "1048588", intKey(0, math.MaxInt32, func(c *Config, v int64) { c.MessageMaxBytes = int32(v) })},
	{"fetch.max.bytes", "57671680", intKey(1024, math.MaxInt32, func(c *Config, v int64) { c.FetchMaxBytes = int32(v) })},
	{"num.network.threads", "3", intKey(1, 1024, func(c *Config, v int64) { c.Network.NumNetworkThreads = int(v) })},
	{"num.io.threads", "8", intKey(1, 1024, func(c *Config, v int64) { c.Network.NumIOThreads = int(v) })},
	{"queued.max.requests", "500", intKey(1, math.MaxInt32, func(c *Config, v int64) { c.Network.QueuedMaxRequests = int(v) })},
	{"socket.request.max.bytes", "104857600", intKey(1, math.MaxInt32, func(c *Config, v int64) { c.Network.SocketRequestMaxBytes = int32(v) })},
	{"socket.send.buffer.bytes", "102400", intKey(-1, math.MaxInt32, func(c *Config, v int64) { c.Network.SendBufferBytes = int(v) })},
	{"socket.receive.buffer.bytes", "102400", intKey(-1, math.MaxInt32, func(c *Config, v int64) { c.Network.ReceiveBufferBytes = int(v) })},
	{"connections.max.idle.ms", "600000", intKey(-1, math.MaxInt64, func(c *Config, v int64) {
		c.Network.ConnectionsMaxIdle = time.Duration(v) * time.Millisecond
	})},
	// Kafka's default is unlimited; the workbook's is a quarter of the
	// open-file limit (DefaultMaxConnections), the rest being the
	// partitions' and their segments' (store.DefaultMaxPartitions), so
	// that connections over it are refused at once instead of hanging in
	// the accept queue when descriptors run out.
	{"max.connections", "", func(c *Config, v string) error {
		if v == "" {
			c.Network.MaxConnections = DefaultMaxConnections()
			return nil
		}
		return intKey(0, math.MaxInt32, func(c *Config, v int64) { c.Network.MaxConnections = int(v) })(c, v)
	}},
	{"queued.max.request.bytes", "268435456", intKey(-1, math.MaxInt64, func(c *Config, v int64) { c.Network.QueuedMaxRequestBytes = v })},
}

func intKey(min, max int64, set func(c *Config, v int64)) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not a number")
		}
		if n < min || n > max {
			return fmt.Errorf("value must be in [%d, %d]", min, max)
		}
		set(c, n)
		return nil
	}
}

// Keys lists every key ParseConfig knows: this stage's, the log's
// (commitlog.BrokerKeys) and the Ignored ones, sorted. Later stages add
// theirs to it (stage 03's server.Keys, ...); final's sample
// server.properties is checked against the whole list.
func Keys() []string {
	out := append([]string{"log.dir"}, listenerKeys...)
	for _, k := range brokerKeys {
		out = append(out, k.name)
	}
	out = append(out, commitlog.BrokerKeys()...)
	for k := range Ignored {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// ParseConfig reads a broker's configuration from properties (a
// server.properties file with its --override values applied). Every key
// must be known: an unknown key or a bad value is an error that names it.
// extra lists keys a later stage parses itself (stage 03's replica.*), so
// that they count as known here.
func ParseConfig(props map[string]string, logger *slog.Logger, extra ...string) (Config, error) {
	c := Config{Network: network.DefaultConfig()}
	if v, ok := props["log.dir"]; ok { // Kafka's older single-directory key
		if _, both := props["log.dirs"]; !both {
			props = withKey(props, "log.dirs", v)
		}
	}
	known := map[string]bool{"log.dir": true}
	for _, k := range listenerKeys {
		known[k] = true
	}
	for _, k := range extra {
		known[k] = true
	}
	for _, k := range brokerKeys {
		known[k.name] = true
		v, ok := props[k.name]
		if !ok {
			v = k.def
		}
		if err := k.set(&c, v); err != nil {
			return c, &commitlog.ConfigError{Key: k.name, Value: v, Reason: err.Error()}
		}
	}
	if err := parseListeners(&c, props); err != nil {
		return c, err
	}
	c.Network.Addr = c.Listener // New adds the other listeners (c.Network.Listeners)

	logCfg, err := commitlog.ParseManagerConfig(props)
	if err != nil {
		return c, err
	}
	c.Log = logCfg
	for _, k := range commitlog.BrokerKeys() {
		known[k] = true
	}

	var unknown []string
	for k := range props {
		if why, ok := Ignored[k]; ok && !known[k] { // a later stage that parses it passes it in extra
			logger.Warn("configuration key not used by this stage", "key", k, "used_in", why)
			continue
		}
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return c, &commitlog.ConfigError{Key: unknown[0], Value: props[unknown[0]], Reason: "unknown configuration key"}
	}
	return c, nil
}

func propOr(props map[string]string, key, def string) string {
	if v, ok := props[key]; ok {
		return v
	}
	return def
}

func withKey(props map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(props)+1)
	for k, v := range props {
		out[k] = v
	}
	out[key] = value
	return out
}
