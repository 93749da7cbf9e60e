package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/final/faults"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// startCluster starts a cluster for t under a unique name, removed when t
// ends; the brokers' last lines are printed first if t failed. The
// containers carry zktest's labels (the test's name, the process's id), so
// that the next harness removes them if this process dies first.
// The brokers' whole logs are saved under $TMPDIR/<cluster name> first
// if t failed.
func startCluster(t *testing.T, ctx context.Context) *cluster.Cluster {
	t.Helper()
	name := fmt.Sprintf("faults-%d", time.Now().UnixNano()%1e9)
	c, err := cluster.Up(ctx, cluster.Config{Name: name, Labels: zktest.Labels(t), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			dir := filepath.Join(os.TempDir(), name)
			os.MkdirAll(dir, 0o755)
			for _, b := range c.Brokers() {
				logs, err := c.Logs(ctx, b.Name, 1_000_000)
				os.WriteFile(filepath.Join(dir, b.Name+".log"), []byte(logs), 0o644)
				t.Logf("---- the end of %s's log (%v; all of it in %s)\n%s", b.Name, err, dir, tail(logs, 30))
			}
		}
		require.NoError(t, cluster.Down(ctx, name))
	})
	return c
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// finish prints the report, saves it to path (if any), and fails t on
// what the report found.
func finish(t *testing.T, rep *faults.Report, path string) {
	t.Helper()
	var buf bytes.Buffer
	rep.WriteTo(&buf)
	t.Logf("\n%s", buf.String())
	if path != "" {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		png := strings.TrimSuffix(path, filepath.Ext(path)) + ".png"
		require.NoError(t, rep.SavePlot(png))
		t.Logf("report saved to %s, its figure to %s", path, png)
	}
	for _, f := range rep.Failed {
		t.Errorf("%s", f)
	}
}

// TestFaultsShort: under acks=all producers and a consumer group, a
// partition leader killed with kill -9, a leader cut from its followers,
// a follower frozen past its ZooKeeper session, a ZooKeeper server
// killed, the controller killed, a leader frozen past its session, a
// leader's controlled shutdown and a full-cluster restart, one after
// another, each healed: nothing acknowledged is lost, duplicated or
// reordered, the group delivers every acknowledged record, every
// replica holds the same batches, and the transactional writers' topic,
// read read_committed, holds every committed transaction whole and no
// aborted one.
func TestFaultsShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c := startCluster(t, ctx)
	rep, err := faults.Run(ctx, c, faults.Config{
		Faults: []faults.Kind{faults.LeaderKill, faults.LeaderCut, faults.FollowerPause, faults.ZooKeeperKill,
			faults.ControllerKill, faults.LeaderPause, faults.Bounce, faults.FullRestart},
		Seed: 1,
		Logf: t.Logf,
	})
	require.NoError(t, err)
	rep.Command = "cd final && go test -race -count=1 -run TestFaultsShort -v ./faults"
	finish(t, rep, os.Getenv("FAULTS_REPORT"))
}

// TestFaultsRandom is `make faults`: faults drawn at random with a seed
// (FAULTS_SEED, printed; a new one each run if unset), FAULTS_COUNT of
// them or as many as fit in FAULTS_DURATION (default 10m), optionally
// only the kinds in FAULTS_KINDS; FAULTS_TXN=0 leaves the transactional
// workload out. The report is saved to FAULTS_REPORT, else
// report-<seed>.md here. Skipped unless FAULTS_LONG is set: it is
// not part of `make test`.
func TestFaultsRandom(t *testing.T) {
	if os.Getenv("FAULTS_LONG") == "" {
		t.Skip("the long fault run: make faults (or FAULTS_LONG=1)")
	}
	seed, err := faults.SeedFrom(os.Getenv("FAULTS_SEED"))
	require.NoError(t, err)
	cfg := faults.Config{Seed: seed, Logf: t.Logf}
	if s := os.Getenv("FAULTS_COUNT"); s != "" {
		_, err := fmt.Sscan(s, &cfg.Count)
		require.NoError(t, err, "FAULTS_COUNT")
	}
	if s := os.Getenv("FAULTS_DURATION"); s != "" {
		cfg.Duration, err = time.ParseDuration(s)
		require.NoError(t, err, "FAULTS_DURATION")
	}
	if cfg.Count == 0 && cfg.Duration == 0 {
		cfg.Duration = 10 * time.Minute
	}
	var only []faults.Kind
	if s := os.Getenv("FAULTS_KINDS"); s != "" {
		only, err = faults.ParseKinds(s)
		require.NoError(t, err)
	}
	cfg.Kinds = only
	cfg.Txn.Off = os.Getenv("FAULTS_TXN") == "0"
	cmd := fmt.Sprintf("make faults SEED=%d", seed)
	if cfg.Count > 0 {
		cmd += fmt.Sprintf(" FAULTS=%d", cfg.Count)
	}
	if cfg.Duration > 0 {
		cmd += fmt.Sprintf(" DURATION=%v", cfg.Duration)
	}
	if len(only) > 0 {
		cmd += " KINDS=" + os.Getenv("FAULTS_KINDS")
	}
	t.Logf("seed %d: %s repeats this run's choices", seed, cmd)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+time.Duration(max(cfg.Count, 1))*3*time.Minute+15*time.Minute)
	defer cancel()
	c := startCluster(t, ctx)
	rep, err := faults.Run(ctx, c, cfg)
	require.NoError(t, err)
	rep.Command = cmd
	path := os.Getenv("FAULTS_REPORT")
	if path == "" {
		path = fmt.Sprintf("report-%d.md", seed)
	}
	finish(t, rep, strings.TrimSpace(path))
}
