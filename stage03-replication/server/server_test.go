package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

func TestNewReportsABadHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, replica.HighWatermarkCheckpointFile), []byte("0\n1\ngarbage\n"), 0o644))
	cfg, err := ParseConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "malformed checkpoint", "an error, not a panic")
}
