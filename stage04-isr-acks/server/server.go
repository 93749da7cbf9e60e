package server

import (
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/purgatory"
)

// Options are the parts of a server that are not Kafka configuration.
type Options struct {
	Logger *slog.Logger // slog.Default if nil
	// States is where leaders write their ISR changes: ZooKeeper in a
	// real cluster (stage 05), an isr.MemoryStore shared with the test
	// harness's controller here. Required.
	States isr.StateStore
	// ProducerIDs is where producer id blocks are claimed
	// (/latest_producer_id_block): shared by every broker of a cluster;
	// nil: a file in the log directory, right for a single broker.
	ProducerIDs producer.Node
	// ClusterID: see broker.Options.ClusterID (stage 05: /cluster/id).
	ClusterID string
	// StateChanged, if set, is told of every partition change that
	// replica.Listener.StateChanged reports (leader or follower, a new
	// leader epoch or ISR, stopped), after this stage has handled it, on
	// the same goroutine and with no lock held: it must be quick. Stage 05's
	// group coordinator learns there that it now leads, or no longer
	// leads, a partition of __consumer_offsets (Kafka's onLeadershipChange
	// callback of becomeLeaderOrFollower).
	StateChanged func(p *replica.Partition)
	// PerListener: see broker.Options.PerListener (final: TLS and SASL).
	PerListener broker.ListenerOptions
	// TxnCompleted, if set, is told of each transaction marker this
	// broker wrote as a leader (WriteTxnMarkers) once the high watermark
	// has passed it, on the goroutine that answers the request: stage 05's
	// group coordinator makes a transaction's offset commits visible (or
	// drops them) when its marker reaches a __consumer_offsets partition
	// (Kafka's onTransactionCompleted). It must be quick.
	TxnCompleted func(topic string, partition int32, m record.Marker)
}

// Server is a stage 03 broker whose high watermark counts the ISR, whose
// leaders keep the ISR, and whose waiting requests (acks=all produces,
// long-poll fetches) wait in purgatories.
type Server struct {
	*server.Server
	ISR *isr.Manager
	// Produces holds acks=all produces until the high watermark passes
	// their batches; Fetches holds fetches until they have min bytes.
	// Both are keyed by partition.
	Produces *purgatory.Purgatory[commitlog.TopicPartition]
	Fetches  *purgatory.Purgatory[commitlog.TopicPartition]
	// DeleteRecords holds DeleteRecords requests until every replica has
	// moved its log start offset (the partition's low watermark) that far.
	DeleteRecords *purgatory.Purgatory[commitlog.TopicPartition]

	cfg       Config
	topics    topicConfigs
	producers producerStates
	ids       *producer.Allocator
	// txnCompleted is Options.TxnCompleted.
	txnCompleted func(topic string, partition int32, m record.Marker)
	// built is set once New has set every field: cleanLimit, called from
	// the logs' cleaner goroutine, reads nothing before.
	built atomic.Bool
}

// New builds a server; nothing listens until Start.
func New(cfg Config, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, topics: topicConfigs{defaults: cfg.Topic}, producers: producerStates{logger: opts.Logger}, txnCompleted: opts.TxnCompleted,
		Produces:      purgatory.New[commitlog.TopicPartition]("Produce", purgatory.Options{}),
		Fetches:       purgatory.New[commitlog.TopicPartition]("Fetch", purgatory.Options{}),
		DeleteRecords: purgatory.New[commitlog.TopicPartition]("DeleteRecords", purgatory.Options{})}
	l := &listener{stateChanged: opts.StateChanged}
	base, err := server.New(cfg.Config, server.Options{Logger: opts.Logger, PerListener: opts.PerListener, Quorum: isr.Quorum{}, Listener: l, LagTimeMax: cfg.LagTimeMax,
		ClusterID: opts.ClusterID, CleanLimit: s.cleanLimit})
	if err != nil {
		s.Produces.Shutdown()
		s.Fetches.Shutdown()
		s.DeleteRecords.Shutdown()
		return nil, err
	}
	s.Server = base
	// A partition is this broker's while the store holds its log: StopReplica
	// with delete_partitions takes it out before the listener hears of it.
	s.producers.held = func(p *replica.Partition) bool {
		bp, ok := base.Store().Partition(p.TopicPartition.Topic, p.TopicPartition.Partition)
		return ok && bp == p.Partition
	}
	s.ISR = isr.NewManager(cfg.Replica.BrokerID, base.Replicas, opts.States, cfg.LagTimeMax, isr.Options{Logger: opts.Logger,
		Propagation: cfg.IsrChangePropagation})
	l.s = s // before Start: no partition exists yet, so nothing has called l
	if opts.ProducerIDs == nil {
		opts.ProducerIDs = producer.FileNode{Path: filepath.Join(cfg.Broker.LogDir, "producer-id-block")}
	}
	s.ids = producer.NewAllocator(cfg.Replica.BrokerID, opts.ProducerIDs)
	s.built.Store(true)
	s.Register(s.produceAPI())
	s.Register(s.initProducerIDAPI())
	s.Register(s.deleteRecordsAPI())
	s.Register(broker.FetchAPIWith(txnFetchSource{server.NewReplicaSource(base), s}, fetchWaiter{s}))
	s.Register(broker.ListOffsetsAPI(txnOffsets{s}))
	s.Register(s.writeTxnMarkersAPI())
	base.AcceptTransactionalBatches()
	// The ISR shrinks, and idle producer ids expire, on timers from now
	// on (there is nothing to do until LeaderAndIsr makes this broker a
	// leader). Once the broker begins shutting down, every waiting request
	// is answered at once, since the network layer's drain waits for
	// in-flight requests; then the ISR loop stops (a store write in
	// progress may be slow: ZooKeeper, stage 05) and the producer states
	// are snapshotted. All of it is set up here, not in a Start of this
	// type, so that whoever starts and stops the embedded stage 03 server
	// (the cluster harness) gets it, and registered with Delay, so that
	// the broker's Shutdown waits for it.
	s.ISR.Start()
	s.Delay(func() {
		t := time.NewTicker(cfg.ProducerIDExpirationCheck)
		defer t.Stop()
		for {
			select {
			case <-s.ShuttingDown():
				return
			case <-t.C:
				s.producers.expire(cfg.ProducerIDExpiration)
			}
		}
	})
	s.Delay(func() {
		<-s.ShuttingDown()
		s.Produces.Shutdown()
		s.Fetches.Shutdown()
		s.DeleteRecords.Shutdown()
		s.ISR.Close()
		s.producers.snapshot()
	})
	return s, nil
}

