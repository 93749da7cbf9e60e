// Package server is the stage 05 broker: stage 04's, registered in
// ZooKeeper, running for controller, writing its ISR changes and claiming
// producer id blocks there, and serving the requests that need the
// cluster's ZooKeeper state (CreateTopics, DeleteTopics,
// ControlledShutdown). No test harness plays the controller any more:
// brokers find each other and their roles through ZooKeeper alone.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/txn"
)

// Options are the parts of a server that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger
	// BrokerConfigs are broker configs a later stage parsed itself
	// (listeners, ssl.*, sasl.*), which DescribeConfigs shows besides this
	// stage's keys; secrets marked Sensitive are answered as null.
	BrokerConfigs []BrokerConfigEntry
	// PerListener: see broker.Options.PerListener (final: TLS and SASL).
	PerListener broker.ListenerOptions
}

// Server is a stage 05 broker.
type Server struct {
	*s4.Server
	ZK         *kafkazk.Client
	Controller *controller.Controller
	Groups     *group.Coordinator
	// Txns is the transaction coordinator, beside the group coordinator.
	Txns *txn.Coordinator

	cfg    Config
	logger *slog.Logger
	config *configWatcher
	// brokerConfigs: Options.BrokerConfigs, for DescribeConfigs.
	brokerConfigs []BrokerConfigEntry
	markers       *markerSender // the transaction coordinator's WriteTxnMarkers
}

// New connects to ZooKeeper, creates Kafka's persistent znodes and the
// cluster id if this is the first broker (a log directory of another
// cluster is refused), and builds the broker; nothing listens and nothing
// is registered until Start.
func New(cfg Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	logger := opts.Logger.With("broker", cfg.Replica.BrokerID)
	zk, err := kafkazk.Connect(cfg.ZookeeperConnect, kafkazk.Options{SessionTimeout: cfg.ZookeeperSessionTimeout,
		ConnectionTimeout: cfg.ZookeeperConnectionTimeout, Logger: logger.With("component", "zookeeper")})
	if err != nil {
		return nil, err
	}
	if err := zk.CreateTopLevelPaths(); err != nil {
		zk.Close()
		return nil, err
	}
	clusterID, err := zk.ClusterID()
	if err != nil {
		zk.Close()
		return nil, err
	}
	s := &Server{ZK: zk, cfg: cfg, logger: logger, brokerConfigs: opts.BrokerConfigs}
	base, err := s4.New(cfg.Config, s4.Options{Logger: opts.Logger, PerListener: opts.PerListener, States: zk, ProducerIDs: zk.ProducerIDBlock(), ClusterID: clusterID,
		StateChanged: s.coordinatorPartitionChanged, TxnCompleted: s.txnCompleted})
	if err != nil {
		zk.Close()
		return nil, err
	}
	s.Server = base
	s.Groups = group.New(cfg.Group, offsetsWriter{s}, group.Options{Logger: logger.With("component", "group-coordinator")})
	s.markers = &markerSender{s: s, idle: map[string][]*protocol.Client{}, alive: true}
	s.Txns = txn.New(cfg.Txn, txnWriter{s}, base.ProducerIDs(), s.markers, txn.Options{Logger: logger.With("component", "transaction-coordinator")})
	s.Controller = controller.New(zk, cfg.Replica.BrokerID, controller.Options{Logger: logger.With("component", "controller"),
		UncleanLeaderElection: cfg.Topic.UncleanLeaderElection, AutoLeaderRebalance: cfg.AutoLeaderRebalance,
		LeaderImbalanceCheckInterval: cfg.LeaderImbalanceCheck, LeaderImbalancePerBrokerPercentage: cfg.LeaderImbalancePercentage,
		InterBrokerListener: cfg.Broker.InterBrokerListener})
	s.config = &configWatcher{s: s}
	s.Register(s.config.wrapLeaderAndIsr())
	s.Register(s.metadataAPI())
	s.Register(s.createTopicsAPI())
	s.Register(s.deleteTopicsAPI())
	s.Register(s.controlledShutdownAPI())
	s.Register(s.alterPartitionReassignmentsAPI())
	s.Register(s.listPartitionReassignmentsAPI())
	s.Register(s.createPartitionsAPI())
	s.Register(s.describeClusterAPI())
	s.Register(broker.ProduceAPI(s.ProduceAppender()))
	for _, api := range s.configAPIs() {
		s.Register(api)
	}
	for _, api := range s.groupAPIs() {
		s.Register(api)
	}
	for _, api := range s.txnAPIs() {
		s.Register(api)
	}
	// Parked JoinGroups and SyncGroups answer NOT_COORDINATOR as soon as
	// the broker begins shutting down: the network layer's drain waits
	// for every request in flight.
	s.Delay(func() {
		<-s.ShuttingDown()
		s.Groups.Close()
		s.Txns.Close()
		s.markers.close()
	})
	return s, nil
}

