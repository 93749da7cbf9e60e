package broker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Errors from the Store.
var (
	ErrTopicExists  = errors.New("broker: topic already exists")
	ErrUnknownTopic = errors.New("broker: unknown topic")
)

// Files the Store keeps in the log directory beside the partition logs.
const (
	// metaPropertiesFile is Kafka's meta.properties: which broker and
	// cluster the log directory belongs to.
	metaPropertiesFile = "meta.properties"
	// topicConfigsFile holds each topic's own configs. From stage 05 they
	// live in ZooKeeper, as in Kafka; a single broker keeps them here.
	topicConfigsFile = "topic-configs.json"
)

// Signal wakes waiters when something they wait for may have happened: a
// long-poll fetch waiting for records, a producer waiting for replication.
// A waiter registers a channel with a buffer of one; Notify sends on each
// without blocking, so a wake-up is never lost and never piles up.
type Signal struct {
	mu      sync.Mutex             // guards waiters
	waiters map[chan struct{}]bool // channels to signal
}

// Watch registers ch, which should have a buffer of one.
func (s *Signal) Watch(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = map[chan struct{}]bool{}
	}
	s.waiters[ch] = true
}

// Unwatch removes a channel registered with Watch.
func (s *Signal) Unwatch(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters, ch)
}

// Notify signals every registered channel.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Partition is one partition this broker holds: its log, and a Signal
// raised after every append (long-poll fetches; stage 03's followers).
type Partition struct {
	commitlog.TopicPartition
	Log      *commitlog.Log
	Appended Signal
}

// Store is the broker's partition store: the partitions whose replicas this
// broker holds, each a log of a commitlog.Manager over the log directory,
// and the topics' own configs. A single broker holds every partition of
// every topic; from stage 03 a broker holds the replicas it is assigned, so
// the store is keyed by partition, not by topic.
type Store struct {
	dir       string
	logs      *commitlog.Manager
	defaults  commitlog.Config // the broker's log config, before topic overrides
	clusterID string
	logger    *slog.Logger

	mu         sync.RWMutex
	partitions map[commitlog.TopicPartition]*Partition // Protected by mu.
	configs    map[string]map[string]string            // topic -> its overrides. Protected by mu.
}

// OpenStore opens the log directory dir for broker brokerID, recovering its
// logs if the last shutdown was not clean, and finds its partitions again.
func OpenStore(dir string, brokerID int32, cfg commitlog.ManagerConfig, logger *slog.Logger) (*Store, error) {
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
	s := &Store{dir: dir, defaults: cfg.Log, clusterID: clusterID, logger: logger,
		partitions: map[commitlog.TopicPartition]*Partition{}, configs: configs}
	s.logs, err = commitlog.OpenManager(dir, cfg, commitlog.ManagerOptions{TopicConfig: s.topicConfig, Logger: logger})
	if err != nil {
		return nil, err
	}
	for _, tp := range s.logs.Partitions() {
		l, _ := s.logs.Get(tp)
		s.partitions[tp] = &Partition{TopicPartition: tp, Log: l}
	}
	return s, nil
}

