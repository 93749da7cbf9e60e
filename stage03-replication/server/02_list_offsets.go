package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// ListOffsets (key 2), v1-v9: stage 02's handler over a replica-aware
// OffsetSource, answered by leaders only. For a consumer the latest offset
// is the high watermark (what it may read); for a replica (replica_id >= 0)
// it is the log end. A lookup by time, MAX_TIMESTAMP's included, only
// answers with offsets below the high watermark (Kafka's
// fetchOffsetForTimestamp filters them so). Without tiered storage
// EARLIEST_LOCAL is the log start and LATEST_TIERED no offset.
func (s *Server) listOffsetsAPI() broker.API { return broker.ListOffsetsAPI(replicaOffsets{s}) }

// replicaOffsets is the replica-aware broker.OffsetSource.
type replicaOffsets struct{ s *Server }

func (o replicaOffsets) ListOffset(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	o.s.ListOffsetUpTo(replicaID, topic, rp, out, (*replica.Partition).HighWatermark)
}

// ListOffsetUpTo answers ListOffsets for one partition as its leader, with
// bound(p) as the last offset a consumer may read: the high watermark
// here, the last stable offset for stage 04's read_committed consumers. A
// replica (replicaID >= 0) reads to the log end.
func (s *Server) ListOffsetUpTo(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition,
	bound func(*replica.Partition) int64) {
	p, ok := s.Replicas.Partition(topic, rp.Partition)
	if !ok {
		out.ErrorCode = s.MissingPartitionCode(topic, rp.Partition)
		return
	}
	if err := p.CheckLeader(rp.CurrentLeaderEpoch); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return
	}
	_, epoch := p.Leader()
	readable := bound(p)
	switch rp.Timestamp {
	case broker.LatestTimestamp:
		out.Offset, out.LeaderEpoch = readable, epoch
		if replicaID >= 0 {
			out.Offset = p.Log.EndOffset()
		}
	case broker.EarliestTimestamp, broker.EarliestLocalTimestamp:
		out.Offset, out.LeaderEpoch = p.Log.StartOffset(), p.Epochs.EpochForOffset(p.Log.StartOffset())
	case broker.LatestTieredTimestamp:
		// nothing is tiered: no offset
	default:
		offset, ts, found, err := broker.FindOffset(p.Log, rp.Timestamp)
		switch {
		case err != nil:
			out.ErrorCode = replica.ErrorCode(err)
		case found && offset < readable:
			out.Offset, out.Timestamp, out.LeaderEpoch = offset, ts, p.Epochs.EpochForOffset(offset)
		}
	}
}
