package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
)

// Options configure a cluster.
type Options struct {
	// Dir holds one log directory per broker (broker-<id>).
	Dir string
	// Props are Kafka keys for every broker (log.segment.bytes, ...).
	Props map[string]string
	// BasePort, if not 0, puts broker id on 127.0.0.1:BasePort+id (for a
	// demo's kcat); 0 lets the kernel pick a port at the broker's first
	// start. Either way a restarted broker listens where it did before, as
	// a real one does: a client's bootstrap list stays good.
	BasePort int
	// Quorum for the brokers' high watermarks; nil counts every replica.
	// Only the default NewServer uses it.
	Quorum replica.Quorum
	// Logger; slog.Default if nil.
	Logger *slog.Logger

	// The seams below let stage 04 reuse this harness; nil keeps stage 03's
	// behaviour.

	// NewServer builds a broker from its Kafka keys (the cluster's Props,
	// and broker.id, listeners, log.dirs and replica.fetch.backoff.ms for
	// that broker) and a logger that names it; StartBroker starts what it
	// returns. nil: server.ParseConfig and server.New with Quorum. Stage 04
	// builds its own broker, which embeds a *server.Server and reads keys
	// stage 03's ParseConfig would refuse, and returns the embedded server.
	NewServer func(props map[string]string, logger *slog.Logger) (*server.Server, error)
	// States is where the controller keeps partition states (StateStore);
	// nil: a MemoryStateStore of its own. Stage 04's leaders write their
	// ISR changes to the same store.
	States StateStore
	// Elect chooses a partition's leader and ISR after a failure
	// (BrokerStopped) or a start (BrokerStarted), given its state as
	// loaded and which brokers the controller believes live; leader -1
	// leaves the partition offline. nil: FirstLiveReplica. Stage 04 passes
	// Kafka's rule (the first live replica in the ISR; with
	// unclean.leader.election.enable, the first live replica). The
	// controller calls it without holding its locks; it must not call the
	// Controller. ElectLeader, an explicit choice, does not use it.
	Elect func(tp commitlog.TopicPartition, s PartitionState, live func(id int32) bool) (leader int32, isr []int32)
}

// Cluster is a set of brokers and the controller that directs them.
type Cluster struct {
	opts       Options
	Controller *Controller

	mu      sync.Mutex
	brokers map[int32]*server.Server // running brokers. Protected by mu.
	ports   map[int32]int            // each broker's port once it started. Protected by mu.
	ids     []int32                  // every broker, running or not
}

