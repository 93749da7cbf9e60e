package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Broker is a single-node Kafka broker assembled from three parts: the
// network server (package network), a table of API handlers keyed by API
// key (one file per API in this package: 00_produce.go, 01_fetch.go, ...),
// and a partition store over the stage 01 log (package store). Later stages
// assemble their own brokers from these parts.
type Broker struct {
	cfg    Config
	logger *slog.Logger
	store  *store.Store
	server *network.Server
	opts   Options
	apis   map[int16]API // set up before Start; read-only afterwards

	counters Counters // refused batches and failed appends, bytes and records in and out

	// observer is ObserveRequests' function, set before Start.
	observer func(*RequestTiming)

	// txnBatches: produced batches may be transactional
	// (AcceptTransactionalBatches).
	txnBatches atomic.Bool

	// shutdown is closed when Shutdown begins, so that waiting requests
	// (long-poll fetches) answer at once instead of holding shutdown up.
	shutdown     chan struct{}
	shutdownOnce sync.Once
	delayed      sync.WaitGroup // requests answering from their own goroutine
}

// AcceptTransactionalBatches lets producers send transactional batches
// (the attribute bit 4 set, with a producer id): a seam for the stage that
// keeps producer state and transactions (stage 04 and up). This stage has
// neither, so by default it refuses them (INVALID_RECORD) rather than
// store records nobody can commit. Call it before Start.
func (b *Broker) AcceptTransactionalBatches() { b.txnBatches.Store(true) }

// Options are the parts of a broker that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger // slog.Default if nil
	// ServerFactory builds the network server; nil means network.NewServer
	// (the epoll reactor on Linux). Benchmarks pass the portable one.
	ServerFactory func(network.Config, network.Handler) (*network.Server, error)
	// BeforeClose runs during Shutdown after the network has stopped and
	// before the logs close: stage 03 stops its replica fetchers and writes
	// its high watermark checkpoint there.
	BeforeClose func() error
	// MaxPartitions caps the partitions the broker holds; 0 means
	// store.DefaultMaxPartitions() (what the machine's open-file limit
	// allows).
	MaxPartitions int
	// RetentionLimit is passed to the store (store.Options.RetentionLimit):
	// the offset retention may not delete past in a partition's log. A
	// replicating broker (stage 03) passes the partition's high watermark,
	// so that retention never deletes records that are not committed yet;
	// nil means the log end offset, right for a single broker.
	RetentionLimit func(tp commitlog.TopicPartition, l *commitlog.Log) int64
	// CleanLimit is passed to the store (store.Options.CleanLimit).
	CleanLimit func(tp commitlog.TopicPartition, l *commitlog.Log) int64
	// StartOffsetAdvanced is passed to the store
	// (store.Options.StartOffsetAdvanced).
	StartOffsetAdvanced func(tp commitlog.TopicPartition, l *commitlog.Log, start int64)
	// ClusterID is passed to the store (store.Options.ClusterID): the
	// cluster's id when ZooKeeper knows it (stage 05).
	ClusterID string
	// PerListener are the seams of each listener: its TLS configuration
	// and a handler in front of its requests (final: TLS and SASL). Later
	// stages carry them down in their own Options.
	PerListener ListenerOptions
}

// New opens the broker's log directory and registers the APIs of this
// stage. Nothing listens until Start.
func New(cfg Config, opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ServerFactory == nil {
		opts.ServerFactory = network.NewServer
	}
	st, err := store.Open(cfg.LogDir, cfg.BrokerID, cfg.Log, store.Options{
		MaxPartitions: opts.MaxPartitions, RetentionLimit: opts.RetentionLimit, CleanLimit: opts.CleanLimit,
		StartOffsetAdvanced: opts.StartOffsetAdvanced, ClusterID: opts.ClusterID, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, logger: opts.Logger, store: st, opts: opts, apis: map[int16]API{}, shutdown: make(chan struct{})}
	for _, api := range []API{produceAPI, fetchAPI, listOffsetsAPI, metadataAPI, apiVersionsAPI, createTopicsAPI, deleteTopicsAPI} {
		b.Register(api)
	}
	netCfg := cfg.Network
	netCfg.Logger = opts.Logger
	if netCfg.Listeners, err = b.networkListeners(); err != nil {
		st.Close()
		return nil, err
	}
	b.server, err = opts.ServerFactory(netCfg, b.listenerHandler())
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("listen on %s: %w", b.listenAddrs(), err)
	}
	b.advertiseChosenPorts()
	return b, nil
}

// Config is the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// Store is the broker's partition store.
func (b *Broker) Store() *store.Store { return b.store }

// Logger is the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.logger }

// NetworkStats is a snapshot of the network server's counters.
func (b *Broker) NetworkStats() network.Stats { return b.server.Stats() }

// Addr is the address the broker listens on: its inter-broker listener's,
// its only one in a single-listener broker (ListenerAddr for the others).
func (b *Broker) Addr() net.Addr { return b.ListenerAddr(b.cfg.InterBrokerListener) }

// Start begins serving.
func (b *Broker) Start() error {
	if err := b.server.Start(); err != nil {
		return err
	}
	b.logger.Info("broker ready", "broker.id", b.cfg.BrokerID, "listener", b.Addr().String(),
		"advertised", fmt.Sprintf("%s:%d", b.cfg.AdvertisedHost, b.cfg.AdvertisedPort), "listeners", b.listenerSummary(),
		"log.dirs", b.cfg.LogDir, "cluster.id", b.store.ClusterID(), "topics", len(b.store.TopicNames()))
	return nil
}

// ShuttingDown is closed when Shutdown begins.
func (b *Broker) ShuttingDown() <-chan struct{} { return b.shutdown }

// Delay runs f on its own goroutine for a request that answers later, and
// lets Shutdown wait for it.
func (b *Broker) Delay(f func()) {
	b.delayed.Add(1)
	go func() {
		defer b.delayed.Done()
		f()
	}()
}

// Shutdown stops the broker cleanly: it stops accepting connections, wakes
// waiting fetches so that they answer now, lets in-flight requests finish and
// their responses go out, then closes the logs (which writes the
// checkpoints and the clean-shutdown marker).
func (b *Broker) Shutdown(ctx context.Context) error {
	b.shutdownOnce.Do(func() { close(b.shutdown) })
	err := b.server.Shutdown(ctx)
	b.delayed.Wait()
	if b.opts.BeforeClose != nil {
		err = errors.Join(err, b.opts.BeforeClose())
	}
	err = errors.Join(err, b.store.Close())
	if err == nil {
		b.logger.Info("broker shut down cleanly", "broker.id", b.cfg.BrokerID)
	}
	return err
}
