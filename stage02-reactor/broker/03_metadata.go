package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Metadata (key 3), v1-v12: which brokers exist and which broker leads each
// partition. Clients ask it first and whenever a partition's leader seems to
// have moved. Here there is one broker: it leads everything, and is its own
// controller (stage 05 elects one).
//
// v1: null topics means all topics. v4: AllowAutoTopicCreation. v8:
// authorized operations (we answer none: there is no authorizer). v9 is
// flexible. v10 adds each topic's id (KIP-516: the single broker gives
// each topic one when it creates it, store.NewTopicID), v11 drops the
// cluster's authorized operations, v12 lets a request name topics by id
// (an id nobody knows: UNKNOWN_TOPIC_ID, metadata_topic_ids.go).
//
// A name asked for twice is answered once (Kafka reads the names into a
// set), and each name costs its own topic's partitions, not the broker's:
// a request naming a million topics costs a million lookups, and no more.
var metadataAPI = API{Key: 3, MinVersion: 1, MaxVersion: 12, Handle: handleMetadata}

func handleMetadata(r *Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	b := r.Broker
	resp := kmsg.NewPtrMetadataResponse()
	host, port := b.advertisedFor(r.Listener()) // the address of the listener the client asked on
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.BrokerID, Host: host, Port: port}}
	resp.ClusterID = kmsg.StringPtr(b.store.ClusterID())
	resp.ControllerID = b.cfg.BrokerID

	if req.Topics == nil { // all topics
		for _, name := range b.store.TopicNames() {
			resp.Topics = append(resp.Topics, b.topicMetadata(name))
		}
		r.Respond(resp)
		return
	}
	if b.metadataByTopicID(req, r.Header.APIVersion, resp) {
		r.Respond(resp)
		return
	}
	// Before v4 every Metadata request may create topics, as in Kafka.
	autoCreate := b.cfg.AutoCreateTopics && (req.AllowAutoTopicCreation || r.Header.APIVersion < 4)
	for _, name := range DistinctTopics(req) {
		mt := b.topicMetadata(name)
		if mt.ErrorCode == kerrUnknownTopicOrPartition && autoCreate {
			_, err := b.store.CreateTopic(name, b.cfg.NumPartitions, nil)
			switch {
			case err == nil, errors.Is(err, store.ErrTopicExists): // ErrTopicExists: created meanwhile by another request
				// Kafka answers LEADER_NOT_AVAILABLE for a topic it has
				// just created; the client asks again. Here the leader is
				// ready at once, so answer with it.
				mt = b.topicMetadata(name)
			case errors.Is(err, store.ErrTooManyPartitions):
				mt.ErrorCode = kerrPolicyViolation
			default:
				mt.ErrorCode = kerrInvalidTopic
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	r.Respond(resp)
}

// DistinctTopics returns the topic names a Metadata request asks for, each
// once, in the order they first appear (a null name counts as "").
func DistinctTopics(req *kmsg.MetadataRequest) []string {
	// Sized by what is distinct, not by what was sent: a million copies
	// of one name must not reserve room for a million.
	var names []string
	seen := map[string]struct{}{}
	for _, t := range req.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if _, dup := seen[name]; !dup {
			seen[name] = struct{}{}
			names = append(names, name)
		}
	}
	return names
}

// topicMetadata describes a topic whose every partition this broker leads.
// A partition whose log is offline is listed without a leader, with
// KAFKA_STORAGE_ERROR, and this broker among its offline replicas.
func (b *Broker) topicMetadata(name string) kmsg.MetadataResponseTopic {
	mt := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name)}
	mt.TopicID, _ = b.store.TopicID(name) // v10+; zero if none
	parts, offline := b.store.TopicState(name)
	if len(parts) == 0 && len(offline) == 0 {
		mt.ErrorCode = kerrUnknownTopicOrPartition
		if store.ValidateTopicName(name) != nil {
			mt.ErrorCode = kerrInvalidTopic
		}
		return mt
	}
	self := []int32{b.cfg.BrokerID}
	for _, p := range parts {
		mt.Partitions = append(mt.Partitions, kmsg.MetadataResponseTopicPartition{
			Partition: p.Partition, Leader: b.cfg.BrokerID, LeaderEpoch: leaderEpoch,
			Replicas: self, ISR: self, OfflineReplicas: []int32{},
		})
	}
	for _, id := range offline {
		mt.Partitions = append(mt.Partitions, kmsg.MetadataResponseTopicPartition{
			Partition: id, ErrorCode: kerrKafkaStorageError, Leader: -1, LeaderEpoch: leaderEpoch,
			Replicas: self, ISR: []int32{}, OfflineReplicas: self,
		})
	}
	return mt
}
