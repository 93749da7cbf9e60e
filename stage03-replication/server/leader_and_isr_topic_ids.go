package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// requestTopicIDs is each topic's id in a LeaderAndIsr request (v5+); a
// topic without one (older versions, the zero id) is left out.
func requestTopicIDs(req *kmsg.LeaderAndISRRequest) map[string]store.TopicID {
	ids := map[string]store.TopicID{}
	for _, ts := range req.TopicStates {
		if id := store.TopicID(ts.TopicID); !id.IsZero() {
			ids[ts.Topic] = id
		}
	}
	return ids
}

// inconsistentTopicIDs finds the partitions this broker holds for another
// topic than the request's of the same name: the topic was deleted and
// created again while this broker kept the old log (it was down during the
// deletion, or its log directory was copied). Kafka's
// becomeLeaderOrFollower answers them INCONSISTENT_TOPIC_ID and leaves
// them alone, so the old topic's records never pass for the new one's.
func (s *Server) inconsistentTopicIDs(parts []kmsg.LeaderAndISRRequestTopicPartition, ids map[string]store.TopicID) map[commitlog.TopicPartition]bool {
	var out map[commitlog.TopicPartition]bool
	for _, ps := range parts {
		tp := commitlog.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}
		if s.Store().CheckTopicID(tp, ids[ps.Topic]) == 0 {
			continue
		}
		if out == nil {
			out = map[commitlog.TopicPartition]bool{}
		}
		out[tp] = true
		s.Logger().Error("LeaderAndIsr names another topic id than the partition held here; the partition is left alone",
			"partition", tp, "request_topic_id", ids[ps.Topic])
	}
	return out
}

// assignTopicIDs writes the topic id beside each partition of the request
// this broker now holds (store.AssignTopicIDs: partition.metadata, once,
// the files side by side), also where the leader epoch was stale, as
// Kafka's updateTopicIdForFollowers does.
func (s *Server) assignTopicIDs(states map[commitlog.TopicPartition]replica.LeaderAndIsrState, ids map[string]store.TopicID) {
	assign := map[commitlog.TopicPartition]store.TopicID{}
	for tp := range states {
		if id, ok := ids[tp.Topic]; ok {
			if _, held := s.Store().Partition(tp.Topic, tp.Partition); held { // else not a replica here
				assign[tp] = id
			}
		}
	}
	for tp, err := range s.Store().AssignTopicIDs(assign) {
		s.Logger().Error("recording the topic id", "partition", tp, "topic_id", assign[tp], "err", err)
	}
}

// appendLeaderAndIsrResult adds a partition's answer: by topic name up to
// v4, grouped by topic id from v5.
func appendLeaderAndIsrResult(resp *kmsg.LeaderAndISRResponse, version int16, id store.TopicID, p kmsg.LeaderAndISRResponseTopicPartition) {
	if version < 5 {
		resp.Partitions = append(resp.Partitions, p)
		return
	}
	if n := len(resp.Topics); n == 0 || resp.Topics[n-1].TopicID != id {
		resp.Topics = append(resp.Topics, kmsg.LeaderAndISRResponseTopic{TopicID: id})
	}
	t := &resp.Topics[len(resp.Topics)-1]
	t.Partitions = append(t.Partitions, p)
}

// LeaderAndIsrResults lists a LeaderAndIsr response's partition answers
// at any version (v5+ groups them by topic id and leaves Topic empty).
func LeaderAndIsrResults(resp *kmsg.LeaderAndISRResponse) []kmsg.LeaderAndISRResponseTopicPartition {
	out := append([]kmsg.LeaderAndISRResponseTopicPartition(nil), resp.Partitions...)
	for _, t := range resp.Topics {
		out = append(out, t.Partitions...)
	}
	return out
}
