// Package cluster runs several stage 04 brokers in one process on
// 127.0.0.1, on stage 03's harness (package cluster there), with what this
// stage changes in it:
//
//   - the brokers are stage 04 servers (ISR, acks, purgatories);
//   - partition states live in one isr.MemoryStore, the stand-in for
//     ZooKeeper's state znodes: the harness controller writes its decisions
//     there, and the leaders write their ISR changes there, each write
//     conditional on the version the writer read;
//   - the controller elects leaders only from the ISR (Elect), unless
//     unclean.leader.election.enable allows otherwise;
//   - ISR change notifications make the controller send UpdateMetadata, so
//     clients see the ISR in Metadata answers.
//
// Stage 05 replaces the harness controller and the MemoryStore with a real
// controller on ZooKeeper.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	base "github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	s3 "github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
)

// Options configure a cluster.
type Options struct {
	Dir string // one log directory per broker (broker-<id>)
	// Props are Kafka keys for every broker, stage 04's included
	// (replica.lag.time.max.ms, min.insync.replicas,
	// unclean.leader.election.enable).
	Props    map[string]string
	BasePort int          // see stage 03's cluster.Options
	Logger   *slog.Logger // slog.Default if nil
	// ObserveRequests, if set, is every broker's request observer
	// (broker.Broker.ObserveRequests), told which broker timed the
	// request: the latency benchmark's hops come from it.
	ObserveRequests func(broker int32, t *broker.RequestTiming)
}

// Cluster is a set of stage 04 brokers and the harness controller.
type Cluster struct {
	*base.Cluster
	// States holds the partition states and ISR change notifications,
	// with every write's history.
	States *isr.MemoryStore

	unclean bool // unclean.leader.election.enable, for every topic
	observe func(int32, *broker.RequestTiming)

	mu           sync.Mutex
	servers      map[int32]*server.Server     // the running brokers' stage 04 servers. Protected by mu.
	topicConfigs map[string]map[string]string // overrides every broker gets, at start too. Protected by mu.

	notified chan struct{} // an ISR change notification was written
	stop     chan struct{}
	done     chan struct{}
}

// Start starts n brokers with ids 0..n-1.
func Start(n int, opts Options) (*Cluster, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	topicDefaults, err := server.ParseTopicConfig(server.DefaultTopicConfig(), opts.Props)
	if err != nil {
		return nil, err
	}
	c := &Cluster{States: isr.NewMemoryStore(), unclean: topicDefaults.UncleanLeaderElection,
		servers: map[int32]*server.Server{}, topicConfigs: map[string]map[string]string{}, notified: make(chan struct{}, 1), observe: opts.ObserveRequests,
		stop: make(chan struct{}), done: make(chan struct{})}
	c.States.Watch(func(path string) {
		if strings.HasPrefix(path, isr.IsrChangeNotificationPrefix) {
			select {
			case c.notified <- struct{}{}:
			default:
			}
		}
	})
	c.Cluster, err = base.Start(n, base.Options{Dir: opts.Dir, Props: opts.Props, BasePort: opts.BasePort, Logger: opts.Logger,
		NewServer: c.newServer, States: stateStore{c.States}, Elect: c.elect})
	if err != nil {
		return nil, err
	}
	go c.propagateIsrChanges()
	return c, nil
}

// newServer builds a stage 04 broker and hands stage 03's harness the
// server it embeds.
func (c *Cluster) newServer(props map[string]string, logger *slog.Logger) (*s3.Server, error) {
	cfg, err := server.ParseConfig(props, logger)
	if err != nil {
		return nil, err
	}
	s, err := server.New(cfg, server.Options{Logger: logger, States: c.States, ProducerIDs: idBlockNode{c.States}})
	if err != nil {
		return nil, err
	}
	id, _ := strconv.Atoi(props["broker.id"])
	if c.observe != nil {
		s.ObserveRequests(func(t *broker.RequestTiming) { c.observe(int32(id), t) })
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, cfg := range c.topicConfigs {
		if err := s.SetTopicConfig(topic, cfg); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return nil, errors.Join(err, s.Shutdown(ctx)) // release what New opened
		}
	}
	c.servers[int32(id)] = s
	return s.Server, nil
}

// SetTopicConfig sets a topic's min.insync.replicas on every broker, now
// and when they restart, and its unclean.leader.election.enable for the
// controller: what stage 05's brokers and controller read from
// /config/topics/<topic>.
func (c *Cluster) SetTopicConfig(topic string, props map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.servers {
		if err := s.SetTopicConfig(topic, props); err != nil {
			return err
		}
	}
	c.topicConfigs[topic] = props
	return nil
}

