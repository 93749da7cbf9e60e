// Package clustertest runs final/cluster's clusters for tests: the
// brokers of the image `make images` builds from this checkout, on a
// ZooKeeper ensemble's network, started with the launcher that `make
// cluster` and `make run` use, and removed at the test's cleanup (a
// failed test first prints the end of each broker's log).
//
//	c := clustertest.Start(t, cluster.Config{Prometheus: true})
//	c.Kill(ctx, c.Broker(0).Name)
package clustertest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Start starts cfg's cluster (three ZooKeeper servers and three brokers
// unless it says otherwise) under a name of this test's own, and removes
// it at cleanup. Its parts carry zktest's owner labels: a test process
// that dies before its cleanups leaves a cluster the next Start removes.
func Start(t testing.TB, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	removeLeftovers(t)
	if cfg.Name == "" {
		cfg.Name = name(t)
	}
	labels := zktest.Labels(t)
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	cfg.Labels = labels
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Up(ctx, cfg)
	if err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			for _, b := range c.Brokers() {
				tail, _ := c.Logs(ctx, b.Name, 30)
				t.Logf("clustertest: last lines of %s's log:\n%s", b.Name, tail)
			}
		}
		if err := cluster.Down(ctx, c.Name()); err != nil {
			t.Errorf("clustertest: %v", err)
		}
	})
	return c
}

// name is a cluster name for t: its test's name, made a valid container
// name, and this process's id (tests of several packages run at once).
func name(t testing.TB) string {
	base := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	return fmt.Sprintf("ct-%.30s-%d-%d", base, os.Getpid(), time.Now().UnixNano()%1e4)
}

// removeLeftovers removes the clusters of test processes that died
// before their cleanups ran.
func removeLeftovers(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return // Up says what is wrong with the engine
	}
	defer cli.Close()
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", cluster.Label)})
	if err != nil {
		return
	}
	for _, n := range nets.Items {
		if zktest.OwnerGone(n.Labels) {
			name := n.Labels[cluster.Label]
			if err := cluster.Down(ctx, name); err != nil {
				t.Logf("clustertest: remove leftover cluster %s: %v", name, err)
			} else {
				t.Logf("clustertest: removed cluster %s, left by a test process that is gone", name)
			}
		}
	}
}