// topicConfig is the log config of a topic: the broker's defaults with the
// topic's overrides (which were validated when they were set).
func (s *Store) topicConfig(topic string) commitlog.Config {
	s.mu.RLock()
	overrides := s.configs[topic]
	s.mu.RUnlock()
	c, err := s.defaults.Override(overrides)
	if err != nil {
		s.logger.Error("ignoring bad topic configs", "topic", topic, "err", err)
		return s.defaults
	}
	return c
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

// TopicPartitions lists the partitions of one topic this broker holds.
func (s *Store) TopicPartitions(topic string) []*Partition {
	var out []*Partition
	for _, p := range s.Partitions() {
		if p.Topic == topic {
			out = append(out, p)
		}
	}
	return out
}

// Topics lists the topics this broker holds partitions of.
func (s *Store) Topics() []string {
	var out []string
	for _, p := range s.Partitions() {
		if len(out) == 0 || out[len(out)-1] != p.Topic {
			out = append(out, p.Topic)
		}
	}
	return out
}

// ValidateTopicConfigs checks a topic's configs against the log's keys.
func (s *Store) ValidateTopicConfigs(configs map[string]string) (commitlog.Config, error) {
	return s.defaults.Override(configs)
}

// SetTopicConfigs validates and stores a topic's own configs; nil removes
// them. Partitions created afterwards use them.
func (s *Store) SetTopicConfigs(topic string, configs map[string]string) error {
	if _, err := s.ValidateTopicConfigs(configs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveTopicConfigsLocked(topic, configs)
}

// CreatePartition creates the log of one partition, with its topic's
// configs. Stage 03 calls it when the controller makes this broker a
// replica.
func (s *Store) CreatePartition(tp commitlog.TopicPartition) (*Partition, error) {
	if err := validateTopicName(tp.Topic); err != nil {
		return nil, err
	}
	l, err := s.logs.Create(tp, s.topicConfig(tp.Topic))
	if err != nil {
		return nil, err
	}
	p := &Partition{TopicPartition: tp, Log: l}
	s.mu.Lock()
	s.partitions[tp] = p
	s.mu.Unlock()
	return p, nil
}

// DeletePartition deletes a partition's log.
func (s *Store) DeletePartition(tp commitlog.TopicPartition) error {
	s.mu.Lock()
	delete(s.partitions, tp)
	s.mu.Unlock()
	return s.logs.Delete(tp)
}

// CreateTopic creates a topic with all its partitions on this broker, the
// single-broker case.
func (s *Store) CreateTopic(name string, partitions int32, configs map[string]string) ([]*Partition, error) {
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	if _, err := s.ValidateTopicConfigs(configs); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp := range s.partitions {
		if tp.Topic == name {
			return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
		}
	}
	if len(configs) > 0 {
		if err := s.saveTopicConfigsLocked(name, configs); err != nil {
			return nil, err
		}
	}
	cfg, _ := s.defaults.Override(configs)
	var created []*Partition
	for i := range partitions {
		tp := commitlog.TopicPartition{Topic: name, Partition: i}
		l, err := s.logs.Create(tp, cfg)
		if err != nil {
			for _, p := range created {
				delete(s.partitions, p.TopicPartition)
				s.logs.Delete(p.TopicPartition)
			}
			return nil, err
		}
		p := &Partition{TopicPartition: tp, Log: l}
		s.partitions[tp] = p
		created = append(created, p)
	}
	s.logger.Info("created topic", "topic", name, "partitions", partitions, "configs", configs)
	return created, nil
}

// DeleteTopic deletes every partition of a topic this broker holds, and
// the topic's configs.
func (s *Store) DeleteTopic(name string) error {
	parts := s.TopicPartitions(name)
	if len(parts) == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
	}
	var errs []error
	for _, p := range parts {
		errs = append(errs, s.DeletePartition(p.TopicPartition))
	}
	s.mu.Lock()
	if _, ok := s.configs[name]; ok {
		errs = append(errs, s.saveTopicConfigsLocked(name, nil))
	}
	s.mu.Unlock()
	s.logger.Info("deleted topic", "topic", name)
	return errors.Join(errs...)
}

// Close shuts the logs down cleanly (checkpoints, clean-shutdown marker).
func (s *Store) Close() error { return s.logs.Close() }

// loadMetaProperties reads meta.properties, writing it on first use. A
// directory that belongs to another broker id is refused, as Kafka does.
func loadMetaProperties(dir string, brokerID int32) (clusterID string, err error) {
	path := filepath.Join(dir, metaPropertiesFile)
	props, err := readPropertiesFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := make([]byte, 16)
		rand.Read(id)
		clusterID = base64.RawURLEncoding.EncodeToString(id)
		content := fmt.Sprintf("#\n#%s\nversion=0\nbroker.id=%d\ncluster.id=%s\n",
			time.Now().UTC().Format(time.UnixDate), brokerID, clusterID)
		if err := commitlog.WriteFileAtomic(path, []byte(content)); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		return clusterID, nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if got := props["broker.id"]; got != strconv.Itoa(int(brokerID)) {
		return "", fmt.Errorf("log directory %s belongs to broker.id %s, not %d (see %s)", dir, got, brokerID, path)
	}
	return props["cluster.id"], nil
}

func loadTopicConfigs(dir string) (map[string]map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, topicConfigsFile))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("read %s: %w", topicConfigsFile, err)
	}
	return out, nil
}

// saveTopicConfigsLocked sets (or with nil, removes) one topic's configs
// and persists them all. Called with mu held.
func (s *Store) saveTopicConfigsLocked(topic string, configs map[string]string) error {
	if configs == nil {
		delete(s.configs, topic)
	} else {
		s.configs[topic] = configs
	}
	data, err := json.MarshalIndent(s.configs, "", "  ")
	if err != nil {
		return err
	}
	return commitlog.WriteFileAtomic(filepath.Join(s.dir, topicConfigsFile), data)
}
