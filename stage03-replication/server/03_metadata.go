package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Metadata (key 3), v1-v12, answered from the metadata cache that the
// controller's UpdateMetadata requests fill: every broker knows every
// partition's leader, so a client may ask any broker. The brokers are
// listed at their addresses on the listener the request came in on
// (listeners.go). A topic the cache does not know is answered
// UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION if its name is
// not a legal one, as in Kafka. There is no automatic topic creation
// here: topics live in ZooKeeper from stage 05, which completes this
// answer (MetadataResponse) with the topics it creates. From v10 each
// topic carries its id as the controller sent it (the zero id when it
// sent none), and a v12 request may name topics by id: an id the cache
// cannot name answers UNKNOWN_TOPIC_ID (metadata_topic_ids.go).
func (s *Server) metadataAPI() broker.API {
	return broker.API{Key: 3, MinVersion: 1, MaxVersion: 12, Handle: s.handleMetadata}
}

// IsInternalTopic reports whether Kafka's clients treat a topic as the
// brokers' own (Kafka's Topic.isInternal): __consumer_offsets, where the
// group coordinator keeps groups and offsets (stage 05), and
// __transaction_state. Metadata marks them, so that a consumer subscribing
// by pattern leaves them out, and clients may not produce to them.
func IsInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

func (s *Server) handleMetadata(r *broker.Request) { r.Respond(s.MetadataResponse(r)) }

// MetadataResponse is the answer to the Metadata request r from this
// broker's cache, for a later stage to complete before it responds.
func (s *Server) MetadataResponse(r *broker.Request) *kmsg.MetadataResponse {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers = s.metadataBrokers(r.Listener()) // their addresses on the listener asked on

	resp.ClusterID = kmsg.StringPtr(s.Store().ClusterID())
	resp.ControllerID = s.Metadata.ControllerID()

	names := broker.DistinctTopics(req) // each name once, as Kafka answers
	if req.Topics == nil {
		names = s.Metadata.Topics()
	}
	names, unknownIDs := s.topicsByID(req, r.Header.APIVersion, names)
	for _, id := range unknownIDs {
		resp.Topics = append(resp.Topics, broker.UnknownTopicIDMetadata(id))
	}
	for _, name := range names {
		mt := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name), IsInternal: IsInternalTopic(name), TopicID: s.Metadata.TopicID(name)}
		parts := s.Metadata.Partitions(name)
		if parts == nil {
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if store.ValidateTopicName(name) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
		}
		for id := int32(0); int(id) < len(parts); id++ {
			pm, ok := parts[id]
			if !ok {
				continue
			}
			mp := kmsg.MetadataResponseTopicPartition{Partition: id, Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
				Replicas: pm.Replicas, ISR: pm.ISR, OfflineReplicas: pm.OfflineReplicas}
			if pm.Leader < 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			} else if code := s.leaderOffListener(pm.Leader, r.Listener(), r.Header.APIVersion); code != 0 {
				mp.ErrorCode = code
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}