// SetTopicConfig sets a topic's overrides of min.insync.replicas and
// unclean.leader.election.enable (what stage 05 reads from
// /config/topics/<topic>).
func (s *Server) SetTopicConfig(topic string, props map[string]string) error {
	return s.topics.set(topic, props)
}

// TopicConfig is a topic's effective topic-level configuration.
func (s *Server) TopicConfig(topic string) TopicConfig { return s.topics.get(topic) }

// Config is the broker's configuration.
func (s *Server) Config() Config { return s.cfg }

// listener completes waiting requests and grows the ISR when a partition
// changes (replica.Listener): Kafka's tryCompleteDelayedRequests after an
// append, a new high watermark or a leader change, and maybeExpandIsr after
// a follower fetch.
type listener struct {
	s            *Server
	stateChanged func(p *replica.Partition) // Options.StateChanged
}

var _ replica.Listener = (*listener)(nil)

// Appended: followers' fetches parked at this leader may now have data.
func (l *listener) Appended(p *replica.Partition) { l.s.Fetches.CheckAndComplete(p.TopicPartition) }

// HighWatermarkAdvanced: acks=all produces may be acknowledged, and
// consumers' fetches may read more.
func (l *listener) HighWatermarkAdvanced(p *replica.Partition) {
	l.s.Produces.CheckAndComplete(p.TopicPartition)
	l.s.Fetches.CheckAndComplete(p.TopicPartition)
}

// Replicated: a follower keeps its producers' state from what it copies.
func (l *listener) Replicated(p *replica.Partition, batches []byte) {
	pp, built, err := l.s.producers.entry(p)
	if err != nil {
		l.s.Logger().Error("producer state", "partition", p.TopicPartition, "err", err)
		return
	}
	if !built { // a state built now read these batches from the log already
		observe(pp.st, p.Log, batches, l.s.Logger())
		pp.st.LastStableOffset(p.HighWatermark()) // forgets the transactions whose markers the high watermark passed
	}
	l.s.producers.recorded(pp)
}

// Truncated: the batches cut from the log leave the producer state.
func (l *listener) Truncated(p *replica.Partition, end int64) {
	if st, _, err := l.s.producers.get(p); err == nil {
		st.TruncateFrom(end)
		st.RemoveBefore(p.Log.StartOffset()) // a follower starting over forgets everything before
	}
	// A snapshot past the cut holds batches the log no longer has.
	removeSnapshots(p.Log.Dir(), func(offset int64) bool { return offset > end }, l.s.Logger())
}

// LogStartAdvanced: a producer whose batches retention deleted is
// forgotten, and its next batch is accepted at any sequence (KIP-360).
func (l *listener) LogStartAdvanced(p *replica.Partition, start int64) {
	if st, _, err := l.s.producers.get(p); err == nil {
		st.RemoveBefore(start)
	}
}

// FollowerFetched: the follower may have caught up enough to rejoin, and
// the log start it told may complete a DeleteRecords.
func (l *listener) FollowerFetched(p *replica.Partition, follower int32) {
	l.s.ISR.MaybeExpand(p, follower)
	l.s.DeleteRecords.CheckAndComplete(p.TopicPartition)
}

// StateChanged: a leader change answers waiting produces and
// DeleteRecords with NOT_LEADER_OR_FOLLOWER and fetches with the new
// error; an ISR change may decide a produce
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND). A partition stopped and deleted
// (StopReplica with delete_partitions: stage 03 tells it after the log is
// gone) loses its producer state, so that one of the same name created
// later starts from its own log, and no snapshot of it lands in that
// one's directory.
func (l *listener) StateChanged(p *replica.Partition) {
	if p.Role() == replica.None && !l.s.producers.holds(p) {
		l.s.producers.forget(p)
	}
	l.s.Produces.CheckAndComplete(p.TopicPartition)
	l.s.Fetches.CheckAndComplete(p.TopicPartition)
	l.s.DeleteRecords.CheckAndComplete(p.TopicPartition)
	if l.stateChanged != nil {
		l.stateChanged(p)
	}
}
