package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Options are the parts of a Store that are not Kafka configuration.
type Options struct {
	// MaxPartitions is the most partitions the store will hold; creating
	// more fails with ErrTooManyPartitions. 0 means DefaultMaxPartitions().
	MaxPartitions int
	// RetentionLimit returns the offset retention may not delete past in a
	// partition's log; the store hands it to its commitlog.Manager
	// (ManagerOptions.RetentionLimit). A replicating broker (stage 03)
	// passes the partition's high watermark, so that retention never
	// deletes records that are not committed yet. nil means the log end
	// offset, right for a single broker, whose every record is committed
	// once appended.
	RetentionLimit func(tp commitlog.TopicPartition, l *commitlog.Log) int64
	// CleanLimit is ManagerOptions.CleanLimit: where the log cleaner stops
	// (stage 04: the last stable offset). nil: RetentionLimit's.
	CleanLimit func(tp commitlog.TopicPartition, l *commitlog.Log) int64
	// StartOffsetAdvanced is called after retention moved a log's start
	// (ManagerOptions.StartOffsetAdvanced): stage 03 forgets the leader
	// epochs that ended before it. nil: nobody needs to know.
	StartOffsetAdvanced func(tp commitlog.TopicPartition, l *commitlog.Log, start int64)
	// ClusterID is the cluster's id when something outside the directory
	// knows it: from stage 05 on, ZooKeeper's /cluster/id. It is written
	// to a new meta.properties, and a directory whose meta.properties names
	// another cluster is refused (Kafka's InconsistentClusterIdException).
	// "": a new directory gets a random id (a single broker is its own
	// cluster).
	ClusterID string
	Logger    *slog.Logger // slog.Default if nil
}

// Store is the broker's partition store: the partitions whose replicas this
// broker holds, each a log of a commitlog.Manager over the log directory,
// and the topics' own configs. A single broker holds every partition of
// every topic; from stage 03 a broker holds the replicas it is assigned, so
// the store is keyed by partition, with an index by topic so that a
// Metadata request costs what it names, not what the broker holds.
//
// Creating a topic takes the store's lock only to reserve its name and its
// partitions and to publish them: the files are created meanwhile, with
// every other request served.
type Store struct {
	dir           string
	logs          *commitlog.Manager
	defaults      commitlog.Config // the broker's log config, before topic overrides
	clusterID     string
	maxPartitions int
	logger        *slog.Logger

	mu         sync.RWMutex
	partitions map[commitlog.TopicPartition]*Partition // Protected by mu.
	topics     map[string][]*Partition                 // by topic, in partition order. Protected by mu.
	offline    map[string]map[int32]error              // by topic: logs that failed to open. Protected by mu.
	creating   map[string]int32                        // topics being created: partitions reserved. Protected by mu.
	pending    int                                     // single partitions being created (CreatePartition). Protected by mu.
	configs    map[string]map[string]string            // topic -> its overrides. Protected by mu; written to disk under configsMu.

	// Topic ids (topic_ids.go), from the partitions' partition.metadata.
	partitionIDs map[commitlog.TopicPartition]TopicID // partitions that have one. Protected by mu.
	topicIDs     map[string]TopicID                   // a topic's id: its first partition's. Protected by mu.
	topicNames   map[TopicID]string                   // the inverse of topicIDs. Protected by mu.
	assignMu     sync.Mutex                           // serializes AssignTopicID's writes of partition.metadata

	// configsMu serializes the writers of topic-configs.json
	// (persistTopicConfigs), and is held across the write and its fsyncs.
	// It is taken before mu, which a writer holds only to change or copy
	// the configs: no lookup ever waits for the disk.
	configsMu sync.Mutex
}

