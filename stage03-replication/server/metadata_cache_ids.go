package server

import "github.com/kafkaworkbook/workbook/stage02-reactor/store"

// topicIDs is the metadata cache's topic ids (KIP-516), as UpdateMetadata
// v7+ carries them from ZooKeeper (stage 05's controller): every broker
// names every topic's id the same way, so a client may fetch by id from
// any leader. A name whose topic was deleted and created again carries
// its new id; the old one is forgotten, and whoever names it hears
// UNKNOWN_TOPIC_ID.
type topicIDs struct {
	ids   map[string]store.TopicID
	names map[store.TopicID]string
}

func newTopicIDs() topicIDs {
	return topicIDs{ids: map[string]store.TopicID{}, names: map[store.TopicID]string{}}
}

// set records a topic's id; the zero id (a request before v7, or a
// controller that has none) changes nothing.
func (t topicIDs) set(topic string, id store.TopicID) {
	if id.IsZero() {
		return
	}
	if old, ok := t.ids[topic]; ok && old != id {
		delete(t.names, old)
	}
	t.ids[topic] = id
	t.names[id] = topic
}

// forget drops a deleted topic's id.
func (t topicIDs) forget(topic string) {
	if id, ok := t.ids[topic]; ok {
		delete(t.names, id)
		delete(t.ids, topic)
	}
}

// TopicID is a topic's id as the controller last said; the zero id if it
// has not said one.
func (c *MetadataCache) TopicID(topic string) store.TopicID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.topicIDs.ids[topic]
}

// TopicName is the name of the topic with id (broker.TopicNamer): how a
// Fetch v13+ or a Metadata v12 request naming topics by id is read.
func (c *MetadataCache) TopicName(id store.TopicID) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	name, ok := c.topicIDs.names[id]
	return name, ok
}
