package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// RequestedTopicIDs returns the topic ids a Metadata request asks for, each
// once, in the order they first appear. Only v12 names topics by id (v10
// and v11 carry the field, but Kafka never served it); a request that
// names any id is answered for its ids alone, as Kafka's
// handleTopicMetadataRequest does. None: the request names topics by name
// (or asks for all).
func RequestedTopicIDs(req *kmsg.MetadataRequest, version int16) []store.TopicID {
	if version < 12 {
		return nil
	}
	var ids []store.TopicID
	seen := map[store.TopicID]bool{}
	for _, t := range req.Topics {
		id := store.TopicID(t.TopicID)
		if !id.IsZero() && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// UnknownTopicIDMetadata answers a Metadata request for an id this broker
// cannot name: no name, the id, UNKNOWN_TOPIC_ID.
func UnknownTopicIDMetadata(id store.TopicID) kmsg.MetadataResponseTopic {
	return kmsg.MetadataResponseTopic{ErrorCode: kerr.UnknownTopicID.Code, TopicID: id}
}

// metadataByTopicID answers a v12 request that names topics by id, from
// the store, the ids it cannot name first (as Kafka orders them); false if
// it names none.
func (b *Broker) metadataByTopicID(req *kmsg.MetadataRequest, version int16, resp *kmsg.MetadataResponse) bool {
	ids := RequestedTopicIDs(req, version)
	var known []string
	for _, id := range ids {
		if name, ok := b.store.TopicName(id); ok {
			known = append(known, name)
		} else {
			resp.Topics = append(resp.Topics, UnknownTopicIDMetadata(id))
		}
	}
	for _, name := range known {
		resp.Topics = append(resp.Topics, b.topicMetadata(name))
	}
	return len(ids) > 0
}