// Open opens the log directory dir for broker brokerID, recovering its
// logs if the last shutdown was not clean, and finds its partitions again.
// A topic whose creation a crash interrupted is removed.
func Open(dir string, brokerID int32, cfg commitlog.ManagerConfig, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxPartitions <= 0 {
		opts.MaxPartitions = DefaultMaxPartitions()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	clusterID, err := loadMetaProperties(dir, brokerID, opts.ClusterID)
	if err != nil {
		return nil, err
	}
	configs, err := loadTopicConfigs(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, defaults: cfg.Log, clusterID: clusterID, maxPartitions: opts.MaxPartitions, logger: opts.Logger,
		partitions: map[commitlog.TopicPartition]*Partition{}, topics: map[string][]*Partition{},
		offline: map[string]map[int32]error{}, creating: map[string]int32{}, configs: configs,
		partitionIDs: map[commitlog.TopicPartition]TopicID{}, topicIDs: map[string]TopicID{}, topicNames: map[TopicID]string{}}
	s.logs, err = commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{
		RetentionLimit: opts.RetentionLimit, CleanLimit: opts.CleanLimit, StartOffsetAdvanced: opts.StartOffsetAdvanced,
		TopicConfig: s.topicConfig, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	for tp, err := range s.logs.Offline() {
		if s.offline[tp.Topic] == nil {
			s.offline[tp.Topic] = map[int32]error{}
		}
		s.offline[tp.Topic][tp.Partition] = err
	}
	for _, tp := range s.logs.Partitions() {
		l, _ := s.logs.Get(tp)
		s.addLocked(&Partition{TopicPartition: tp, Log: l})
	}
	if err := s.loadTopicIDsLocked(); err != nil {
		s.logs.Close()
		return nil, err
	}
	if err := s.finishInterruptedCreations(); err != nil {
		s.logs.Close()
		return nil, err
	}
	return s, nil
}

// addLocked publishes a partition. Called with mu held (or before the store
// is shared).
func (s *Store) addLocked(p *Partition) {
	s.partitions[p.TopicPartition] = p
	parts := s.topics[p.Topic]
	i, _ := slices.BinarySearchFunc(parts, p.Partition, func(q *Partition, id int32) int { return int(q.Partition) - int(id) })
	s.topics[p.Topic] = slices.Insert(parts, i, p)
}

// removeLocked forgets a partition. Called with mu held. The topic index's
// slices never leave the store (readers get copies), so they are edited in
// place.
func (s *Store) removeLocked(tp commitlog.TopicPartition) {
	delete(s.partitions, tp)
	parts := slices.DeleteFunc(s.topics[tp.Topic], func(p *Partition) bool { return p.Partition == tp.Partition })
	if len(parts) == 0 {
		delete(s.topics, tp.Topic)
	} else {
		s.topics[tp.Topic] = parts
	}
	s.forgetTopicIDLocked(tp)
}

// DeleteOldSegments applies retention to every partition now; the logs'
// Manager also runs it every log.retention.check.interval.ms. It returns
// how many segments it deleted.
func (s *Store) DeleteOldSegments() (int, error) { return s.logs.DeleteOldSegments() }

// CleanPartition runs the log cleaner on one partition now
// (commitlog.Manager.CleanPartition), whatever its dirty ratio.
func (s *Store) CleanPartition(tp commitlog.TopicPartition) (commitlog.CleanStats, error) {
	return s.logs.CleanPartition(tp)
}

// Dir is the log directory.
func (s *Store) Dir() string { return s.dir }

// ClusterID is the id in meta.properties.
func (s *Store) ClusterID() string { return s.clusterID }

// Partition returns a partition this broker holds.
func (s *Store) Partition(topic string, partition int32) (*Partition, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.partitions[commitlog.TopicPartition{Topic: topic, Partition: partition}]
	return p, ok
}

// Lookup returns a partition this broker holds, or the Kafka error code for
// one it cannot serve: KAFKA_STORAGE_ERROR for a partition whose log is
// offline, UNKNOWN_TOPIC_OR_PARTITION for one it does not have.
func (s *Store) Lookup(topic string, partition int32) (*Partition, int16) {
	tp := commitlog.TopicPartition{Topic: topic, Partition: partition}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p, ok := s.partitions[tp]; ok {
		return p, 0
	}
	if _, ok := s.offline[topic][partition]; ok {
		return nil, kerrKafkaStorageError
	}
	return nil, kerrUnknownTopicOrPartition
}

// Offline lists the partitions whose logs could not be opened, with why.
func (s *Store) Offline() map[commitlog.TopicPartition]error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[commitlog.TopicPartition]error{}
	for topic, parts := range s.offline {
		for id, err := range parts {
			out[commitlog.TopicPartition{Topic: topic, Partition: id}] = err
		}
	}
	return out
}

// Partitions lists the partitions this broker holds, by topic and number.
func (s *Store) Partitions() []*Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Partition, 0, len(s.partitions))
	for _, p := range s.partitions {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Partition) int { return a.TopicPartition.Compare(b.TopicPartition) })
	return out
}

