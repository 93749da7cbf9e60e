package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
)

var quiet = slog.New(slog.DiscardHandler)

func TestParseConfigReadsTheISRAndAcksKeysWithKafkasDefaults(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"broker.id": "1"}, quiet)
	require.NoError(t, err)
	require.Equal(t, isr.DefaultLagTimeMax, cfg.LagTimeMax, "30 s since Kafka 2.5")
	require.Equal(t, TopicConfig{MinInsyncReplicas: 1}, cfg.Topic)
	require.Equal(t, 7*24*time.Hour, cfg.ProducerIDExpiration, "transactional.id.expiration.ms")
	require.Equal(t, 10*time.Minute, cfg.ProducerIDExpirationCheck)
	require.Equal(t, isr.IsrChangePropagationConfig{CheckInterval: 2500 * time.Millisecond, Linger: 5 * time.Second, MaxDelay: time.Minute},
		cfg.IsrChangePropagation, "Kafka's fixed values")

	cfg, err = ParseConfig(map[string]string{KeyLagTimeMax: "10000", KeyMinInsyncReplicas: "2", KeyUncleanLeaderElection: "true",
		"replica.fetch.wait.max.ms": "100", KeyIsrChangePropagationCheckInterval: "10", KeyIsrChangePropagationLinger: "50",
		KeyIsrChangePropagationMaxDelay: "1000"}, quiet)
	require.NoError(t, err)
	require.Equal(t, isr.IsrChangePropagationConfig{CheckInterval: 10 * time.Millisecond, Linger: 50 * time.Millisecond, MaxDelay: time.Second},
		cfg.IsrChangePropagation)
	require.Equal(t, 10*time.Second, cfg.LagTimeMax)
	require.Equal(t, TopicConfig{MinInsyncReplicas: 2, UncleanLeaderElection: true}, cfg.Topic)
	require.Equal(t, 100*time.Millisecond, cfg.Replica.FetchWaitMax, "stage 03's keys still read")
}

func TestBadConfigNamesTheKeyAndTheValue(t *testing.T) {
	for props, want := range map[[2]string]string{
		{KeyMinInsyncReplicas, "0"}:        `invalid value "0" for configuration min.insync.replicas: value must be in [1, 2147483647]`,
		{KeyLagTimeMax, "soon"}:            `invalid value "soon" for configuration replica.lag.time.max.ms: not a number`,
		{KeyUncleanLeaderElection, "yes!"}: `invalid value "yes!" for configuration unclean.leader.election.enable: not true or false`,
	} {
		_, err := ParseConfig(map[string]string{props[0]: props[1]}, quiet)
		require.EqualError(t, err, want)
	}
	c := topicConfigs{defaults: DefaultTopicConfig()}
	require.ErrorContains(t, c.set("orders", map[string]string{"retention.ms": "1"}), "retention.ms")
	require.NoError(t, c.set("orders", map[string]string{KeyMinInsyncReplicas: "3"}))
	require.Equal(t, 3, c.get("orders").MinInsyncReplicas)
	require.Equal(t, 1, c.get("other").MinInsyncReplicas, "the broker default")
}
