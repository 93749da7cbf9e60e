package commitlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

func TestDefaultsAreKafkas(t *testing.T) {
	c := DefaultConfig()
	require.Equal(t, int64(1073741824), c.SegmentBytes)
	require.Equal(t, 168*time.Hour, c.SegmentMs)
	require.Equal(t, 10485760, c.SegmentIndexBytes)
	require.Equal(t, 4096, c.IndexIntervalBytes)
	require.Equal(t, Never, c.FlushMs)
	require.Equal(t, 168*time.Hour, c.RetentionMs)
	require.Equal(t, int64(-1), c.RetentionBytes)
	require.Equal(t, time.Minute, c.FileDeleteDelay)
	m := DefaultManagerConfig()
	require.Equal(t, 5*time.Minute, m.RetentionCheckInterval)
}

func TestParseManagerConfigReadsBrokerKeys(t *testing.T) {
	m, err := ParseManagerConfig(map[string]string{
		"log.segment.bytes":               "1048576",
		"log.retention.hours":             "1",
		"log.flush.interval.messages":     "1000",
		"log.flush.interval.ms":           "9223372036854775807",
		"log.retention.check.interval.ms": "1000",
		"broker.id":                       "7", // not a log key: left to the caller
	})
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), m.Log.SegmentBytes)
	require.Equal(t, time.Hour, m.Log.RetentionMs)
	require.Equal(t, int64(1000), m.Log.FlushMessages)
	require.Equal(t, Never, m.Log.FlushMs)
	require.Equal(t, time.Second, m.RetentionCheckInterval)
}

func TestMostPreciseRetentionKeyWins(t *testing.T) {
	m, err := ParseManagerConfig(map[string]string{
		"log.retention.hours":   "5",
		"log.retention.ms":      "1234",
		"log.retention.minutes": "3",
	})
	require.NoError(t, err)
	require.Equal(t, 1234*time.Millisecond, m.Log.RetentionMs)
	m, err = ParseManagerConfig(map[string]string{"log.retention.hours": "5", "log.retention.minutes": "3"})
	require.NoError(t, err)
	require.Equal(t, 3*time.Minute, m.Log.RetentionMs)
}

func TestBadValuesNameTheKeyAndValue(t *testing.T) {
	_, err := ParseManagerConfig(map[string]string{"log.segment.bytes": "lots"})
	require.EqualError(t, err, `invalid value "lots" for configuration log.segment.bytes: not a number of type long`)
	_, err = ParseManagerConfig(map[string]string{"log.segment.bytes": "10"})
	require.EqualError(t, err, `invalid value "10" for configuration log.segment.bytes: value must be at least 14`)
	_, err = DefaultConfig().Override(map[string]string{"segment.bytez": "10"})
	require.EqualError(t, err, `invalid value "10" for configuration segment.bytez: unknown topic configuration`)
}

func TestTopicOverrides(t *testing.T) {
	c, err := DefaultConfig().Override(map[string]string{"retention.ms": "-1", "segment.bytes": "1000"})
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), c.RetentionMs)
	require.Equal(t, int64(1000), c.SegmentBytes)
	require.Contains(t, TopicKeys(), "retention.bytes")
	require.Contains(t, BrokerKeys(), "log.roll.hours")
}

