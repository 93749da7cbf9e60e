package commitlog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