// TopicPartitions lists the partitions of one topic this broker holds, in
// partition order. It costs the topic's partitions, whatever else the
// broker holds.
func (s *Store) TopicPartitions(topic string) []*Partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.topics[topic])
}

// TopicState returns a topic's partitions this broker serves, in partition
// order, and the numbers of those whose logs are offline. It costs the
// topic's partitions, whatever else the broker holds.
func (s *Store) TopicState(topic string) (parts []*Partition, offline []int32) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id := range s.offline[topic] {
		offline = append(offline, id)
	}
	slices.Sort(offline)
	return slices.Clone(s.topics[topic]), offline
}

// TopicNames lists the topics with partitions here, served or offline,
// sorted.
func (s *Store) TopicNames() []string {
	s.mu.RLock()
	out := make([]string, 0, len(s.topics)+len(s.offline))
	for name := range s.topics {
		out = append(out, name)
	}
	for name := range s.offline {
		if _, ok := s.topics[name]; !ok {
			out = append(out, name)
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	return out
}

// CreatePartition creates the log of one partition, with its topic's
// configs. Stage 03 calls it when the controller makes this broker a
// replica.
func (s *Store) CreatePartition(tp commitlog.TopicPartition) (*Partition, error) {
	if err := ValidateTopicName(tp.Topic); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.reserveLocked(1); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.pending++
	s.mu.Unlock()
	l, err := s.logs.Create(tp, s.topicConfig(tp.Topic))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if err != nil {
		return nil, err
	}
	p := &Partition{TopicPartition: tp, Log: l}
	s.addLocked(p)
	return p, nil
}

// DeletePartition deletes a partition's log.
func (s *Store) DeletePartition(tp commitlog.TopicPartition) error {
	s.mu.Lock()
	s.removeLocked(tp)
	s.mu.Unlock()
	return s.logs.Delete(tp)
}

// DeleteTopic deletes every partition of a topic this broker holds,
// offline ones included, and the topic's configs.
func (s *Store) DeleteTopic(name string) error {
	s.mu.Lock()
	parts, offline := s.topics[name], s.offline[name]
	delete(s.topics, name)
	delete(s.offline, name)
	for _, p := range parts {
		delete(s.partitions, p.TopicPartition)
		s.forgetTopicIDLocked(p.TopicPartition)
	}
	_, hadConfigs := s.configs[name]
	hadConfigs = hadConfigs && len(parts)+len(offline) > 0
	if hadConfigs {
		s.setTopicConfigsLocked(name, nil)
	}
	s.mu.Unlock()
	if len(parts)+len(offline) == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	var errs []error
	if hadConfigs {
		errs = append(errs, s.persistTopicConfigs())
	}
	for _, p := range parts {
		errs = append(errs, s.logs.Delete(p.TopicPartition))
	}
	for id := range offline {
		errs = append(errs, s.logs.DeleteOffline(commitlog.TopicPartition{Topic: name, Partition: id}))
	}
	s.logger.Info("deleted topic", "topic", name)
	return errors.Join(errs...)
}

// Close shuts the logs down cleanly (checkpoints, clean-shutdown marker).
func (s *Store) Close() error { return s.logs.Close() }
