package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata (key 3), v1-v9: which brokers exist and which broker leads each
// partition. Clients ask it first and whenever a partition's leader seems to
// have moved. Here there is one broker: it leads everything, and is its own
// controller (stage 05 elects one).
//
// v1: null topics means all topics. v4: AllowAutoTopicCreation. v8:
// authorized operations (we answer none: there is no authorizer). v9 is
// flexible. v10 adds topic IDs, which this broker does not assign.
var metadataAPI = API{Key: 3, MinVersion: 1, MaxVersion: 9, Handle: handleMetadata}

func handleMetadata(r *Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	b := r.Broker
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers = []kmsg.MetadataResponseBroker{{
		NodeID: b.cfg.BrokerID, Host: b.cfg.AdvertisedHost, Port: b.cfg.AdvertisedPort,
	}}
	resp.ClusterID = kmsg.StringPtr(b.store.ClusterID())
	resp.ControllerID = b.cfg.BrokerID

	if req.Topics == nil { // all topics
		for _, name := range b.store.Topics() {
			resp.Topics = append(resp.Topics, b.topicMetadata(name, b.store.TopicPartitions(name)))
		}
		r.Respond(resp)
		return
	}
	// Before v4 every Metadata request may create topics, as in Kafka.
	autoCreate := b.cfg.AutoCreateTopics && (req.AllowAutoTopicCreation || r.Header.APIVersion < 4)
	for _, rt := range req.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		parts := b.store.TopicPartitions(name)
		if len(parts) == 0 && autoCreate {
			created, err := b.store.CreateTopic(name, b.cfg.NumPartitions, nil)
			switch {
			case err == nil:
				// Kafka answers LEADER_NOT_AVAILABLE for a topic it has
				// just created; the client asks again. Here the leader is
				// ready at once, so answer with it.
				parts = created
			case errors.Is(err, ErrTopicExists): // created meanwhile by another request
				parts = b.store.TopicPartitions(name)
			default:
				resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: kerrInvalidTopic})
				continue
			}
		}
		if len(parts) == 0 {
			code := kerrUnknownTopicOrPartition
			if validateTopicName(name) != nil {
				code = kerrInvalidTopic
			}
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{Topic: rt.Topic, ErrorCode: code})
			continue
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(name, parts))
	}
	r.Respond(resp)
}

// topicMetadata describes a topic whose every partition this broker leads.
func (b *Broker) topicMetadata(name string, parts []*Partition) kmsg.MetadataResponseTopic {
	mt := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name)}
	self := []int32{b.cfg.BrokerID}
	for _, p := range parts {
		mt.Partitions = append(mt.Partitions, kmsg.MetadataResponseTopicPartition{
			Partition: p.Partition, Leader: b.cfg.BrokerID, LeaderEpoch: 0,
			Replicas: self, ISR: self, OfflineReplicas: []int32{},
		})
	}
	return mt
}
