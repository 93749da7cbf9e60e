package producer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// TestConfigDefaultsAreKafka3s: the keys left out take Kafka 3.x's
// producer defaults.
func TestConfigDefaultsAreKafka3s(t *testing.T) {
	c, err := producer.ParseConfig(map[string]string{"bootstrap.servers": "127.0.0.1:9092, 127.0.0.1:9093"})
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:9092", "127.0.0.1:9093"}, c.BootstrapServers)
	require.Equal(t, int16(-1), c.Acks)
	require.True(t, c.Idempotence)
	require.Equal(t, 16384, c.BatchSize)
	require.Equal(t, time.Duration(0), c.Linger)
	require.Equal(t, int64(33554432), c.BufferMemory)
	require.Equal(t, 60*time.Second, c.MaxBlock)
	require.Equal(t, 5, c.MaxInFlight)
	require.Equal(t, 120*time.Second, c.DeliveryTimeout)
	require.Equal(t, 30*time.Second, c.RequestTimeout)
	require.Equal(t, record.CodecNone, c.Compression)
	require.Equal(t, 1048576, c.MaxRequestSize)

	c, err = producer.ParseConfig(map[string]string{"bootstrap.servers": "b:9092", "acks": "1", "compression.type": "zstd",
		"linger.ms": "5", "client.id": "perf"})
	require.NoError(t, err)
	require.False(t, c.Idempotence, "acks=1 turns idempotence off when it was left at its default (Kafka 3.2+)")
	require.Equal(t, record.CodecZstd, c.Compression)
	require.Equal(t, 5*time.Millisecond, c.Linger)
	require.Equal(t, "perf", c.ClientID)
}

// TestConfigErrorsNameTheKeyAndTheValue: every refusal says which key and
// which value.
func TestConfigErrorsNameTheKeyAndTheValue(t *testing.T) {
	for name, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"acks":             {map[string]string{"acks": "2"}, `acks="2": must be all, -1, 0 or 1`},
		"not a number":     {map[string]string{"batch.size": "16k"}, `batch.size="16k": not an integer`},
		"negative":         {map[string]string{"linger.ms": "-1"}, `linger.ms="-1": must be in [0, 2147483647]`},
		"codec":            {map[string]string{"compression.type": "brotli"}, `compression.type="brotli": must be none, gzip, snappy, lz4 or zstd`},
		"bool":             {map[string]string{"enable.idempotence": "maybe"}, `enable.idempotence="maybe"`},
		"unknown":          {map[string]string{"linger": "5"}, `linger="5": unknown key`},
		"idempotence acks": {map[string]string{"enable.idempotence": "true", "acks": "1"}, `acks=1: must be all (-1) with enable.idempotence=true`},
		"idempotence in flight": {map[string]string{"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"},
			`max.in.flight.requests.per.connection=6: must be at most 5 with enable.idempotence=true`},
		"delivery timeout": {map[string]string{"delivery.timeout.ms": "1000"}, `delivery.timeout.ms=1000: must be at least linger.ms + request.timeout.ms = 30000`},
		"no servers":       {map[string]string{"bootstrap.servers": " "}, `bootstrap.servers is empty`},
	} {
		t.Run(name, func(t *testing.T) {
			props := map[string]string{"bootstrap.servers": "127.0.0.1:9092"}
			for k, v := range tc.props {
				props[k] = v
			}
			_, err := producer.ParseConfig(props)
			require.ErrorIs(t, err, producer.ErrConfig)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
