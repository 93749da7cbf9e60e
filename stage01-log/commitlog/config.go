package commitlog

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
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
}

// DefaultManagerConfig returns Kafka's defaults.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{
		Log:                              DefaultConfig(),
		RetentionCheckInterval:           5 * time.Minute,
		FlushCheckInterval:               Never,
		RecoveryPointCheckpointInterval:  time.Minute,
		LogStartOffsetCheckpointInterval: time.Minute,
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
// and how a value is stored. Hours and minutes variants exist only at the
// broker level; when several are given the most precise wins, as in Kafka.
type key struct {
	topic  string // "" for broker-only keys
	broker string
	min    int64   // smallest allowed value
	unit   int64   // ms per unit for durations (1 for ms), 0 for plain numbers
	rank   int     // precedence among keys that set the same field: higher wins
	set    setFunc // stores the parsed value
}

type setFunc func(m *ManagerConfig, v int64)

func durationOf(v, unit int64) time.Duration {
	if v < 0 {
		return time.Duration(v) // -1 and friends keep their "off" meaning
	}
	if v > int64(Never/time.Millisecond)/unit {
		return Never
	}
	return time.Duration(v*unit) * time.Millisecond
}

func logDuration(f func(c *Config) *time.Duration, unit int64) setFunc {
	return func(m *ManagerConfig, v int64) { *f(&m.Log) = durationOf(v, unit) }
}

func managerDuration(f func(c *ManagerConfig) *time.Duration) setFunc {
	return func(m *ManagerConfig, v int64) { *f(m) = durationOf(v, 1) }
}

var keys = []key{
	{"segment.bytes", "log.segment.bytes", 14, 0, 0, func(m *ManagerConfig, v int64) { m.Log.SegmentBytes = v }},
	{"segment.ms", "log.roll.ms", 1, 1, 1, logDuration(func(c *Config) *time.Duration { return &c.SegmentMs }, 1)},
	{"", "log.roll.hours", 1, 3600_000, 0, logDuration(func(c *Config) *time.Duration { return &c.SegmentMs }, 3600_000)},
	{"segment.index.bytes", "log.index.size.max.bytes", 8, 0, 0, func(m *ManagerConfig, v int64) { m.Log.SegmentIndexBytes = int(min(v, math.MaxInt32)) }},
	{"index.interval.bytes", "log.index.interval.bytes", 0, 0, 0, func(m *ManagerConfig, v int64) { m.Log.IndexIntervalBytes = int(min(v, math.MaxInt32)) }},
	{"flush.messages", "log.flush.interval.messages", 1, 0, 0, func(m *ManagerConfig, v int64) { m.Log.FlushMessages = v }},
	{"flush.ms", "log.flush.interval.ms", 0, 1, 0, logDuration(func(c *Config) *time.Duration { return &c.FlushMs }, 1)},
	{"retention.ms", "log.retention.ms", -1, 1, 2, logDuration(func(c *Config) *time.Duration { return &c.RetentionMs }, 1)},
	{"", "log.retention.minutes", -1, 60_000, 1, logDuration(func(c *Config) *time.Duration { return &c.RetentionMs }, 60_000)},
	{"", "log.retention.hours", -1, 3600_000, 0, logDuration(func(c *Config) *time.Duration { return &c.RetentionMs }, 3600_000)},
	{"retention.bytes", "log.retention.bytes", math.MinInt64, 0, 0, func(m *ManagerConfig, v int64) { m.Log.RetentionBytes = v }},
	{"file.delete.delay.ms", "log.segment.delete.delay.ms", 0, 1, 0, logDuration(func(c *Config) *time.Duration { return &c.FileDeleteDelay }, 1)},
	{"", "log.retention.check.interval.ms", 1, 1, 0, managerDuration(func(m *ManagerConfig) *time.Duration { return &m.RetentionCheckInterval })},
	{"", "log.flush.scheduler.interval.ms", 1, 1, 0, managerDuration(func(m *ManagerConfig) *time.Duration { return &m.FlushCheckInterval })},
	{"", "log.flush.offset.checkpoint.interval.ms", 1, 1, 0, managerDuration(func(m *ManagerConfig) *time.Duration { return &m.RecoveryPointCheckpointInterval })},
	{"", "log.flush.start.offset.checkpoint.interval.ms", 1, 1, 0, managerDuration(func(m *ManagerConfig) *time.Duration { return &m.LogStartOffsetCheckpointInterval })},
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
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return &ConfigError{Key: n, Value: raw, Reason: "not a number of type long"}
		}
		if v < k.min {
			return &ConfigError{Key: n, Value: raw, Reason: fmt.Sprintf("value must be at least %d", k.min)}
		}
		k.set(m, v)
	}
	return nil
}
