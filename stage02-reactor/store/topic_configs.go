package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// topicConfigsFile holds each topic's own configs. From stage 05 they live
// in ZooKeeper, as in Kafka; a single broker keeps them here.
const topicConfigsFile = "topic-configs.json"

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

// ValidateTopicConfigs checks a topic's configs against the log's keys.
func (s *Store) ValidateTopicConfigs(configs map[string]string) (commitlog.Config, error) {
	return s.defaults.Override(configs)
}

// SetTopicConfigs validates and stores a topic's own configs; nil removes
// them. Partitions created afterwards use them, and the topic's logs here
// take them at once (Log.SetConfig), as Kafka's LogManager.updateTopicConfig
// when a topic's config changes (stage 05: /config/changes).
func (s *Store) SetTopicConfigs(topic string, configs map[string]string) error {
	cfg, err := s.ValidateTopicConfigs(configs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.setTopicConfigsLocked(topic, configs)
	s.mu.Unlock()
	if err := s.persistTopicConfigs(); err != nil {
		return err
	}
	for _, p := range s.TopicPartitions(topic) {
		p.Log.SetConfig(cfg)
	}
	return nil
}

// TopicConfigs is a topic's own configs, as last set.
func (s *Store) TopicConfigs(topic string) map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.configs[topic])
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

// setTopicConfigsLocked sets (or with nil, removes) one topic's configs
// in memory; persistTopicConfigs writes them to disk. Called with mu held.
func (s *Store) setTopicConfigsLocked(topic string, configs map[string]string) {
	if configs == nil {
		delete(s.configs, topic)
	} else {
		s.configs[topic] = maps.Clone(configs) // the caller's map stays the caller's
	}
}

// persistTopicConfigs writes every topic's configs, as they are now, to
// topic-configs.json (a temporary file, fsynced and renamed). configsMu
// orders the writers: each copies the configs after the change it
// persists, so an older copy never replaces a newer one. mu is held only
// for the copy, never across the write: lookups, which every Produce and
// Fetch makes, never wait for the disk. Called with neither lock held.
func (s *Store) persistTopicConfigs() error {
	s.configsMu.Lock()
	defer s.configsMu.Unlock()
	s.mu.RLock()
	data, err := json.MarshalIndent(s.configs, "", "  ")
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	return commitlog.WriteFileAtomic(filepath.Join(s.dir, topicConfigsFile), data)
}
