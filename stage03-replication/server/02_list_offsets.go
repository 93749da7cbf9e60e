package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// ListOffsets (key 2), v1-v6, answered by leaders only. For a consumer the
// latest offset is the high watermark (what it may read); for a replica
// (replica_id >= 0) it is the log end. A timestamp lookup only answers with
// offsets below the high watermark.
func (s *Server) listOffsetsAPI() broker.API {
	return broker.API{Key: 2, MinVersion: 1, MaxVersion: 6, Handle: s.handleListOffsets}
}

func (s *Server) handleListOffsets(r *broker.Request) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.ListOffsetsResponseTopicPartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			s.listOffset(req.ReplicaID, rt.Topic, &rp, &sp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}

func (s *Server) listOffset(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	p, ok := s.Replicas.Partition(topic, rp.Partition)
	if !ok {
		sp.ErrorCode = s.missingPartitionCode(topic, rp.Partition)
		return
	}
	if err := p.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
		sp.ErrorCode = replica.ErrorCode(err)
		return
	}
	_, epoch := p.Leader()
	hw := p.HighWatermark()
	switch rp.Timestamp {
	case -1: // latest
		sp.Offset, sp.LeaderEpoch = hw, epoch
		if replicaID >= 0 {
			sp.Offset = p.Log.EndOffset()
		}
	case -2: // earliest
		sp.Offset, sp.LeaderEpoch = p.Log.StartOffset(), p.Epochs.EpochForOffset(p.Log.StartOffset())
	default:
		if rp.Timestamp < 0 {
			sp.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		offset, ts, found, err := p.Log.OffsetForTimestamp(rp.Timestamp)
		switch {
		case err != nil:
			sp.ErrorCode = replica.ErrorCode(err)
		case found && offset < hw:
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, p.Epochs.EpochForOffset(offset)
		}
	}
}
