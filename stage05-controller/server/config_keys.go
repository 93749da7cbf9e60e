package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// A topicKey is a topic-level config this broker understands, with what
// DescribeConfigs says of it: Kafka's type and default (LogConfig) and the
// broker keys that set its default when the topic has no value of its
// own (Kafka's ServerTopicConfigSynonyms), most precise first.
type topicKey struct {
	name   string
	typ    kmsg.ConfigType
	def    string          // Kafka's default, the value when nothing sets it
	broker []brokerSynonym // the broker keys of its default, most precise first
	doc    string
	// live: a dynamic broker config of its broker keys applies at once, on
	// every broker (Kafka's DynamicLogConfig). Not live: this broker
	// reads the broker key at start only (unclean.leader.election.enable
	// is read by the controller when it loads a topic; message.max.bytes
	// by the network layer), so a dynamic value is refused.
	live bool
}

// A brokerSynonym is a broker key that sets a topic key's default.
type brokerSynonym struct {
	name string
	unit int64  // milliseconds per unit (log.retention.hours: 3600000); 1 otherwise
	def  string // Kafka's default of the broker key; "" for none (null)
}

var (
	typBool   = kmsg.ConfigTypeBoolean
	typString = kmsg.ConfigTypeString
	typInt    = kmsg.ConfigTypeInt
	typLong   = kmsg.ConfigTypeLong
	typDouble = kmsg.ConfigTypeDouble
	typList   = kmsg.ConfigTypeList
)

const longMax = "9223372036854775807"

// topicKeys are the topic-level configs this workbook's brokers use, in
// the order DescribeConfigs lists them. CreateTopics and AlterConfigs
// refuse any other key (INVALID_CONFIG) rather than store and ignore it.
var topicKeys = []topicKey{
	{"cleanup.policy", typList, "delete", []brokerSynonym{{"log.cleanup.policy", 1, "delete"}},
		"delete: old segments are removed by retention; compact: the cleaner keeps the last record of each key; or both", true},
	{"compression.type", typString, "producer", []brokerSynonym{{"compression.type", 1, "producer"}},
		"the codec batches are stored with: producer keeps the producer's, or one of uncompressed, gzip, snappy, lz4, zstd", true},
	{"delete.retention.ms", typLong, "86400000", []brokerSynonym{{"log.cleaner.delete.retention.ms", 1, "86400000"}},
		"how long a compacted topic keeps a tombstone after it was cleaned", true},
	{"file.delete.delay.ms", typLong, "60000", []brokerSynonym{{"log.segment.delete.delay.ms", 1, "60000"}},
		"how long a segment removed from the log waits before its files are deleted", true},
	{"flush.messages", typLong, longMax, []brokerSynonym{{"log.flush.interval.messages", 1, longMax}},
		"fsync the log after this many appended records", true},
	{"flush.ms", typLong, longMax, []brokerSynonym{{"log.flush.interval.ms", 1, ""}},
		"fsync the log when its last fsync is this old", true},
	{"index.interval.bytes", typInt, "4096", []brokerSynonym{{"log.index.interval.bytes", 1, "4096"}},
		"bytes of records between two offset index entries", true},
	{"max.compaction.lag.ms", typLong, longMax, []brokerSynonym{{"log.cleaner.max.compaction.lag.ms", 1, longMax}},
		"the longest a record may stay uncompacted", true},
	{"max.message.bytes", typInt, "1048588", []brokerSynonym{{"message.max.bytes", 1, "1048588"}},
		"the largest record batch the topic takes", false},
	{"message.timestamp.type", typString, "CreateTime", []brokerSynonym{{"log.message.timestamp.type", 1, "CreateTime"}},
		"CreateTime (the producer's timestamp) or LogAppendTime (the broker's)", false},
	{"min.cleanable.dirty.ratio", typDouble, "0.5", []brokerSynonym{{"log.cleaner.min.cleanable.ratio", 1, "0.5"}},
		"the share of a compacted log not yet cleaned above which the cleaner takes it", true},
	{"min.compaction.lag.ms", typLong, "0", []brokerSynonym{{"log.cleaner.min.compaction.lag.ms", 1, "0"}},
		"the youngest a record may be when it is compacted", true},
	{"min.insync.replicas", typInt, "1", []brokerSynonym{{"min.insync.replicas", 1, "1"}},
		"the fewest in-sync replicas with which an acks=all produce is accepted (else NOT_ENOUGH_REPLICAS)", true},
	{"retention.bytes", typLong, "-1", []brokerSynonym{{"log.retention.bytes", 1, "-1"}},
		"the largest a partition's log may grow before its oldest segments are deleted; -1: no limit", true},
	{"retention.ms", typLong, "604800000", []brokerSynonym{{"log.retention.ms", 1, ""}, {"log.retention.minutes", 60_000, ""}, {"log.retention.hours", 3_600_000, "168"}},
		"how long a segment is kept after its newest record; -1: no limit", true},
	{"segment.bytes", typInt, "1073741824", []brokerSynonym{{"log.segment.bytes", 1, "1073741824"}},
		"the size at which the active segment is rolled", true},
	{"segment.index.bytes", typInt, "10485760", []brokerSynonym{{"log.index.size.max.bytes", 1, "10485760"}},
		"the size of a segment's offset and time index files", true},
	{"segment.ms", typLong, "604800000", []brokerSynonym{{"log.roll.ms", 1, ""}, {"log.roll.hours", 3_600_000, "168"}},
		"the age at which the active segment is rolled even if not full", true},
	{"unclean.leader.election.enable", typBool, "false", []brokerSynonym{{"unclean.leader.election.enable", 1, "false"}},
		"whether the controller may elect a replica outside the ISR when no ISR member is alive, losing records", false},
}

