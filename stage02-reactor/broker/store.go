package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Errors from the Store.
var (
	ErrTopicExists  = errors.New("broker: topic already exists")
	ErrUnknownTopic = errors.New("broker: unknown topic")
	// ErrTooManyPartitions: creating the partitions would take the broker
	// past the partitions it can hold (StoreOptions.MaxPartitions).
	ErrTooManyPartitions = errors.New("broker: too many partitions")
)

// creatingMarkerPrefix names the file that marks a topic whose creation is
// under way: ".creating~<topic>" in the log directory ('~' is not allowed
// in topic names, so no partition directory can look like one). A
// start-up that finds one deletes whatever partitions of that topic exist,
// since the creation never finished and was never acknowledged.
const creatingMarkerPrefix = ".creating~"

// Partition is one partition this broker holds: its log, and a Signal
// raised after every append (long-poll fetches; stage 03's followers).
type Partition struct {
	commitlog.TopicPartition
	Log      *commitlog.Log
	Appended Signal
}

// StoreOptions are the parts of a Store that are not Kafka configuration.
type StoreOptions struct {
	// MaxPartitions is the most partitions the store will hold; creating
	// more fails with ErrTooManyPartitions. 0 means DefaultMaxPartitions().
	MaxPartitions int
	Logger        *slog.Logger // slog.Default if nil
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
	configs    map[string]map[string]string            // topic -> its overrides. Protected by mu.
}

// OpenStore opens the log directory dir for broker brokerID, recovering its
// logs if the last shutdown was not clean, and finds its partitions again.
// A topic whose creation a crash interrupted is removed.
func OpenStore(dir string, brokerID int32, cfg commitlog.ManagerConfig, opts StoreOptions) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxPartitions <= 0 {
		opts.MaxPartitions = DefaultMaxPartitions()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	clusterID, err := loadMetaProperties(dir, brokerID)
	if err != nil {
		return nil, err
	}
	configs, err := loadTopicConfigs(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, defaults: cfg.Log, clusterID: clusterID, maxPartitions: opts.MaxPartitions, logger: opts.Logger,
		partitions: map[commitlog.TopicPartition]*Partition{}, topics: map[string][]*Partition{},
		offline: map[string]map[int32]error{}, creating: map[string]int32{}, configs: configs}
	s.logs, err = commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{TopicConfig: s.topicConfig, Logger: opts.Logger})
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
	if err := s.finishInterruptedCreations(); err != nil {
		s.logs.Close()
		return nil, err
	}
	return s, nil
}

