package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

// The seams stage 04 plugs into this harness: Options.NewServer (here),
// Options.States and Controller.UpdateMetadata (states_test.go),
// Options.Elect (election_test.go).

func startClusterWith(t *testing.T, n int, opts cluster.Options) *testCluster {
	t.Helper()
	opts.Dir, opts.Logger = t.TempDir(), quietLogger
	c, err := cluster.Start(n, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &testCluster{Cluster: c, t: t}
}

// told is one partition state a broker received from the controller.
type told struct {
	API         string // "LeaderAndIsr" or "UpdateMetadata"
	Broker      int32
	TP          commitlog.TopicPartition
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
	ZKVersion   int32
}

// requestLog records the partition states the controller's LeaderAndIsr
// and UpdateMetadata requests carry, as the brokers receive them.
type requestLog struct {
	mu   sync.Mutex
	told []told // Protected by mu.
}

func (l *requestLog) add(t told) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, t)
}

// take returns, by broker, what was recorded for api, and forgets it.
func (l *requestLog) take(api string) []told {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out, rest []told
	for _, t := range l.told {
		if t.API == api {
			out = append(out, t)
		} else {
			rest = append(rest, t)
		}
	}
	l.told = rest
	slices.SortStableFunc(out, func(a, b told) int { return int(a.Broker - b.Broker) })
	return out
}

// reset forgets everything recorded.
func (l *requestLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = nil
}

// recordingServers is a NewServer that builds stage 03's broker and wraps
// its LeaderAndIsr and UpdateMetadata handlers to record into log.
func recordingServers(log *requestLog) func(map[string]string, *slog.Logger) (*server.Server, error) {
	return func(props map[string]string, logger *slog.Logger) (*server.Server, error) {
		id, err := strconv.Atoi(props["broker.id"])
		if err != nil {
			return nil, err
		}
		cfg, err := server.ParseConfig(props, logger)
		if err != nil {
			return nil, err
		}
		s, err := server.New(cfg, server.Options{Logger: logger})
		if err != nil {
			return nil, err
		}
		for _, api := range s.APIs() {
			handle := api.Handle
			switch api.Key {
			case 4:
				api.Handle = func(r *broker.Request) {
					for _, ts := range r.Body.(*kmsg.LeaderAndISRRequest).TopicStates {
						for _, ps := range ts.PartitionStates {
							log.add(told{"LeaderAndIsr", int32(id), tp(ts.Topic, ps.Partition), ps.Leader, ps.LeaderEpoch, ps.ISR, ps.ZKVersion})
						}
					}
					handle(r)
				}
			case 6:
				api.Handle = func(r *broker.Request) {
					for _, ts := range r.Body.(*kmsg.UpdateMetadataRequest).TopicStates {
						for _, ps := range ts.PartitionStates {
							log.add(told{"UpdateMetadata", int32(id), tp(ts.Topic, ps.Partition), ps.Leader, ps.LeaderEpoch, ps.ISR, ps.ZKVersion})
						}
					}
					handle(r)
				}
			default:
				continue
			}
			s.Register(api)
		}
		return s, nil
	}
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

// TestAPausedFollowerCopiesNothingMore: PauseFetching(true) returns once
// the follower has no fetch in flight. Its fetch parked at the leader
// would otherwise come back with the next record, and a test that pauses
// a follower to keep a record from it would race with it.
func TestAPausedFollowerCopiesNothingMore(t *testing.T) {
	c := startCluster(t, 2)
	p := tp("paused", 0)
	c.createTopic(p.Topic, 1, 2)
	c.produce(p, kgo.AllISRAcks(), "both have it") // the follower's next fetch parks at the leader
	follower, ok := c.Broker(1)
	require.True(t, ok)
	fp, ok := follower.Replicas.Partition(p.Topic, p.Partition)
	require.True(t, ok)
	require.Eventually(t, func() bool { return fp.Log.EndOffset() == 1 }, 10*time.Second, time.Millisecond)

	follower.Replicas.PauseFetching(true)
	c.produce(p, kgo.LeaderAck(), "the leader alone has it")
	require.Never(t, func() bool { return fp.Log.EndOffset() != 1 }, time.Second, 5*time.Millisecond,
		"a paused follower copies nothing, not even through a fetch it had parked")
	follower.Replicas.PauseFetching(false)
	require.Eventually(t, func() bool { return fp.Log.EndOffset() == 2 }, 10*time.Second, time.Millisecond)
}

// TestARestartedBrokerListensWhereItDid: a broker comes back on the port it
// had, as a real one does, so that a client seeded with the first
// addresses can still reach it: a client whose every known address went
// stale (each broker restarted on a new port) stalls for good, as stage
// 04's fault run did with franz-go.
func TestARestartedBrokerListensWhereItDid(t *testing.T) {
	c := startCluster(t, 2)
	seeds := c.Addrs()
	c.createTopic("restarted", 1, 2)
	p := tp("restarted", 0)
	c.produce(p, kgo.AllISRAcks(), "before")
	for _, id := range c.IDs() {
		before, _ := c.Broker(id)
		addr := before.Addr().String()
		c.stop(id)
		c.start(id)
		after, _ := c.Broker(id)
		require.NotSame(t, before, after, "a new broker process")
		require.Equal(t, addr, after.Addr().String(), "broker %d on its old address", id)
	}
	require.Equal(t, seeds, c.Addrs())

	// A client that knows only the first addresses reads what was written.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		p.Topic: {p.Partition: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	require.NoError(t, fs.Err())
	require.Equal(t, "before", string(fs.Records()[0].Value))
}
