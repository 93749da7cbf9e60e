package commitlog

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Never is the duration Kafka spells Long.MaxValue milliseconds: a time-based
// policy (flush.ms, segment.ms) that never fires.
const Never time.Duration = math.MaxInt64

// Config is one log's configuration. Each field is a Kafka topic-level key
// (with the broker-level key that sets its default in parentheses), with
// Kafka's default.
type Config struct {
	// SegmentBytes is segment.bytes (log.segment.bytes): roll when the
	// active segment would grow past it. Default 1 GiB.
	SegmentBytes int64
	// SegmentMs is segment.ms (log.roll.ms, log.roll.hours): roll when the
	// active segment's first batch is older than this. Default 7 days.
	SegmentMs time.Duration
	// SegmentIndexBytes is segment.index.bytes (log.index.size.max.bytes):
	// the size an index file is preallocated to; roll when it is full.
	// Default 10 MiB.
	SegmentIndexBytes int
	// IndexIntervalBytes is index.interval.bytes (log.index.interval.bytes):
	// the log bytes between two entries of the sparse indexes. Default 4096.
	IndexIntervalBytes int
	// FlushMessages is flush.messages (log.flush.interval.messages): fsync
	// after this many unflushed records. Default: never (§2.1.3, Kafka
	// leaves durability to the page cache and to replication).
	FlushMessages int64
	// FlushMs is flush.ms (log.flush.interval.ms): fsync when the last flush
	// is older than this. Default: never.
	FlushMs time.Duration
	// RetentionMs is retention.ms (log.retention.ms, .minutes, .hours):
	// delete segments whose newest record is older. Negative: keep forever.
	// Default 7 days.
	RetentionMs time.Duration
	// RetentionBytes is retention.bytes (log.retention.bytes): delete the
	// oldest segments while the log is bigger. Negative: no limit (default).
	RetentionBytes int64
	// FileDeleteDelay is file.delete.delay.ms (log.segment.delete.delay.ms):
	// how long a deleted segment's files live on renamed to .deleted, so
	// that reads already handed out can finish. Default 60 s.
	FileDeleteDelay time.Duration

	// CleanupPolicy is cleanup.policy (log.cleanup.policy): "delete" (the
	// retention above), "compact" (the log cleaner keeps the latest record
	// of each key: cleaner.go) or both, written "compact,delete". Default
	// delete. Retention applies only to a policy that includes delete.
	CleanupPolicy CleanupPolicy
	// DeleteRetention is delete.retention.ms
	// (log.cleaner.delete.retention.ms): how long a tombstone (a record
	// with a null value) outlives the cleaning that first finds it, so that
	// a consumer reading the log from the start sees the delete. Default
	// 1 day.
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio
	// (log.cleaner.min.cleanable.ratio): a log is cleaned once its dirty
	// bytes are more than this share of its cleanable bytes. Default 0.5.
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms
	// (log.cleaner.min.compaction.lag.ms): a segment whose newest record is
	// younger is not cleaned yet. Default 0.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms
	// (log.cleaner.max.compaction.lag.ms): a log whose oldest dirty
	// segment is older is cleaned whatever its dirty ratio (KIP-354).
	// Default: never (Long.MaxValue).
	MaxCompactionLag time.Duration

	// CompressionType is compression.type (the same key at the broker
	// level): the codec the log's batches are stored in, or
	// CompressionProducer (the default) to store each batch compressed as
	// its producer sent it. The log does not apply it itself: the broker
	// recompresses a produced batch before appending it (stage 06), as
	// Kafka's LogValidator does.
	CompressionType CompressionType
}

// CompressionType is a log's compression.type: CompressionProducer, or a
// record.Codec to store every batch in.
type CompressionType int8

// CompressionProducer keeps each batch in the codec its producer chose.
const CompressionProducer CompressionType = -1

// Codec returns the codec batches are to be stored in, and false for
// CompressionProducer.
func (t CompressionType) Codec() (record.Codec, bool) {
	if t == CompressionProducer {
		return 0, false
	}
	return record.Codec(t), true
}

// compressionTypes are compression.type's values, with Kafka's names.
var compressionTypes = map[string]CompressionType{"producer": CompressionProducer,
	"uncompressed": CompressionType(record.CodecNone), "gzip": CompressionType(record.CodecGzip),
	"snappy": CompressionType(record.CodecSnappy), "lz4": CompressionType(record.CodecLZ4), "zstd": CompressionType(record.CodecZstd)}

