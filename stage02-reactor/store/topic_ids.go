package store

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// TopicID is a topic's id, Kafka's Uuid (KIP-516, Kafka 2.8): 16 random
// bytes, written as unpadded URL-safe base64 (22 characters). A name may
// be reused after its topic was deleted; the id is never, so a client
// that names a topic by id (Fetch v13+, Metadata v12) cannot read the new
// topic believing it is the old one. The zero id means "none": a topic
// from before ids, or a request that names topics by name.
type TopicID [16]byte

// String is the id as Kafka writes it.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether the id is the zero id ("none").
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID reads an id written by String.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("store: %q is not a topic id", s)
	}
	copy(id[:], b)
	return id, nil
}

// NewTopicID is a random id. Like Kafka's Uuid.randomUuid it is never the
// zero id, nor one whose text starts with '-' (which a command line would
// take for a flag).
func NewTopicID() TopicID {
	for {
		var id TopicID
		rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40 // version 4, as Java's UUID.randomUUID
		id[8] = id[8]&0x3f | 0x80 // IETF variant
		if !id.IsZero() && !strings.HasPrefix(id.String(), "-") {
			return id
		}
	}
}

// ErrInconsistentTopicID: a partition this broker holds belongs to
// another topic of the same name than the one a request names (the topic
// was deleted and created again while this broker kept the old log).
// Kafka answers INCONSISTENT_TOPIC_ID and leaves the partition alone.
var ErrInconsistentTopicID = errors.New("store: topic id does not match the partition's")

// partitionMetadataFile is Kafka's partition.metadata: the topic id of the
// partition whose directory holds it, written once, when the broker first
// learns the id (LeaderAndIsr v5+), and read back at start.
const partitionMetadataFile = "partition.metadata"

// encodePartitionMetadata is the file's content, as Kafka's
// PartitionMetadata.encode writes it (no final newline).
func encodePartitionMetadata(id TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

// readPartitionMetadata reads the topic id in a partition directory; the
// zero id if the file is not there.
func readPartitionMetadata(dir string) (TopicID, error) {
	path := filepath.Join(dir, partitionMetadataFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return TopicID{}, nil
	}
	if err != nil {
		return TopicID{}, err
	}
	var version, id string
	for _, line := range bytes.Split(data, []byte("\n")) {
		k, v, ok := strings.Cut(string(line), ":")
		switch k = strings.TrimSpace(k); {
		case !ok:
		case k == "version":
			version = strings.TrimSpace(v)
		case k == "topic_id":
			id = strings.TrimSpace(v)
		}
	}
	if version != "0" {
		return TopicID{}, fmt.Errorf("%s: unknown version %q", path, version)
	}
	return ParseTopicID(id)
}

// loadTopicIDsLocked reads the partition.metadata of every partition held.
// Called from Open, before the store is shared.
func (s *Store) loadTopicIDsLocked() error {
	for tp, p := range s.partitions {
		id, err := readPartitionMetadata(p.Log.Dir())
		if err != nil {
			return err
		}
		s.setTopicIDLocked(tp, id)
	}
	return nil
}

// setTopicIDLocked records a partition's id and indexes its topic by it.
// Called with mu held.
func (s *Store) setTopicIDLocked(tp commitlog.TopicPartition, id TopicID) {
	if id.IsZero() {
		return
	}
	s.partitionIDs[tp] = id
	if _, ok := s.topicIDs[tp.Topic]; !ok {
		s.topicIDs[tp.Topic] = id
		s.topicNames[id] = tp.Topic
	}
}

// forgetTopicIDLocked drops a removed partition's id, and its topic's once
// no partition of the topic is left. Called with mu held, after the
// partition left s.topics.
func (s *Store) forgetTopicIDLocked(tp commitlog.TopicPartition) {
	delete(s.partitionIDs, tp)
	if len(s.topics[tp.Topic]) > 0 {
		return
	}
	if id, ok := s.topicIDs[tp.Topic]; ok {
		delete(s.topicIDs, tp.Topic)
		delete(s.topicNames, id)
	}
}

// TopicID is the id of a topic this broker holds partitions of, from their
// partition.metadata files; false if it has none.
func (s *Store) TopicID(topic string) (TopicID, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.topicIDs[topic]
	return id, ok
}

// TopicName is the name of the topic with id, among those this broker
// holds partitions of.
func (s *Store) TopicName(id TopicID) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	name, ok := s.topicNames[id]
	return name, ok
}

