package server

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/txn"
)

// Metadata (key 3): stage 03's answer from the metadata cache, completed
// with Kafka's automatic topic creation (auto.create.topics.enable,
// Kafka's default true). When the broker allows it and the request does
// (allow_auto_topic_creation, v4+; every request before v4), a topic the
// request names that no broker knows is created as CreateTopics creates
// one left to the broker's defaults: num.partitions partitions of
// default.replication.factor replicas (Kafka's AutoTopicCreationManager
// in ZooKeeper mode). It is answered LEADER_NOT_AVAILABLE, without
// partitions, until this broker's metadata has it; the client asks again.
// A creation that fails answers its CreateTopics code instead
// (INVALID_REPLICATION_FACTOR while fewer brokers are alive than
// default.replication.factor). An illegal name is answered
// INVALID_TOPIC_EXCEPTION and never created (stage 03), and a request for
// every topic creates none.
//
// As in Kafka, only Metadata (and FindCoordinator, for
// __consumer_offsets) creates topics: a Produce for an unknown topic is
// answered UNKNOWN_TOPIC_OR_PARTITION, and producers ask Metadata first.
// __consumer_offsets and __transaction_state named in Metadata are created
// as FindCoordinator creates them.
func (s *Server) metadataAPI() broker.API {
	i := slices.IndexFunc(s.APIs(), func(a broker.API) bool { return a.Key == 3 })
	api := s.APIs()[i] // stage 03's versions
	api.Handle = s.handleMetadata
	return api
}

func (s *Server) handleMetadata(r *broker.Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := s.MetadataResponse(r)
	// Before v4 every Metadata request may create topics, as in Kafka
	// (the field's default is true). A request for every topic names
	// none that is unknown.
	if s.cfg.Broker.AutoCreateTopics && (req.AllowAutoTopicCreation || r.Header.APIVersion < 4) {
		for i := range resp.Topics {
			mt := &resp.Topics[i]
			if mt.ErrorCode == kerr.UnknownTopicOrPartition.Code && mt.Topic != nil {
				mt.ErrorCode = s.autoCreateTopic(*mt.Topic)
			}
		}
	}
	r.Respond(resp)
}

// autoCreateTopic creates a topic Metadata named, unknown to this
// broker's cache, and returns the error code to answer for it: Kafka's
// AutoTopicCreationManager turns a creation (or finding the topic created
// meanwhile, by another request or before this broker's metadata heard of
// it) into LEADER_NOT_AVAILABLE, and any other error into its own code.
func (s *Server) autoCreateTopic(name string) int16 {
	switch name {
	case group.Topic:
		if err := s.createOffsetsTopic(); err != nil {
			s.logger.Info("Metadata could not create the offsets topic", "topic", name, "err", err)
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.LeaderNotAvailable.Code
	case txn.Topic:
		if err := s.createTxnTopic(); err != nil {
			s.logger.Info("Metadata could not create the transaction state topic", "topic", name, "err", err)
			return kerr.UnknownTopicOrPartition.Code
		}
		return kerr.LeaderNotAvailable.Code
	}
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
	out := kmsg.NewCreateTopicsResponseTopic()
	code, msg := s.createTopic(t, false, &out)
	switch code {
	case 0:
		s.logger.Info("topic created for Metadata (auto.create.topics.enable)", "topic", name)
		return kerr.LeaderNotAvailable.Code
	case kerr.TopicAlreadyExists.Code:
		return kerr.LeaderNotAvailable.Code
	}
	s.logger.Info("Metadata could not create a topic (auto.create.topics.enable)", "topic", name, "error_code", code, "err", msg)
	return code
}