// String writes the type as Kafka's configs spell it.
func (t CompressionType) String() string {
	for name, v := range compressionTypes {
		if v == t {
			return name
		}
	}
	return fmt.Sprintf("CompressionType(%d)", int8(t))
}

// CleanupPolicy is a log's cleanup.policy: a set of CleanupDelete and
// CleanupCompact.
type CleanupPolicy uint8

const (
	// CleanupDelete: retention.ms and retention.bytes delete old segments.
	CleanupDelete CleanupPolicy = 1 << iota
	// CleanupCompact: the log cleaner keeps the latest record of each key.
	CleanupCompact
)

// Delete reports whether retention applies.
func (p CleanupPolicy) Delete() bool { return p&CleanupDelete != 0 }

// Compact reports whether the log cleaner compacts the log.
func (p CleanupPolicy) Compact() bool { return p&CleanupCompact != 0 }

// String writes the policy as Kafka's configs spell it.
func (p CleanupPolicy) String() string {
	var names []string
	if p.Compact() {
		names = append(names, "compact")
	}
	if p.Delete() {
		names = append(names, "delete")
	}
	return strings.Join(names, ",")
}

// ParseCleanupPolicy reads a cleanup.policy value: a comma-separated list
// of "delete" and "compact" (spaces around items allowed, as in Kafka's
// LIST type). An empty list or any other word is an error.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	var p CleanupPolicy
	for _, item := range strings.Split(s, ",") {
		switch strings.TrimSpace(item) {
		case "delete":
			p |= CleanupDelete
		case "compact":
			p |= CleanupCompact
		default:
			return 0, fmt.Errorf("must be a list of delete and compact, got %q", strings.TrimSpace(item))
		}
	}
	return p, nil
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * time.Hour,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		FlushMessages:      math.MaxInt64,
		FlushMs:            Never,
		RetentionMs:        7 * 24 * time.Hour,
		RetentionBytes:     -1,
		FileDeleteDelay:    time.Minute,

		CleanupPolicy:          CleanupDelete,
		DeleteRetention:        24 * time.Hour,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLag:       0,
		MaxCompactionLag:       Never,

		CompressionType: CompressionProducer,
	}
}

// ManagerConfig configures a Manager: the default Config of its logs and the
// intervals of its background work, with Kafka's broker-level keys.
type ManagerConfig struct {
	Log Config // the defaults a topic's own configs override
	// RetentionCheckInterval is log.retention.check.interval.ms. Default 5 min.
	RetentionCheckInterval time.Duration
	// FlushCheckInterval is log.flush.scheduler.interval.ms: how often logs
	// are checked against flush.ms. Default: never.
	FlushCheckInterval time.Duration
	// RecoveryPointCheckpointInterval is
	// log.flush.offset.checkpoint.interval.ms. Default 60 s.
	RecoveryPointCheckpointInterval time.Duration
	// LogStartOffsetCheckpointInterval is
	// log.flush.start.offset.checkpoint.interval.ms. Default 60 s.
	LogStartOffsetCheckpointInterval time.Duration

	// CleanerEnable is log.cleaner.enable: run the log cleaner, which
	// compacts the logs whose cleanup.policy includes compact. Default true.
	// One cleaner goroutine per Manager (log.cleaner.threads is 1 and not
	// configurable here), and no I/O throttle
	// (log.cleaner.io.max.bytes.per.second is not implemented).
	CleanerEnable bool
	// CleanerBackoff is log.cleaner.backoff.ms: how long the cleaner
	// sleeps when no log needs cleaning. Default 15 s.
	CleanerBackoff time.Duration
	// CleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size: the
	// memory of the cleaner's key -> offset map, which bounds how many
	// keys one cleaning round can take in (offsetMapEntryBytes a key, as
	// Kafka counts them). Default 128 MiB.
	CleanerDedupeBufferSize int64
}

// DefaultManagerConfig returns Kafka's defaults.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{
		Log:                              DefaultConfig(),
		RetentionCheckInterval:           5 * time.Minute,
		FlushCheckInterval:               Never,
		RecoveryPointCheckpointInterval:  time.Minute,
		LogStartOffsetCheckpointInterval: time.Minute,
		CleanerEnable:                    true,
		CleanerBackoff:                   15 * time.Second,
		CleanerDedupeBufferSize:          128 << 20,
	}
}