// lookupTopicKey finds a topic key by name.
func lookupTopicKey(name string) (topicKey, bool) {
	i := slices.IndexFunc(topicKeys, func(k topicKey) bool { return k.name == name })
	if i < 0 {
		return topicKey{}, false
	}
	return topicKeys[i], true
}

// synonymGroup finds the topic key whose default a broker key sets, and
// that broker key.
func synonymGroup(brokerKey string) (topicKey, brokerSynonym, bool) {
	for _, k := range topicKeys {
		for _, b := range k.broker {
			if b.name == brokerKey {
				return k, b, true
			}
		}
	}
	return topicKey{}, brokerSynonym{}, false
}

// dynamicBrokerKey reports whether a broker key may be set as a dynamic
// broker config here: one that sets the default of a live topic key.
// Kafka also reconfigures thread pools, listeners and quotas at runtime;
// this broker does not, and refuses them as Kafka refuses a static key.
func dynamicBrokerKey(name string) bool {
	k, _, ok := synonymGroup(name)
	return ok && k.live
}

// brokerKeyType is the type of a broker key that sets a topic key's
// default: the topic key's, but hours and minutes are INT.
func brokerKeyType(k topicKey, b brokerSynonym) kmsg.ConfigType {
	if b.unit != 1 {
		return typInt
	}
	return k.typ
}

// inMillis turns a broker key's value into the topic key's unit
// (log.retention.hours=24 is retention.ms=86400000). A negative value
// keeps its meaning ("no limit").
func inMillis(b brokerSynonym, raw string) string {
	if b.unit == 1 {
		return raw
	}
	v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
	if err != nil {
		return raw
	}
	if v < 0 {
		return "-1"
	}
	return strconv.FormatInt(v*b.unit, 10)
}

// validateTopicConfig checks a topic's whole config: every key known,
// every value one this broker can use; the error names key and value.
func (s *Server) validateTopicConfig(config map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(config)) {
		if _, ok := lookupTopicKey(name); !ok {
			return &commitlog.ConfigError{Key: name, Value: config[name], Reason: "unknown topic config name"}
		}
	}
	isrKeys, logKeys := splitTopicConfig(config)
	if _, err := s4.ParseTopicConfig(s.cfg.Topic, isrKeys); err != nil {
		return err
	}
	if _, err := s.Store().ValidateTopicConfigs(logKeys); err != nil {
		return err
	}
	if raw, ok := config["max.message.bytes"]; ok {
		if v, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32); err != nil || v < 0 {
			return &commitlog.ConfigError{Key: "max.message.bytes", Value: raw, Reason: "not a number of type int, at least 0"}
		}
	}
	if raw, ok := config["message.timestamp.type"]; ok && raw != "CreateTime" && raw != "LogAppendTime" {
		return &commitlog.ConfigError{Key: "message.timestamp.type", Value: raw, Reason: "not one of CreateTime, LogAppendTime"}
	}
	return nil
}

// validateBrokerConfig checks a dynamic broker config (per broker or
// cluster-wide): Kafka's message when a key cannot change at runtime,
// else each value as the topic key it sets would take it.
func (s *Server) validateBrokerConfig(config map[string]string) error {
	var static []string
	for _, name := range slices.Sorted(maps.Keys(config)) {
		if !dynamicBrokerKey(name) {
			static = append(static, name)
		}
	}
	if len(static) > 0 {
		return fmt.Errorf("Cannot update these configs dynamically: Set(%s)", strings.Join(static, ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(config)) {
		k, b, _ := synonymGroup(name)
		raw := config[name]
		err := s.validateTopicConfig(map[string]string{k.name: inMillis(b, raw)})
		if ce, ok := err.(*commitlog.ConfigError); ok {
			return &commitlog.ConfigError{Key: name, Value: raw, Reason: ce.Reason}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sensitiveKey reports whether a broker key holds a secret, which
// DescribeConfigs answers as null (Kafka's PASSWORD type).
func sensitiveKey(name string) bool {
	return strings.Contains(name, "password") || strings.HasSuffix(name, "sasl.jaas.config")
}

// BrokerConfigEntry is a broker config that DescribeConfigs shows besides
// this stage's keys: the seam through which a later stage adds its own
// (listeners, ssl.*, sasl.*) through Options.BrokerConfigs. Such keys are
// read-only: they cannot be altered at runtime.
type BrokerConfigEntry struct {
	Name  string
	Value string
	// Default: the value is Kafka's default (source DEFAULT_CONFIG), not
	// one from the properties (STATIC_BROKER_CONFIG).
	Default bool
	// Sensitive: a password or secret. DescribeConfigs answers its value
	// as null, with is_sensitive and the type PASSWORD.
	Sensitive bool
	// Type is Kafka's type of the key (kmsg.ConfigTypeString, ...).
	Type kmsg.ConfigType
	// Doc is the documentation DescribeConfigs v3+ shows; may be empty.
	Doc string
}
