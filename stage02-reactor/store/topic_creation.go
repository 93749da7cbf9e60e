package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// creatingMarkerPrefix names the file that marks a topic whose creation is
// under way: ".creating~<topic>" in the log directory ('~' is not allowed
// in topic names, so no partition directory can look like one). A
// start-up that finds one deletes whatever partitions of that topic exist,
// since the creation never finished and was never acknowledged.
const creatingMarkerPrefix = ".creating~"

// CreateTopic creates a topic with all its partitions on this broker, the
// single-broker case. It is all or nothing: a creation that fails (out of
// file descriptors, a full disk) removes what it made, and one that a
// crash interrupts is removed at the next start. The store's lock is held
// only to reserve the name and the partitions and to publish them, so other
// clients are served while the files are created. A topic that would take
// the broker past MaxPartitions is refused with ErrTooManyPartitions.
func (s *Store) CreateTopic(name string, partitions int32, configs map[string]string) ([]*Partition, error) {
	if err := ValidateTopicName(name); err != nil {
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

	// A single broker is its own controller: it gives the topic its id
	// (from stage 05 the controller does, in ZooKeeper).
	id := NewTopicID()
	created, err := s.createLogs(name, id, partitions, configs, cfg)

	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.creating, name)
	if err != nil {
		return nil, err
	}
	for _, p := range created {
		s.addLocked(p)
		s.setTopicIDLocked(p.TopicPartition, id)
	}
	s.logger.Info("created topic", "topic", name, "topic_id", id, "partitions", partitions, "configs", configs)
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
// configs, then one log per partition with its partition.metadata (the
// topic id), then the marker goes. On failure,
// the marker's removal included (left behind, it would undo an
// acknowledged topic at the next start), it removes everything it made,
// marker last.
func (s *Store) createLogs(name string, id TopicID, partitions int32, configs map[string]string, cfg commitlog.Config) (created []*Partition, err error) {
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
			s.setTopicConfigsLocked(name, nil)
			s.mu.Unlock()
			err = errors.Join(err, s.persistTopicConfigs())
		}
		if rerr := os.Remove(marker); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			s.logger.Error("could not remove a failed topic creation's marker; the next start removes the topic",
				"topic", name, "marker", marker, "err", rerr)
		}
	}()
	if len(configs) > 0 {
		s.mu.Lock()
		s.setTopicConfigsLocked(name, configs)
		s.mu.Unlock()
		if err := s.persistTopicConfigs(); err != nil {
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
	dirs, ids := make([]string, len(created)), make([]TopicID, len(created))
	for i, p := range created {
		dirs[i], ids[i] = p.Log.Dir(), id
	}
	if err := errors.Join(writePartitionMetadata(dirs, ids)...); err != nil {
		return created, fmt.Errorf("create topic %s: topic id: %w", name, err)
	}
	if err := commitlog.RemoveFileDurably(marker); err != nil {
		return created, fmt.Errorf("create topic %s: finishing: %w", name, err)
	}
	return created, nil
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
		if err := s.persistTopicConfigs(); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeTopicLocked forgets a topic and deletes its logs at once (those that
// opened and those offline) and its configs in memory (the caller persists
// them): a creation undone. Called with mu held, or before the store is
// shared.
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
	s.setTopicConfigsLocked(topic, nil)
	return errors.Join(errs...)
}
