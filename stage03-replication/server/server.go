package server

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// Config is the configuration of a replicating broker: stage 02's broker
// keys and the replica.* keys.
type Config struct {
	Broker  broker.Config
	Replica replica.Config
}

// Keys lists every key ParseConfig knows: stage 02's and the replica.*
// keys.
func Keys() []string { return append(broker.Keys(), replica.Keys()...) }

// ParseConfig reads a broker's configuration; every key must be known:
// stage 02's, the replica.* keys, or one of extraKeys (a later stage's,
// which it reads itself).
func ParseConfig(props map[string]string, logger *slog.Logger, extraKeys ...string) (Config, error) {
	b, err := broker.ParseConfig(props, logger, append(replica.Keys(), extraKeys...)...)
	if err != nil {
		return Config{}, err
	}
	if err := checkInterBrokerListener(b); err != nil {
		return Config{}, err
	}
	r, err := replica.ParseConfig(b.BrokerID, props)
	return Config{Broker: b, Replica: r}, err
}

// Options are the parts of a server that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger
	// Quorum is which followers count for the high watermark; nil counts
	// every replica (stage 04 passes the ISR).
	Quorum replica.Quorum
	// Listener is told of appends, high watermarks and state changes
	// (replica.Listener); stage 04 completes its delayed requests there.
	Listener replica.Listener
	// LagTimeMax: see replica.Options.LagTimeMax (stage 04).
	LagTimeMax time.Duration
	// ClusterID: see broker.Options.ClusterID (stage 05).
	ClusterID string
	// PerListener: see broker.Options.PerListener (final: TLS and SASL).
	PerListener broker.ListenerOptions
	// CleanLimit, if set, lowers where the log cleaner stops from the
	// high watermark hw it gets here (stage 04: the last stable offset).
	CleanLimit func(tp commitlog.TopicPartition, l *commitlog.Log, hw int64) int64
}

// Server is a broker that replicates: stage 02's broker with the handlers
// of this package and a replica manager.
type Server struct {
	*broker.Broker
	Replicas *replica.Manager
	Metadata *MetadataCache

	// brokerEpoch is this broker's epoch (KIP-380), -1 until SetBrokerEpoch.
	brokerEpoch atomic.Int64
}

// SetBrokerEpoch records this broker's epoch: from stage 05 on, the
// creation zxid of its registration znode. From then on LeaderAndIsr,
// UpdateMetadata and StopReplica requests that carry an older epoch (sent
// by a controller to an earlier incarnation of this broker, before a
// restart or a new ZooKeeper session) are refused with STALE_BROKER_EPOCH,
// as Kafka does since 2.2; a request without one (-1, older versions) is
// accepted. The stage 03 harness, which has no registration, never sets it.
func (s *Server) SetBrokerEpoch(epoch int64) { s.brokerEpoch.Store(epoch) }

// BrokerEpoch is the epoch SetBrokerEpoch recorded, or -1.
func (s *Server) BrokerEpoch() int64 { return s.brokerEpoch.Load() }

// staleBrokerEpoch is Kafka's KafkaApis.isBrokerEpochStale.
func (s *Server) staleBrokerEpoch(inRequest int64) bool {
	return inRequest != -1 && inRequest < s.brokerEpoch.Load()
}

// New builds a server; nothing listens until Start.
func New(cfg Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{Metadata: newMetadataCache()}
	s.brokerEpoch.Store(-1)
	var manager atomic.Pointer[replica.Manager]
	var err error
	s.Broker, err = broker.New(cfg.Broker, broker.Options{Logger: opts.Logger, ClusterID: opts.ClusterID, PerListener: opts.PerListener,
		BeforeClose: func() error {
			if s.Replicas == nil { // New failed before the manager started
				return nil
			}
			return s.Replicas.Close()
		},
		// Retention never deletes past the high watermark, and the leader
		// epoch cache forgets what retention deleted. The logs' retention
		// goroutine starts before the replica manager exists: it reads the
		// manager through an atomic pointer, and deletes nothing before.
		RetentionLimit: func(tp commitlog.TopicPartition, l *commitlog.Log) int64 {
			if m := manager.Load(); m != nil {
				return m.RetentionLimit(tp, l)
			}
			return l.StartOffset()
		},
		CleanLimit: func(tp commitlog.TopicPartition, l *commitlog.Log) int64 {
			m := manager.Load()
			if m == nil {
				return l.StartOffset()
			}
			hw := m.RetentionLimit(tp, l)
			if opts.CleanLimit != nil {
				return opts.CleanLimit(tp, l, hw)
			}
			return hw
		},
		StartOffsetAdvanced: func(tp commitlog.TopicPartition, l *commitlog.Log, start int64) {
			if m := manager.Load(); m != nil {
				m.StartOffsetAdvanced(tp, l, start)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.Replicas, err = replica.NewManager(cfg.Replica, s.Store(), replica.Options{Quorum: opts.Quorum, Listener: opts.Listener,
		LagTimeMax: opts.LagTimeMax, Logger: opts.Logger})
	if err != nil {
		s.Broker.Shutdown(context.Background())
		return nil, err
	}
	manager.Store(s.Replicas)
	s.Unregister(19) // CreateTopics: the controller's job from stage 05
	s.Unregister(20) // DeleteTopics: likewise
	for _, api := range []broker.API{
		s.produceAPI(), s.fetchAPI(), s.listOffsetsAPI(), s.metadataAPI(),
		s.leaderAndIsrAPI(), s.stopReplicaAPI(), s.updateMetadataAPI(), s.offsetForLeaderEpochAPI(), s.describeLogDirsAPI(),
	} {
		s.Register(api)
	}
	return s, nil
}

// ID is the broker's id.
func (s *Server) ID() int32 { return s.Config().BrokerID }

// Endpoint is how other brokers and clients reach this one: Host and
// Port are its inter-broker listener's advertised address, Listeners
// every listener's.
func (s *Server) Endpoint() BrokerEndpoint {
	c := s.Config()
	return BrokerEndpoint{ID: c.BrokerID, Host: c.AdvertisedHost, Port: c.AdvertisedPort, Listeners: listenerEndpoints(c)}
}

// HostPort is the advertised "host:port".
func (e BrokerEndpoint) HostPort() string {
	return net.JoinHostPort(e.Host, itoa(e.Port))
}