// ConfigError reports a configuration value that cannot be used, naming the
// key and the value as Kafka does.
type ConfigError struct {
	Key, Value string
	Reason     string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid value %q for configuration %s: %s", e.Value, e.Key, e.Reason)
}

// A key is one configuration key: its topic-level and broker-level names
// and how a value is read. Hours and minutes variants exist only at the
// broker level; when several are given the most precise wins, as in Kafka.
type key struct {
	topic  string // "" for broker-only keys
	broker string
	rank   int    // precedence among keys that set the same field: higher wins
	parse  parser // reads a value and stores it
}

// A parser reads one raw value into m, or says why it cannot: the reason
// of the *ConfigError that names the key and the value. Kafka's ConfigDef
// types each key (LONG, DOUBLE, LIST, BOOLEAN); each has a parser below.
type parser func(m *ManagerConfig, raw string) (reason string)

// long is a key of Kafka's type LONG, at least min.
func long(min int64, set func(m *ManagerConfig, v int64)) parser {
	return func(m *ManagerConfig, raw string) string {
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return "not a number of type long"
		}
		if v < min {
			return fmt.Sprintf("value must be at least %d", min)
		}
		set(m, v)
		return ""
	}
}

// duration is a LONG key counted in units of unit milliseconds.
func duration(min, unit int64, field func(m *ManagerConfig) *time.Duration) parser {
	return long(min, func(m *ManagerConfig, v int64) { *field(m) = durationOf(v, unit) })
}

// ratio is a DOUBLE key between 0 and 1 (min.cleanable.dirty.ratio).
func ratio(field func(m *ManagerConfig) *float64) parser {
	return func(m *ManagerConfig, raw string) string {
		v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return "not a number of type double"
		}
		if !(v >= 0 && v <= 1) { // also refuses NaN
			return "value must be between 0 and 1"
		}
		*field(m) = v
		return ""
	}
}

// boolean is a BOOLEAN key: "true" or "false", in any case, as Kafka reads it.
func boolean(field func(m *ManagerConfig) *bool) parser {
	return func(m *ManagerConfig, raw string) string {
		switch strings.ToLower(strings.TrimSpace(raw)) {
		case "true":
			*field(m) = true
		case "false":
			*field(m) = false
		default:
			return "not true or false"
		}
		return ""
	}
}

// compression is compression.type, a STRING key of Kafka's codec names.
func compression(field func(m *ManagerConfig) *CompressionType) parser {
	return func(m *ManagerConfig, raw string) string {
		t, ok := compressionTypes[strings.ToLower(strings.TrimSpace(raw))]
		if !ok {
			return "not one of uncompressed, zstd, lz4, snappy, gzip, producer"
		}
		*field(m) = t
		return ""
	}
}

// policy is cleanup.policy, a LIST key of "delete" and "compact".
func policy(field func(m *ManagerConfig) *CleanupPolicy) parser {
	return func(m *ManagerConfig, raw string) string {
		p, err := ParseCleanupPolicy(raw)
		if err != nil {
			return err.Error()
		}
		*field(m) = p
		return ""
	}
}

func durationOf(v, unit int64) time.Duration {
	if v < 0 {
		return time.Duration(v) // -1 and friends keep their "off" meaning
	}
	if v > int64(Never/time.Millisecond)/unit {
		return Never
	}
	return time.Duration(v*unit) * time.Millisecond
}