// CheckTopicID is Kafka's hasConsistentTopicId for a partition this broker
// holds, as a Kafka error code: 0 if the request names no id (the zero
// id), if the partition has none yet, or if they agree;
// INCONSISTENT_TOPIC_ID if the partition belongs to another topic of that
// name. A partition not held is 0: whoever looks it up reports that.
func (s *Store) CheckTopicID(tp commitlog.TopicPartition, id TopicID) int16 {
	if id.IsZero() {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if have, ok := s.partitionIDs[tp]; ok && have != id {
		return kerrInconsistentTopicID
	}
	return 0
}

// AssignTopicID records the id of a partition this broker holds: it
// writes partition.metadata the first time, and refuses another id than
// the one written (ErrInconsistentTopicID), as Kafka's
// Partition.checkOrSetTopicId. The zero id assigns nothing.
func (s *Store) AssignTopicID(tp commitlog.TopicPartition, id TopicID) error {
	return s.AssignTopicIDs(map[commitlog.TopicPartition]TopicID{tp: id})[tp]
}

// topicIDWriters bounds the partition.metadata files written at once
// (writePartitionMetadata). Each write is fsynced with its directory (about 3 ms on an ext4
// disk); written side by side, the file system commits them together: a
// LeaderAndIsr for 10,000 new replicas takes seconds, not 30.
const topicIDWriters = 32

// AssignTopicIDs is AssignTopicID for many partitions, the files written
// side by side; it returns the errors by partition (none: every id is
// recorded). Stage 03 calls it with the partitions of a LeaderAndIsr
// request.
func (s *Store) AssignTopicIDs(ids map[commitlog.TopicPartition]TopicID) map[commitlog.TopicPartition]error {
	// assignMu orders assignments, so that the files and the map agree;
	// mu is not held while the files are written and fsynced.
	s.assignMu.Lock()
	defer s.assignMu.Unlock()
	errs := map[commitlog.TopicPartition]error{}
	type write struct {
		tp commitlog.TopicPartition
		id TopicID
		p  *Partition
	}
	var writes []write
	s.mu.RLock()
	for tp, id := range ids {
		p, held := s.partitions[tp]
		have := s.partitionIDs[tp]
		switch {
		case id.IsZero() || have == id:
		case !held:
			errs[tp] = fmt.Errorf("%w: %s", ErrUnknownTopic, tp)
		case !have.IsZero():
			errs[tp] = fmt.Errorf("%w: %s holds topic id %s, the request names %s", ErrInconsistentTopicID, tp, have, id)
		default:
			writes = append(writes, write{tp, id, p})
		}
	}
	s.mu.RUnlock()

	dirs, wids := make([]string, len(writes)), make([]TopicID, len(writes))
	for i, w := range writes {
		dirs[i], wids[i] = w.p.Log.Dir(), w.id
	}
	failed := writePartitionMetadata(dirs, wids)

	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range writes {
		switch {
		case failed[i] != nil:
			errs[w.tp] = fmt.Errorf("store: topic id of %s: %w", w.tp, failed[i])
		case s.partitions[w.tp] == w.p: // not deleted meanwhile (its directory went with it)
			s.setTopicIDLocked(w.tp, w.id)
		}
	}
	return errs
}

// writePartitionMetadata writes partition.metadata with ids[i] into each
// partition directory dirs[i], topicIDWriters at a time, and returns the
// errors by index.
func writePartitionMetadata(dirs []string, ids []TopicID) []error {
	failed := make([]error, len(dirs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(topicIDWriters, len(dirs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				failed[i] = commitlog.WriteFileAtomic(filepath.Join(dirs[i], partitionMetadataFile), encodePartitionMetadata(ids[i]))
			}
		}()
	}
	for i := range dirs {
		next <- i
	}
	close(next)
	wg.Wait()
	return failed
}
