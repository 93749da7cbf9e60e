package server

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// Fetch (key 1): stage 02's handler (long poll, byte budgets, zero-copy
// framing) over a replica-aware source. A fetch with replica_id >= 0 is a
// follower's: it reports the follower's log end offset (its fetch offset),
// which may advance the high watermark, and may read up to the leader's log
// end. A consumer (replica_id -1) reads only below the high watermark, so it
// never sees records that a leader change could still take back (§1.2).
func (s *Server) fetchAPI() broker.API { return broker.FetchAPI(ReplicaSource{s}) }

// ReplicaSource is the replica-aware broker.FetchSource (and
// FetchRecorder); stage 04 reuses it with its own FetchWaiter.
type ReplicaSource struct{ s *Server }

// NewReplicaSource is the source reading s's replicas.
func NewReplicaSource(s *Server) ReplicaSource { return ReplicaSource{s} }

// RecordFetch records a follower's fetch position, once per fetch request
// (broker.FetchRecorder): the offset it asks for is its log end offset, the
// log start offset it tells is its own (DeleteRecords waits for it), and
// the leader's high watermark may advance. A consumer's fetch records
// nothing.
func (src ReplicaSource) RecordFetch(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, out *protocol.FetchPartition) {
	if replicaID < 0 {
		return
	}
	p, ok := src.s.Replicas.Partition(topic, fp.Partition)
	if !ok {
		out.ErrorCode = src.s.MissingPartitionCode(topic, fp.Partition)
		return
	}
	if err := p.UpdateFollowerFetchState(replicaID, fp.FetchOffset, fp.LogStartOffset, fp.CurrentLeaderEpoch); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		out.LogStartOffset = p.Log.StartOffset() // a follower behind the log start starts over there
	}
}

// ReadPartition reads one partition: to the log end for a follower, below
// the high watermark for a consumer; leaders only.
func (src ReplicaSource) ReadPartition(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	p, ok := src.s.Replicas.Partition(topic, fp.Partition)
	if !ok {
		out.ErrorCode = src.s.MissingPartitionCode(topic, fp.Partition)
		return
	}
	if err := p.CheckLeader(fp.CurrentLeaderEpoch); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return
	}
	hw := p.HighWatermark()
	maxOffset := int64(math.MaxInt64) // a follower reads to the log end
	if replicaID < 0 {
		maxOffset = hw
	}
	out.ErrorCode = broker.ReadPartition(p.Log, fp.FetchOffset, int64(fp.PartitionMaxBytes), remaining, first, maxOffset, hw, out)
}

// TopicName names the topic ids of Fetch v13+ from the metadata cache
// (broker.TopicNamer), as Kafka does: every broker knows every topic's
// id, not only those it holds replicas of.
func (src ReplicaSource) TopicName(id store.TopicID) (string, bool) {
	return src.s.Metadata.TopicName(id)
}

// Watch wakes a follower's long poll on appends and a consumer's when the
// high watermark moves, since that is when each has more to read.
func (src ReplicaSource) Watch(replicaID int32, topic string, partition int32, ch chan struct{}) func() {
	p, ok := src.s.Replicas.Partition(topic, partition)
	if !ok {
		return nil
	}
	sig := &p.HWAdvanced
	if replicaID >= 0 {
		sig = &p.Appended
	}
	sig.Watch(ch)
	return func() { sig.Unwatch(ch) }
}
