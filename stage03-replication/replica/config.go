package replica

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Config is the replication configuration, with Kafka's keys and defaults.
type Config struct {
	BrokerID int32 // broker.id: this replica's id
	// FetchWaitMax is replica.fetch.wait.max.ms: how long a follower's
	// fetch waits at the leader for data. Default 500 ms.
	FetchWaitMax time.Duration
	// FetchMinBytes is replica.fetch.min.bytes. Default 1.
	FetchMinBytes int32
	// FetchMaxBytes is replica.fetch.max.bytes, per partition. Default 1 MiB.
	FetchMaxBytes int32
	// FetchResponseMaxBytes is replica.fetch.response.max.bytes. Default 10 MiB.
	FetchResponseMaxBytes int32
	// FetchBackoff is replica.fetch.backoff.ms: the pause after a fetch
	// error. Default 1 s.
	FetchBackoff time.Duration
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms. Default 5 s.
	HighWatermarkCheckpointInterval time.Duration
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		FetchWaitMax:                    500 * time.Millisecond,
		FetchMinBytes:                   1,
		FetchMaxBytes:                   1 << 20,
		FetchResponseMaxBytes:           10 << 20,
		FetchBackoff:                    time.Second,
		HighWatermarkCheckpointInterval: 5 * time.Second,
	}
}

// Keys lists the configuration keys ParseConfig reads.
func Keys() []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.name)
	}
	return out
}

var keys = []struct {
	name string
	min  int64
	set  func(c *Config, v int64)
}{
	{"replica.fetch.wait.max.ms", 0, func(c *Config, v int64) { c.FetchWaitMax = time.Duration(v) * time.Millisecond }},
	{"replica.fetch.min.bytes", 1, func(c *Config, v int64) { c.FetchMinBytes = int32(v) }},
	{"replica.fetch.max.bytes", 0, func(c *Config, v int64) { c.FetchMaxBytes = int32(v) }},
	{"replica.fetch.response.max.bytes", 0, func(c *Config, v int64) { c.FetchResponseMaxBytes = int32(v) }},
	{"replica.fetch.backoff.ms", 0, func(c *Config, v int64) { c.FetchBackoff = time.Duration(v) * time.Millisecond }},
	{"replica.high.watermark.checkpoint.interval.ms", 1, func(c *Config, v int64) {
		c.HighWatermarkCheckpointInterval = time.Duration(v) * time.Millisecond
	}},
}

// ParseConfig reads the replica.* keys of props over Kafka's defaults.
func ParseConfig(brokerID int32, props map[string]string) (Config, error) {
	c := DefaultConfig()
	c.BrokerID = brokerID
	for _, k := range keys {
		raw, ok := props[k.name]
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return c, &commitlog.ConfigError{Key: k.name, Value: raw, Reason: "not a number"}
		}
		if v < k.min || v > math.MaxInt32 {
			return c, &commitlog.ConfigError{Key: k.name, Value: raw, Reason: fmt.Sprintf("value must be in [%d, %d]", k.min, math.MaxInt32)}
		}
		k.set(&c, v)
	}
	return c, nil
}
