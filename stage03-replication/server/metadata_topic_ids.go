package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// topicsByID reads a v12 Metadata request that names topics by id: it
// returns the names the metadata cache gives the known ids, and the ids
// it cannot name (Kafka answers those first, with UNKNOWN_TOPIC_ID). A
// request that names no id keeps names, the names it asked for.
func (s *Server) topicsByID(req *kmsg.MetadataRequest, version int16, names []string) ([]string, []store.TopicID) {
	ids := broker.RequestedTopicIDs(req, version)
	if len(ids) == 0 {
		return names, nil
	}
	names = names[:0:0]
	var unknown []store.TopicID
	for _, id := range ids {
		if name, ok := s.Metadata.TopicName(id); ok {
			names = append(names, name)
		} else {
			unknown = append(unknown, id)
		}
	}
	return names, unknown
}