// Start starts n brokers with ids 0..n-1.
func Start(n int, opts Options) (*Cluster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Cluster{opts: opts, brokers: map[int32]*server.Server{}, ports: map[int32]int{}}
	c.Controller = newController(c)
	for id := range int32(n) {
		c.ids = append(c.ids, id)
		if err := c.StartBroker(id); err != nil {
			c.Close()
			return nil, err
		}
		if err := c.Controller.BrokerStarted(id); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// IDs lists every broker's id.
func (c *Cluster) IDs() []int32 { return append([]int32(nil), c.ids...) }

// LogDir is a broker's log directory.
func (c *Cluster) LogDir(id int32) string {
	return filepath.Join(c.opts.Dir, fmt.Sprintf("broker-%d", id))
}

// Broker returns a running broker.
func (c *Cluster) Broker(id int32) (*server.Server, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.brokers[id]
	return b, ok
}

// Running lists the ids of the running brokers.
func (c *Cluster) Running() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for id := range c.brokers {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Addrs lists the running brokers' addresses, for a client's seed list.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.Running() {
		b, _ := c.Broker(id)
		out = append(out, b.Addr().String())
	}
	return out
}

// StartBroker builds broker id with Options.NewServer and starts it on its
// log directory and its port: the one it had before, else BasePort+id, else
// one the kernel picks. It holds no roles until the controller tells it
// (BrokerStarted).
//
// Keeping the port matters to clients: a client keeps the addresses of its
// bootstrap list and of the brokers its last Metadata answer named; if
// every broker came back on a new port, a client that had not refreshed
// its metadata in between would know no live address at all (stage 04's
// fault run stalled so, with franz-go). If the old port is taken meanwhile
// (the kernel may hand it to an outgoing connection while the broker is
// down), the broker starts on a new one and the harness logs it.
func (c *Cluster) StartBroker(id int32) error {
	c.mu.Lock()
	port, restart := c.ports[id]
	c.mu.Unlock()
	if !restart && c.opts.BasePort != 0 {
		port = c.opts.BasePort + int(id)
	}
	err := c.startBroker(id, port)
	if err != nil && restart && c.opts.BasePort == 0 {
		c.opts.Logger.Warn("a restarted broker cannot have its port back; starting it on a new one",
			"broker", id, "port", port, "err", err)
		err = c.startBroker(id, 0)
	}
	return err
}

func (c *Cluster) startBroker(id int32, port int) error {
	props := map[string]string{
		"broker.id": strconv.Itoa(int(id)),
		"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port),
		"log.dirs":  c.LogDir(id),
		// Followers retry quickly in tests and demos (Kafka: 1000).
		"replica.fetch.backoff.ms": "100",
	}
	for k, v := range c.opts.Props {
		props[k] = v
	}
	newServer := c.opts.NewServer
	if newServer == nil {
		newServer = c.newServer
	}
	s, err := newServer(props, c.opts.Logger.With("broker", id))
	if err != nil {
		return fmt.Errorf("broker %d: %w", id, err)
	}
	if err := s.Start(); err != nil {
		// Release what New opened (its logs, its goroutines): a port in
		// use must not leak a broker.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(fmt.Errorf("broker %d: %w", id, err), s.Shutdown(ctx))
	}
	c.mu.Lock()
	c.brokers[id] = s
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		c.ports[id] = a.Port
	}
	c.mu.Unlock()
	return nil
}

// newServer is the NewServer of stage 03: its own broker, whose high
// watermarks count Options.Quorum.
func (c *Cluster) newServer(props map[string]string, logger *slog.Logger) (*server.Server, error) {
	cfg, err := server.ParseConfig(props, logger)
	if err != nil {
		return nil, err
	}
	return server.New(cfg, server.Options{Logger: logger, Quorum: c.opts.Quorum})
}

// StopBroker shuts a broker down cleanly.
func (c *Cluster) StopBroker(id int32) error {
	c.mu.Lock()
	s, ok := c.brokers[id]
	delete(c.brokers, id)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	c.Controller.forget(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// Crash describes what a crash took from a broker's disk.
type Crash struct {
	// LoseAfter: for each partition, the log lost everything from this
	// offset on (it was in the page cache, not on disk, when power failed).
	LoseAfter map[commitlog.TopicPartition]int64
	// HighWatermarks: the high watermarks the last checkpoint held, if
	// older than what the broker knew when it died.
	HighWatermarks map[commitlog.TopicPartition]int64
}

// CrashBroker stops a broker as a crash would leave it: no clean-shutdown
// marker (so the next start recovers its logs), the log tails in
// LoseAfter gone, and the stale high watermarks in HighWatermarks. The
// broker is stopped cleanly first and its files then edited to that state,
// so a test says exactly what was lost.
func (c *Cluster) CrashBroker(id int32, crash Crash) error {
	if err := c.StopBroker(id); err != nil {
		return err
	}
	dir := c.LogDir(id)
	if err := os.Remove(filepath.Join(dir, commitlog.CleanShutdownFile)); err != nil {
		return err
	}
	for tp, offset := range crash.LoseAfter {
		l, err := commitlog.Open(filepath.Join(dir, tp.String()), commitlog.DefaultConfig(),
			commitlog.Options{CleanShutdown: true, Logger: c.opts.Logger})
		if err != nil {
			return err
		}
		_, err = l.TruncateTo(offset)
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if len(crash.HighWatermarks) > 0 {
		path := filepath.Join(dir, replica.HighWatermarkCheckpointFile)
		hws, err := commitlog.ReadOffsetCheckpoint(path)
		if err != nil {
			return err
		}
		for tp, hw := range crash.HighWatermarks {
			hws[tp] = hw
		}
		if err := commitlog.WriteOffsetCheckpoint(path, hws); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every broker and the controller's connections.
func (c *Cluster) Close() error {
	var first error
	for _, id := range c.Running() {
		if err := c.StopBroker(id); err != nil && first == nil {
			first = err
		}
	}
	c.Controller.close()
	return first
}
