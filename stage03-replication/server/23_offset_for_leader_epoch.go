package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// OffsetForLeaderEpoch (key 23), v0-v4: for a leader epoch, the largest
// epoch at or below it that this leader's log knows, and the offset where
// it ends (KIP-101). A follower asks it with its own latest epoch and
// truncates where the answer says its log diverged; a consumer asks it to
// detect truncation after a leader change (KIP-320). v1 returns the epoch,
// v2 takes the current leader epoch for fencing, v3 the replica id, v4 is
// flexible.
func (s *Server) offsetForLeaderEpochAPI() broker.API {
	return broker.API{Key: 23, MinVersion: 0, MaxVersion: 4, Handle: s.handleOffsetForLeaderEpoch}
}

func (s *Server) handleOffsetForLeaderEpoch(r *broker.Request) {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, rt := range req.Topics {
		st := kmsg.OffsetForLeaderEpochResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.OffsetForLeaderEpochResponseTopicPartition{Partition: rp.Partition,
				LeaderEpoch: replica.UndefinedEpoch, EndOffset: replica.UndefinedOffset}
			if p, ok := s.Replicas.Partition(rt.Topic, rp.Partition); !ok {
				sp.ErrorCode = s.MissingPartitionCode(rt.Topic, rp.Partition)
			} else if epoch, end, err := p.EndOffsetForEpoch(rp.LeaderEpoch, rp.CurrentLeaderEpoch); err != nil {
				sp.ErrorCode = replica.ErrorCode(err)
			} else {
				sp.LeaderEpoch, sp.EndOffset = epoch, end
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}
