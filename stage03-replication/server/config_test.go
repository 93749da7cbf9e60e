package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseConfigReadsBrokerAndReplicaKeys(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"broker.id":                 "2",
		"replica.fetch.wait.max.ms": "250",
		"replica.fetch.max.bytes":   "65536",
		"num.io.threads":            "4",
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, int32(2), cfg.Replica.BrokerID)
	require.Equal(t, 250*time.Millisecond, cfg.Replica.FetchWaitMax)
	require.Equal(t, int32(65536), cfg.Replica.FetchMaxBytes)
	require.Equal(t, time.Second, cfg.Replica.FetchBackoff, "Kafka's default")
	require.Equal(t, 4, cfg.Broker.Network.NumIOThreads)
}

func TestParseConfigNamesABadReplicaKey(t *testing.T) {
	_, err := ParseConfig(map[string]string{"replica.fetch.backoff.ms": "soon"}, slog.New(slog.DiscardHandler))
	require.EqualError(t, err, `invalid value "soon" for configuration replica.fetch.backoff.ms: not a number`)
	_, err = ParseConfig(map[string]string{"replica.fetch.max.byte": "1"}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "replica.fetch.max.byte: unknown configuration key")
}
