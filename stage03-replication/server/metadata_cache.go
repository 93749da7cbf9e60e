package server

import (
	"slices"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerEndpoint is a live broker as UpdateMetadata describes it.
type BrokerEndpoint struct {
	ID int32
	// Host and Port are its first endpoint's address (its inter-broker
	// listener's, for Server.Endpoint); ForListener picks the one of a
	// listener.
	Host string
	Port int32
	Rack *string
	// Listeners are its endpoints, one per listener (see listeners.go).
	Listeners []ListenerEndpoint
}

// PartitionMetadata is one partition's state as the controller last said.
type PartitionMetadata struct {
	Leader          int32 // -1: no leader
	LeaderEpoch     int32
	Replicas        []int32
	ISR             []int32
	OfflineReplicas []int32
}

// MetadataCache is Kafka's MetadataCache: what the controller's
// UpdateMetadata requests said about every broker and partition, so that
// any broker can answer a client's Metadata request, not only a partition's
// leader.
type MetadataCache struct {
	mu           sync.RWMutex
	controllerID int32                                  // -1 until told. Protected by mu.
	brokers      map[int32]BrokerEndpoint               // live brokers. Protected by mu.
	topics       map[string]map[int32]PartitionMetadata // Protected by mu.
	topicIDs     topicIDs                               // UpdateMetadata v7+ (metadata_cache_ids.go). Protected by mu.
}

func newMetadataCache() *MetadataCache {
	return &MetadataCache{controllerID: -1, brokers: map[int32]BrokerEndpoint{}, topics: map[string]map[int32]PartitionMetadata{},
		topicIDs: newTopicIDs()}
}

// update applies an UpdateMetadata request: the live brokers are replaced,
// the partition states it carries are replaced (a partition with leader -2,
// Kafka's LeaderDuringDelete, is removed).
func (c *MetadataCache) update(req *kmsg.UpdateMetadataRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.controllerID = req.ControllerID
	c.brokers = map[int32]BrokerEndpoint{}
	for _, b := range req.LiveBrokers {
		c.brokers[b.ID] = endpointFromUpdate(b)
	}
	states := req.PartitionStates        // v0-v4
	for _, ts := range req.TopicStates { // v5+
		c.topicIDs.set(ts.Topic, ts.TopicID)
		for _, ps := range ts.PartitionStates {
			ps.Topic = ts.Topic
			states = append(states, ps)
		}
	}
	for _, ps := range states {
		if ps.Leader == leaderDuringDelete {
			delete(c.topics[ps.Topic], ps.Partition)
			if len(c.topics[ps.Topic]) == 0 {
				delete(c.topics, ps.Topic)
				c.topicIDs.forget(ps.Topic)
			}
			continue
		}
		if c.topics[ps.Topic] == nil {
			c.topics[ps.Topic] = map[int32]PartitionMetadata{}
		}
		c.topics[ps.Topic][ps.Partition] = PartitionMetadata{Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			Replicas: slices.Clone(ps.Replicas), ISR: slices.Clone(ps.ISR), OfflineReplicas: slices.Clone(ps.OfflineReplicas)}
	}
}

// leaderDuringDelete is the leader the controller sends for a partition
// whose topic is being deleted.
const leaderDuringDelete = -2

// ControllerID is the controller's broker id, or -1.
func (c *MetadataCache) ControllerID() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.controllerID
}

// Brokers lists the live brokers by id.
func (c *MetadataCache) Brokers() []BrokerEndpoint {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]BrokerEndpoint, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Broker returns a live broker's endpoint.
func (c *MetadataCache) Broker(id int32) (BrokerEndpoint, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.brokers[id]
	return b, ok
}

// Topics lists the known topics.
func (c *MetadataCache) Topics() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.topics))
	for t := range c.topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Partitions returns a topic's partitions by number, or nil.
func (c *MetadataCache) Partitions(topic string) map[int32]PartitionMetadata {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.topics[topic]
	if !ok {
		return nil
	}
	out := make(map[int32]PartitionMetadata, len(ps))
	for p, m := range ps {
		out[p] = m
	}
	return out
}