var keys = []key{
	{"segment.bytes", "log.segment.bytes", 0, long(14, func(m *ManagerConfig, v int64) { m.Log.SegmentBytes = v })},
	{"segment.ms", "log.roll.ms", 1, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.SegmentMs })},
	{"", "log.roll.hours", 0, duration(1, 3600_000, func(m *ManagerConfig) *time.Duration { return &m.Log.SegmentMs })},
	{"segment.index.bytes", "log.index.size.max.bytes", 0, long(8, func(m *ManagerConfig, v int64) { m.Log.SegmentIndexBytes = int(min(v, math.MaxInt32)) })},
	{"index.interval.bytes", "log.index.interval.bytes", 0, long(0, func(m *ManagerConfig, v int64) { m.Log.IndexIntervalBytes = int(min(v, math.MaxInt32)) })},
	{"flush.messages", "log.flush.interval.messages", 0, long(1, func(m *ManagerConfig, v int64) { m.Log.FlushMessages = v })},
	{"flush.ms", "log.flush.interval.ms", 0, duration(0, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.FlushMs })},
	{"retention.ms", "log.retention.ms", 2, duration(-1, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.RetentionMs })},
	{"", "log.retention.minutes", 1, duration(-1, 60_000, func(m *ManagerConfig) *time.Duration { return &m.Log.RetentionMs })},
	{"", "log.retention.hours", 0, duration(-1, 3600_000, func(m *ManagerConfig) *time.Duration { return &m.Log.RetentionMs })},
	{"retention.bytes", "log.retention.bytes", 0, long(math.MinInt64, func(m *ManagerConfig, v int64) { m.Log.RetentionBytes = v })},
	{"file.delete.delay.ms", "log.segment.delete.delay.ms", 0, duration(0, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.FileDeleteDelay })},
	{"cleanup.policy", "log.cleanup.policy", 0, policy(func(m *ManagerConfig) *CleanupPolicy { return &m.Log.CleanupPolicy })},
	{"delete.retention.ms", "log.cleaner.delete.retention.ms", 0, duration(0, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.DeleteRetention })},
	{"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", 0, ratio(func(m *ManagerConfig) *float64 { return &m.Log.MinCleanableDirtyRatio })},
	{"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", 0, duration(0, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.MinCompactionLag })},
	{"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", 0, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.Log.MaxCompactionLag })},
	{"compression.type", "compression.type", 0, compression(func(m *ManagerConfig) *CompressionType { return &m.Log.CompressionType })},
	{"", "log.retention.check.interval.ms", 0, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.RetentionCheckInterval })},
	{"", "log.flush.scheduler.interval.ms", 0, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.FlushCheckInterval })},
	{"", "log.flush.offset.checkpoint.interval.ms", 0, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.RecoveryPointCheckpointInterval })},
	{"", "log.flush.start.offset.checkpoint.interval.ms", 0, duration(1, 1, func(m *ManagerConfig) *time.Duration { return &m.LogStartOffsetCheckpointInterval })},
	{"", "log.cleaner.enable", 0, boolean(func(m *ManagerConfig) *bool { return &m.CleanerEnable })},
	{"", "log.cleaner.backoff.ms", 0, duration(0, 1, func(m *ManagerConfig) *time.Duration { return &m.CleanerBackoff })},
	{"", "log.cleaner.dedupe.buffer.size", 0, long(minDedupeBufferSize, func(m *ManagerConfig, v int64) { m.CleanerDedupeBufferSize = v })},
}

// BrokerKeys lists the broker-level keys ParseManagerConfig understands, so
// a broker can tell its own unknown keys from the log's.
func BrokerKeys() []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.broker)
	}
	return out
}

// TopicKeys lists the topic-level keys Config.Override understands.
func TopicKeys() []string {
	var out []string
	for _, k := range keys {
		if k.topic != "" {
			out = append(out, k.topic)
		}
	}
	return out
}

// ParseManagerConfig reads the broker-level log keys of props over Kafka's
// defaults. Keys it does not know are left for the caller; a bad value is
// a *ConfigError naming the key.
func ParseManagerConfig(props map[string]string) (ManagerConfig, error) {
	m := DefaultManagerConfig()
	err := apply(&m, props, func(k key) string { return k.broker })
	return m, err
}

// Override returns c with the topic-level keys of props applied, as a topic's
// own configs override the broker's defaults. Unknown keys are an error.
func (c Config) Override(props map[string]string) (Config, error) {
	known := map[string]bool{}
	for _, k := range keys {
		known[k.topic] = true
	}
	for name, v := range props {
		if !known[name] || name == "" {
			return c, &ConfigError{Key: name, Value: v, Reason: "unknown topic configuration"}
		}
	}
	m := ManagerConfig{Log: c}
	err := apply(&m, props, func(k key) string { return k.topic })
	return m.Log, err
}

// apply parses and stores every key named by name(k) that props holds,
// lower-precedence keys first so that the most precise one wins.
func apply(m *ManagerConfig, props map[string]string, name func(key) string) error {
	ordered := append([]key(nil), keys...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].rank < ordered[j].rank })
	for _, k := range ordered {
		n := name(k)
		if n == "" {
			continue
		}
		raw, ok := props[n]
		if !ok {
			continue
		}
		if reason := k.parse(m, raw); reason != "" {
			return &ConfigError{Key: n, Value: raw, Reason: reason}
		}
	}
	return nil
}