// finishInterruptedCreations removes the partitions of every topic whose
// creation marker is still there: a crash cut the creation short.
func (s *Store) finishInterruptedCreations() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		topic, ok := strings.CutPrefix(e.Name(), creatingMarkerPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		s.logger.Warn("removing a topic whose creation did not finish", "topic", topic)
		if err := s.removeTopicLocked(topic); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeTopicLocked forgets a topic and deletes its logs at once (those that
// opened and those offline) and its configs: a creation undone. Called with
// mu held, or before the store is shared.
func (s *Store) removeTopicLocked(topic string) error {
	var errs []error
	for _, p := range s.topics[topic] {
		delete(s.partitions, p.TopicPartition)
		errs = append(errs, s.logs.DeleteNow(p.TopicPartition))
	}
	delete(s.topics, topic)
	for id := range s.offline[topic] {
		errs = append(errs, s.logs.DeleteOffline(commitlog.TopicPartition{Topic: topic, Partition: id}))
	}
	delete(s.offline, topic)
	if _, ok := s.configs[topic]; ok {
		errs = append(errs, s.saveTopicConfigsLocked(topic, nil))
	}
	return errors.Join(errs...)
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

// countLocked is the partitions held, offline or being created: what
// counts against MaxPartitions. Called with mu held.
func (s *Store) countLocked() int {
	n := len(s.partitions) + s.pending
	for _, parts := range s.offline {
		n += len(parts)
	}
	for _, reserved := range s.creating {
		n += int(reserved)
	}
	return n
}

// reserveLocked checks that n more partitions fit. Called with mu held.
func (s *Store) reserveLocked(n int) error {
	if held := s.countLocked(); held+n > s.maxPartitions {
		return fmt.Errorf("%w: %d more would make %d, and this broker holds at most %d (each partition keeps a file open; "+
			"the limit follows the open-file limit, see DefaultMaxPartitions)", ErrTooManyPartitions, n, held+n, s.maxPartitions)
	}
	return nil
}

// Fits reports, as ErrTooManyPartitions, whether n more partitions would
// take the broker past MaxPartitions.
func (s *Store) Fits(n int) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.reserveLocked(n)
}

// CreatePartition creates the log of one partition, with its topic's
// configs. Stage 03 calls it when the controller makes this broker a
// replica.
func (s *Store) CreatePartition(tp commitlog.TopicPartition) (*Partition, error) {
	if err := validateTopicName(tp.Topic); err != nil {
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

// CreateTopic creates a topic with all its partitions on this broker, the
// single-broker case. It is all or nothing: a creation that fails (out of
// file descriptors, a full disk) removes what it made, and one that a
// crash interrupts is removed at the next start. The store's lock is held
// only to reserve the name and the partitions and to publish them, so other
// clients are served while the files are created. A topic that would take
// the broker past MaxPartitions is refused with ErrTooManyPartitions.
func (s *Store) CreateTopic(name string, partitions int32, configs map[string]string) ([]*Partition, error) {
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	cfg, err := s.ValidateTopicConfigs(configs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.checkNewTopicLocked(name); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if err := s.reserveLocked(int(partitions)); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.creating[name] = partitions
	s.mu.Unlock()

	created, err := s.createLogs(name, partitions, configs, cfg)

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.creating, name)
	if err != nil {
		return nil, err
	}
	for _, p := range created {
		s.addLocked(p)
	}
	s.logger.Info("created topic", "topic", name, "partitions", partitions, "configs", configs)
	return slices.Clone(created), nil
}

// checkNewTopicLocked refuses a name in use: held, offline or being
// created. Called with mu held.
func (s *Store) checkNewTopicLocked(name string) error {
	if _, ok := s.topics[name]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	if _, ok := s.creating[name]; ok {
		return fmt.Errorf("%w: %s (being created)", ErrTopicExists, name)
	}
	if _, ok := s.offline[name]; ok {
		return fmt.Errorf("%w: %s (offline: delete it to free the name)", ErrTopicExists, name)
	}
	return nil
}

// createLogs makes the topic's files under its creation marker: the
// configs, then one log per partition, then the marker goes. On failure,
// the marker's removal included (left behind, it would undo an
// acknowledged topic at the next start), it removes everything it made,
// marker last.
func (s *Store) createLogs(name string, partitions int32, configs map[string]string, cfg commitlog.Config) (created []*Partition, err error) {
	marker := filepath.Join(s.dir, creatingMarkerPrefix+name)
	if err := commitlog.WriteFileAtomic(marker, nil); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", name, err)
	}
	defer func() {
		if err == nil {
			return
		}
		for _, p := range created {
			err = errors.Join(err, s.logs.DeleteNow(p.TopicPartition))
		}
		if len(configs) > 0 {
			s.mu.Lock()
			err = errors.Join(err, s.saveTopicConfigsLocked(name, nil))
			s.mu.Unlock()
		}
		if rerr := os.Remove(marker); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			s.logger.Error("could not remove a failed topic creation's marker; the next start removes the topic",
				"topic", name, "marker", marker, "err", rerr)
		}
	}()
	if len(configs) > 0 {
		s.mu.Lock()
		err := s.saveTopicConfigsLocked(name, configs)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	for i := range partitions {
		tp := commitlog.TopicPartition{Topic: name, Partition: i}
		l, err := s.logs.Create(tp, cfg)
		if errors.Is(err, commitlog.ErrLogExists) { // its old log is being deleted
			return created, fmt.Errorf("%w: %s is marked for deletion", ErrTopicExists, name)
		}
		if err != nil {
			return created, fmt.Errorf("create topic %s: partition %d of %d: %w", name, i, partitions, err)
		}
		created = append(created, &Partition{TopicPartition: tp, Log: l})
	}
	if err := commitlog.RemoveFileDurably(marker); err != nil {
		return created, fmt.Errorf("create topic %s: finishing: %w", name, err)
	}
	return created, nil
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
	}
	var errs []error
	if _, ok := s.configs[name]; ok && len(parts)+len(offline) > 0 {
		errs = append(errs, s.saveTopicConfigsLocked(name, nil))
	}
	s.mu.Unlock()
	if len(parts)+len(offline) == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
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
