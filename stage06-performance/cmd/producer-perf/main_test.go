package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlagsAreKafkaProducerPerfTests: kafka-producer-perf-test's flags,
// --producer-props taking every key=value that follows.
func TestFlagsAreKafkaProducerPerfTests(t *testing.T) {
	o, err := parseArgs([]string{"--topic", "t", "--num-records", "1000", "--record-size=100", "--throughput", "-1",
		"--producer-props", "bootstrap.servers=127.0.0.1:9092", "acks=1", "linger.ms=5", "-client", "franz-go"})
	require.NoError(t, err)
	require.Equal(t, options{topic: "t", records: 1000, size: 100, throughput: -1, client: "franz-go", interval: 5 * time.Second,
		props: map[string]string{"bootstrap.servers": "127.0.0.1:9092", "acks": "1", "linger.ms": "5"}}, o)

	o, err = parseArgs([]string{"--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "500",
		"--bootstrap-server", "b:9092"})
	require.NoError(t, err)
	require.Equal(t, "b:9092", o.props["bootstrap.servers"])
	require.Equal(t, "ours", o.client)

	for _, bad := range [][]string{
		{"--num-records", "1", "--record-size", "1", "--bootstrap-server", "b:1"},
		{"--topic", "t", "--num-records", "x", "--record-size", "1", "--bootstrap-server", "b:1"},
		{"--topic", "t", "--num-records", "1", "--record-size", "1"},
		{"--topic", "t", "--num-records", "1", "--record-size", "1", "--bootstrap-server", "b:1", "--producer-props", "acks"},
		{"--topic", "t", "--num-records", "1", "--record-size", "1", "--bootstrap-server", "b:1", "-client", "sarama"},
		{"--topic", "t", "--payload-file", "f"},
	} {
		_, err := parseArgs(bad)
		require.Error(t, err, "%v", bad)
	}
}