// Start listens, loads the topic configs, registers the broker in
// ZooKeeper (once it can be reached: its registration is how the others
// learn where it is) and runs for controller. A new ZooKeeper session
// (the old one expired, taking the registration with it) registers again.
func (s *Server) Start() error {
	if err := s.Server.Start(); err != nil {
		s.ZK.Close()
		return err
	}
	if err := s.config.start(); err != nil {
		return s.failStart(err)
	}
	if err := s.register(); err != nil {
		return s.failStart(err)
	}
	s.ZK.OnNewSession(func() {
		if err := s.register(); err != nil {
			s.logger.Error("registering again after a new ZooKeeper session", "err", err)
		}
	})
	s.Controller.Start()
	return nil
}

func (s *Server) failStart(err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Server.Shutdown(ctx)
	s.config.stop()
	s.ZK.Close()
	return err
}

// register writes /brokers/ids/<id>, with every advertised listener and
// the listener_security_protocol_map, and takes its creation zxid as the
// broker epoch (KIP-380).
func (s *Server) register() error {
	e := s.Endpoint()
	info := kafkazk.BrokerInfo{ID: s.ID(), JmxPort: -1, Rack: s.cfg.Rack, Timestamp: time.Now(), Endpoints: registeredEndpoints(e)}
	epoch, err := s.ZK.RegisterBroker(info)
	if err != nil {
		return err
	}
	s.SetBrokerEpoch(epoch)
	s.logger.Info("registered in ZooKeeper", "path", kafkazk.BrokerPath(s.ID()), "broker_epoch", epoch, "endpoint", e.HostPort(),
		"endpoints", endpointList(info.Endpoints))
	return nil
}

// Shutdown stops the broker as Kafka does: first a controlled shutdown
// (the controller moves this broker's leaderships away, so clients switch
// at once), then the network and the logs, then the controller, and last
// the ZooKeeper session, whose end deletes the registration (and
// /controller, if this broker held it) at once.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.cfg.ControlledShutdown {
		s.controlledShutdown(ctx)
	}
	err := s.Server.Shutdown(ctx)
	s.config.stop()
	s.Controller.Close()
	s.ZK.Close()
	return err
}

// controlledShutdown asks the controller, up to the configured number of
// retries, to move this broker's leaderships away and take its follower
// replicas out of their ISRs (the answer lists the partitions it could
// not yet do either for).
func (s *Server) controlledShutdown(ctx context.Context) {
	for attempt := 0; attempt <= s.cfg.ControlledShutdownRetries; attempt++ {
		remaining, err := s.askControlledShutdown(ctx)
		if err == nil && remaining == 0 {
			s.logger.Info("controlled shutdown succeeded")
			return
		}
		s.logger.Warn("controlled shutdown incomplete", "attempt", attempt+1, "partitions_remaining", remaining, "err", err)
		if attempt == s.cfg.ControlledShutdownRetries {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.ControlledShutdownBackoff):
		}
	}
	s.logger.Warn("proceeding with an unclean shutdown: some leaderships did not move")
}

// askControlledShutdown sends one ControlledShutdown request to the
// controller (or asks this broker's own, if it is the controller) and
// returns how many partitions this broker still leads.
func (s *Server) askControlledShutdown(ctx context.Context) (int, error) {
	id, ok, err := s.ZK.ControllerID()
	if err != nil {
		return -1, err
	}
	if !ok {
		return -1, errors.New("no controller")
	}
	if id == s.ID() {
		remaining, err := s.Controller.ControlledShutdown(s.ID(), s.BrokerEpoch())
		return len(remaining), err
	}
	brokers, err := s.ZK.Brokers()
	if err != nil {
		return -1, err
	}
	var target string
	for _, b := range brokers {
		if b.ID == id {
			target, _ = controller.InterBrokerAddr(b.Endpoints, s.cfg.Broker.InterBrokerListener)
		}
	}
	if target == "" {
		return -1, fmt.Errorf("controller %d is not registered", id)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := protocol.Dial(rctx, target, fmt.Sprintf("broker-%d-shutdown", s.ID()))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrControlledShutdownRequest()
	req.BrokerID, req.BrokerEpoch = s.ID(), s.BrokerEpoch()
	resp, err := cl.Request(rctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.ControlledShutdownResponse)
	if r.ErrorCode != 0 {
		return -1, fmt.Errorf("controller %d answered error code %d", id, r.ErrorCode)
	}
	return len(r.PartitionsRemaining), nil
}
