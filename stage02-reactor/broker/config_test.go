package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// kafkaServerProperties is Kafka's own config/server.properties (2.6),
// comments shortened: the broker must start from it.
const kafkaServerProperties = `
# The id of the broker. This must be set to a unique integer for each broker.
broker.id=0
#listeners=PLAINTEXT://:9092
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
`

func TestKafkasOwnServerPropertiesParses(t *testing.T) {
	props, err := store.ParseProperties(kafkaServerProperties)
	require.NoError(t, err)
	cfg, err := ParseConfig(props, quietLogger)
	require.NoError(t, err)
	require.Equal(t, int32(0), cfg.BrokerID)
	require.Equal(t, "/tmp/kafka-logs", cfg.LogDir)
	require.Equal(t, 3, cfg.Network.NumNetworkThreads)
	require.Equal(t, 8, cfg.Network.NumIOThreads)
	require.Equal(t, 168*time.Hour, cfg.Log.Log.RetentionMs)
	require.Equal(t, "127.0.0.1:9092", cfg.Listener)
}

func TestBadConfigNamesTheKeyAndValue(t *testing.T) {
	tests := map[string]struct {
		props map[string]string
		want  string
	}{
		"unknown key":           {map[string]string{"num.io.thread": "8"}, `invalid value "8" for configuration num.io.thread: unknown configuration key`},
		"not a number":          {map[string]string{"num.io.threads": "eight"}, `invalid value "eight" for configuration num.io.threads: not a number`},
		"out of range":          {map[string]string{"num.network.threads": "0"}, `invalid value "0" for configuration num.network.threads: value must be in [1, 1024]`},
		"not a boolean":         {map[string]string{"auto.create.topics.enable": "yes please"}, `configuration auto.create.topics.enable: not a boolean`},
		"no plaintext listener": {map[string]string{"listeners": "SSL://:9093"}, `configuration inter.broker.listener.name: the inter-broker listener PLAINTEXT is not a listener`},
		"two log dirs":          {map[string]string{"log.dirs": "/a,/b"}, `configuration log.dirs: more than one log directory is not supported`},
		"log key":               {map[string]string{"log.segment.bytes": "1k"}, `invalid value "1k" for configuration log.segment.bytes`},
		"no host to offer":      {map[string]string{"listeners": "PLAINTEXT://:9092"}, `configuration advertised.listeners: clients need a host`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(tt.props, quietLogger)
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tt.want), "%v", err)
		})
	}
}

func TestAdvertisedListenerWhenListeningOnAllInterfaces(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"listeners":            "PLAINTEXT://0.0.0.0:9092",
		"advertised.listeners": "PLAINTEXT://broker-1.example:19092",
	}, quietLogger)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9092", cfg.Listener)
	require.Equal(t, "broker-1.example", cfg.AdvertisedHost)
	require.Equal(t, int32(19092), cfg.AdvertisedPort)
}

func TestParseArgs(t *testing.T) {
	props, err := ParseArgs([]string{"--override", "a=1", "--override=b = 2"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1", "b": "2"}, props)
	_, err = ParseArgs([]string{"--override"})
	require.Error(t, err)
	_, err = ParseArgs([]string{"--overide", "a=1"})
	require.ErrorContains(t, err, "unknown flag --overide")
	_, err = ParseArgs([]string{"--override", "novalue"})
	require.ErrorContains(t, err, "want key=value")
}
