package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// startBroker starts a stage 02 broker in this process on 127.0.0.1.
func startBroker(t *testing.T) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	cfg, err := broker.ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "kafka-logs"),
	}, quiet)
	require.NoError(t, err)
	br, err := broker.New(cfg, broker.Options{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, br.Start())
	t.Cleanup(func() { br.Shutdown(context.Background()) })
	return br.Addr().String()
}

var (
	progressLine = regexp.MustCompile(`^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency\.$`)
	summaryLine  = regexp.MustCompile(`^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$`)
)

// TestPrintsProgressAndASummaryLikeKafkasPerfTest: two reporting intervals
// make two progress lines and a summary; the topic is created, and the
// end-offset check passes (run returns no error).
func TestPrintsProgressAndASummaryLikeKafkasPerfTest(t *testing.T) {
	addr := startBroker(t)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-addr", addr, "-topic", "perf", "-partitions", "3", "-conns", "2",
		"-inflight", "4", "-batch", "50", "-duration", "400ms", "-reporting-interval", "200ms", "-acks", "all"}, &out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	require.Regexp(t, progressLine, lines[0])
	require.Regexp(t, progressLine, lines[1])
	require.Regexp(t, summaryLine, lines[2])
}

func TestRunsAgainOnAnExistingTopic(t *testing.T) {
	addr := startBroker(t)
	for range 2 {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"-addr", addr, "-topic", "again", "-duration", "100ms",
			"-reporting-interval", "100ms", "-batch", "10"}, &out))
		require.Regexp(t, summaryLine, strings.TrimSpace(out.String())[strings.LastIndexByte(strings.TrimSpace(out.String()), '\n')+1:])
	}
}

func TestRefusesAcksZero(t *testing.T) {
	err := run(context.Background(), []string{"-acks", "0"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "acks=0")
}

func TestNeedsAnExistingTopicWithoutCreate(t *testing.T) {
	addr := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	err := run(ctx, []string{"-addr", addr, "-topic", "absent", "-create=false", "-duration", "100ms"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "UNKNOWN_TOPIC_OR_PARTITION")
	require.ErrorContains(t, err, "must be led by "+addr)
}