// Server returns a running broker's stage 04 server.
func (c *Cluster) Server(id int32) (*server.Server, bool) {
	if _, running := c.Broker(id); !running {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	return s, ok
}

// elect is Kafka's offline-partition leader election: the first replica in
// assignment order that is alive and in the ISR leads, and the new ISR is
// the live part of the old one. With no such replica, the partition stays
// without a leader (the ISR is kept: its members are the ones that have
// everything, and the first to come back will lead), unless the topic's
// unclean.leader.election.enable (SetTopicConfig, else the brokers'
// default) lets the first live replica lead, with an ISR of itself, losing
// whatever only the old ISR had.
func (c *Cluster) elect(tp commitlog.TopicPartition, s base.PartitionState, live func(int32) bool) (int32, []int32) {
	liveISR := slices.DeleteFunc(slices.Clone(s.ISR), func(id int32) bool { return !live(id) })
	for _, r := range s.Replicas {
		if slices.Contains(liveISR, r) {
			return r, liveISR
		}
	}
	if c.uncleanAllowed(tp.Topic) {
		for _, r := range s.Replicas {
			if live(r) {
				return r, []int32{r}
			}
		}
	}
	return -1, s.ISR
}

// uncleanAllowed is the topic's unclean.leader.election.enable.
func (c *Cluster) uncleanAllowed(topic string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if props, ok := c.topicConfigs[topic]; ok {
		if t, err := server.ParseTopicConfig(server.TopicConfig{UncleanLeaderElection: c.unclean}, props); err == nil {
			return t.UncleanLeaderElection
		}
	}
	return c.unclean
}

// propagateIsrChanges is the controller's handling of
// /isr_change_notification: read each notification, tell every broker the
// new ISRs (UpdateMetadata), delete the notification.
func (c *Cluster) propagateIsrChanges() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.notified:
		}
		for _, path := range c.States.Children(isr.IsrChangeNotificationPath) {
			data, _, err := c.States.Get(path)
			if err != nil {
				continue
			}
			if tps, err := isr.DecodeIsrChange(data); err == nil {
				// A broker that died meanwhile cannot be told; the next
				// notification or decision tells the others.
				_ = c.Controller.UpdateMetadata(tps...)
			}
			_ = c.States.Delete(path)
		}
	}
}

// ISR returns a partition's ISR and state version as stored.
func (c *Cluster) ISR(tp commitlog.TopicPartition) ([]int32, int32, error) {
	s, v, err := c.States.PartitionState(tp)
	return s.ISR, v, err
}

// Close stops every broker and the controller.
func (c *Cluster) Close() error {
	close(c.stop)
	<-c.done
	return c.Cluster.Close()
}

// idBlockNode keeps /latest_producer_id_block in the MemoryStore, shared by
// every broker, with conditional writes (producer.Node).
type idBlockNode struct{ m *isr.MemoryStore }

func (n idBlockNode) Get() ([]byte, int32, bool, error) {
	data, v, err := n.m.Get(producer.BlockPath)
	if errors.Is(err, isr.ErrNoNode) {
		return nil, 0, false, nil
	}
	return data, v, err == nil, err
}

func (n idBlockNode) Create(data []byte) error {
	if err := n.m.Create(producer.BlockPath, data); err != nil {
		return fmt.Errorf("%w: %w", producer.ErrConflict, err)
	}
	return nil
}

func (n idBlockNode) Set(data []byte, version int32) error {
	if _, err := n.m.Set(producer.BlockPath, data, version); err != nil {
		return fmt.Errorf("%w: %w", producer.ErrConflict, err)
	}
	return nil
}

// stateStore keeps the controller's partition states in the MemoryStore as
// Kafka keeps them in ZooKeeper: one state znode per partition, with
// Kafka's JSON, whose version is the partition epoch.
type stateStore struct{ m *isr.MemoryStore }

func (st stateStore) Create(tp commitlog.TopicPartition, s base.PartitionState, controllerEpoch int32) (int32, error) {
	return 0, st.m.Create(isr.StatePath(tp), st.encode(s, controllerEpoch))
}

func (st stateStore) Load(tp commitlog.TopicPartition, s *base.PartitionState) error {
	ps, v, err := st.m.PartitionState(tp)
	if err != nil {
		return err
	}
	s.Leader, s.LeaderEpoch, s.ISR, s.PartitionEpoch = ps.Leader, ps.LeaderEpoch, ps.ISR, v
	return nil
}

func (st stateStore) Update(tp commitlog.TopicPartition, s base.PartitionState, controllerEpoch int32) (int32, error) {
	v, err := st.m.Set(isr.StatePath(tp), st.encode(s, controllerEpoch), s.PartitionEpoch)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", base.ErrBadVersion, err)
	}
	return v, nil
}

func (stateStore) encode(s base.PartitionState, controllerEpoch int32) []byte {
	return isr.PartitionState{ControllerEpoch: controllerEpoch, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ISR: s.ISR}.Encode()
}
