package cluster_test

import (
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

// The seams stage 04 plugs into this harness: Options.NewServer.

func startClusterWith(t *testing.T, n int, opts cluster.Options) *testCluster {
	t.Helper()
	opts.Dir, opts.Logger = t.TempDir(), quietLogger
	c, err := cluster.Start(n, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &testCluster{Cluster: c, t: t}
}

// Stage 04's brokers read keys that stage 03's configuration refuses: its
// NewServer builds them, for every start and restart, from the keys the
// cluster computes.
func TestNewServerBuildsEveryBrokerTheClusterStarts(t *testing.T) {
	props := map[string]string{"stage04.only.key": "42"}
	_, err := cluster.Start(1, cluster.Options{Dir: t.TempDir(), Props: props, Logger: quietLogger})
	require.ErrorContains(t, err, "stage04.only.key", "without the seam, stage 03's ParseConfig refuses the key")

	var mu sync.Mutex
	var built []string                    // broker.id of each call
	servers := map[int32]*server.Server{} // the last server built for each id
	logDirs := map[int32]string{}
	c := startClusterWith(t, 2, cluster.Options{Props: props,
		NewServer: func(props map[string]string, logger *slog.Logger) (*server.Server, error) {
			if props["stage04.only.key"] != "42" || logger == nil {
				return nil, fmt.Errorf("props %v, logger %v", props, logger)
			}
			own := maps.Clone(props)
			delete(own, "stage04.only.key") // stage 04's own broker would read it
			cfg, err := server.ParseConfig(own, logger)
			if err != nil {
				return nil, err
			}
			s, err := server.New(cfg, server.Options{Logger: logger})
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			built = append(built, props["broker.id"])
			servers[cfg.Broker.BrokerID] = s
			logDirs[cfg.Broker.BrokerID] = props["log.dirs"]
			return s, nil
		}})
	c.stop(1)
	c.start(1)

	mu.Lock()
	require.Equal(t, []string{"0", "1", "1"}, built, "one call per start, restarts included")
	for _, id := range c.IDs() {
		b, ok := c.Broker(id)
		require.True(t, ok)
		require.Same(t, servers[id], b, "the cluster runs the server NewServer built")
		require.Equal(t, c.LogDir(id), logDirs[id])
	}
	mu.Unlock()

	// The brokers it built replicate like any other.
	c.createTopic("built", 1, 2)
	p := tp("built", 0)
	c.produce(p, kgo.AllISRAcks(), "v")
	c.waitInSync(p)
}