func TestCleanerKeysParseWithKafkasNamesAndDefaults(t *testing.T) {
	c := DefaultConfig()
	require.Equal(t, CleanupDelete, c.CleanupPolicy)
	require.Equal(t, 24*time.Hour, c.DeleteRetention)
	require.Equal(t, 0.5, c.MinCleanableDirtyRatio)
	require.Equal(t, time.Duration(0), c.MinCompactionLag)
	require.Equal(t, Never, c.MaxCompactionLag)
	d := DefaultManagerConfig()
	require.True(t, d.CleanerEnable)
	require.Equal(t, 15*time.Second, d.CleanerBackoff)
	require.Equal(t, int64(128<<20), d.CleanerDedupeBufferSize)

	m, err := ParseManagerConfig(map[string]string{
		"log.cleanup.policy":                "compact,delete",
		"log.cleaner.delete.retention.ms":   "1000",
		"log.cleaner.min.cleanable.ratio":   "0.25",
		"log.cleaner.min.compaction.lag.ms": "2000",
		"log.cleaner.max.compaction.lag.ms": "3000",
		"log.cleaner.enable":                "FALSE",
		"log.cleaner.backoff.ms":            "50",
		"log.cleaner.dedupe.buffer.size":    "1048576",
	})
	require.NoError(t, err)
	require.Equal(t, CleanupCompact|CleanupDelete, m.Log.CleanupPolicy)
	require.Equal(t, time.Second, m.Log.DeleteRetention)
	require.Equal(t, 0.25, m.Log.MinCleanableDirtyRatio)
	require.Equal(t, 2*time.Second, m.Log.MinCompactionLag)
	require.Equal(t, 3*time.Second, m.Log.MaxCompactionLag)
	require.False(t, m.CleanerEnable)
	require.Equal(t, 50*time.Millisecond, m.CleanerBackoff)
	require.Equal(t, int64(1<<20), m.CleanerDedupeBufferSize)

	for value, want := range map[string]CleanupPolicy{"compact": CleanupCompact, "delete": CleanupDelete,
		"delete,compact": CleanupCompact | CleanupDelete, " compact , delete ": CleanupCompact | CleanupDelete} {
		c, err := DefaultConfig().Override(map[string]string{"cleanup.policy": value})
		require.NoError(t, err, value)
		require.Equal(t, want, c.CleanupPolicy, value)
	}
	c, err = DefaultConfig().Override(map[string]string{"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "0",
		"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "20"})
	require.NoError(t, err)
	require.Equal(t, 0.0, c.MinCleanableDirtyRatio)
	require.Equal(t, "compact,delete", (CleanupCompact | CleanupDelete).String())
	require.Subset(t, TopicKeys(), []string{"cleanup.policy", "delete.retention.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms"})
	require.Subset(t, BrokerKeys(), []string{"log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size"})
}

func TestBadCleanerValuesNameTheKeyAndValue(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"cleanup.policy", "rubbish", `invalid value "rubbish" for configuration cleanup.policy: must be a list of delete and compact, got "rubbish"`},
		{"cleanup.policy", "", `invalid value "" for configuration cleanup.policy: must be a list of delete and compact, got ""`},
		{"cleanup.policy", "compact,", `invalid value "compact," for configuration cleanup.policy: must be a list of delete and compact, got ""`},
		{"min.cleanable.dirty.ratio", "1.5", `invalid value "1.5" for configuration min.cleanable.dirty.ratio: value must be between 0 and 1`},
		{"min.cleanable.dirty.ratio", "half", `invalid value "half" for configuration min.cleanable.dirty.ratio: not a number of type double`},
		{"min.cleanable.dirty.ratio", "NaN", `invalid value "NaN" for configuration min.cleanable.dirty.ratio: value must be between 0 and 1`},
		{"delete.retention.ms", "-5", `invalid value "-5" for configuration delete.retention.ms: value must be at least 0`},
		{"max.compaction.lag.ms", "0", `invalid value "0" for configuration max.compaction.lag.ms: value must be at least 1`},
	} {
		_, err := DefaultConfig().Override(map[string]string{tc.key: tc.value})
		require.EqualError(t, err, tc.want)
	}
	_, err := ParseManagerConfig(map[string]string{"log.cleaner.enable": "maybe"})
	require.EqualError(t, err, `invalid value "maybe" for configuration log.cleaner.enable: not true or false`)
	_, err = ParseManagerConfig(map[string]string{"log.cleaner.dedupe.buffer.size": "0"})
	require.EqualError(t, err, `invalid value "0" for configuration log.cleaner.dedupe.buffer.size: value must be at least 1`)
	_, err = ParseManagerConfig(map[string]string{"log.cleanup.policy": "compact;delete"})
	require.EqualError(t, err, `invalid value "compact;delete" for configuration log.cleanup.policy: must be a list of delete and compact, got "compact;delete"`)
}

// TestCompressionTypeTakesKafkasNames: compression.type takes producer
// (the default), uncompressed and the four codecs, in any case; anything
// else names the key and the value.
func TestCompressionTypeTakesKafkasNames(t *testing.T) {
	require.Equal(t, CompressionProducer, DefaultConfig().CompressionType)
	for name, want := range map[string]record.Codec{"uncompressed": record.CodecNone, "gzip": record.CodecGzip,
		"snappy": record.CodecSnappy, "LZ4": record.CodecLZ4, "zstd": record.CodecZstd} {
		c, err := DefaultConfig().Override(map[string]string{"compression.type": name})
		require.NoError(t, err, name)
		codec, ok := c.CompressionType.Codec()
		require.True(t, ok, name)
		require.Equal(t, want, codec, name)
	}
	c, err := DefaultConfig().Override(map[string]string{"compression.type": "producer"})
	require.NoError(t, err)
	_, ok := c.CompressionType.Codec()
	require.False(t, ok)
	_, err = DefaultConfig().Override(map[string]string{"compression.type": "brotli"})
	require.ErrorContains(t, err, "compression.type")
	require.ErrorContains(t, err, "brotli")
	m, err := ParseManagerConfig(map[string]string{"compression.type": "zstd"})
	require.NoError(t, err)
	require.Equal(t, CompressionType(record.CodecZstd), m.Log.CompressionType, "the broker-level key has the same name")
}
