package ceiling_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
)

// TestMain builds the stage 06 broker command, which BenchmarkBrokerCeiling
// runs as separate processes.
func TestMain(m *testing.M) {
	brokertest.MainWith(m, "github.com/kafkaworkbook/workbook/stage06-performance/cmd/broker")
}

var quiet = slog.New(slog.DiscardHandler)

// startStage02 starts a stage 02 broker in this process, on 127.0.0.1 with
// its log directory in a temp dir; props are Kafka keys that override the
// defaults (num.network.threads, num.io.threads).
func startStage02(tb testing.TB, props map[string]string) *broker.Broker {
	tb.Helper()
	all := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(tb.TempDir(), "kafka-logs"),
	}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := broker.ParseConfig(all, quiet)
	if err != nil {
		tb.Fatal(err)
	}
	br, err := broker.New(cfg, broker.Options{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	if err := br.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { br.Shutdown(context.Background()) })
	return br
}
