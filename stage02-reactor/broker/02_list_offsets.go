package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// ListOffsets (key 2), v1-v6: where a consumer should start. The special
// timestamps -1 (latest: the high watermark) and -2 (earliest: the log start
// offset), or any other timestamp: the first record whose timestamp is at or
// after it, with that record's timestamp, found through the time index and
// then record by record (commitlog.Log.OffsetForTimestamp).
//
// v2 adds the isolation level (read_committed reads up to the last stable
// offset, which without transactions is the high watermark), v4 the current
// leader epoch (KIP-320) and the epoch in the answer, v6 is flexible. v7
// adds -3, the offset of the largest timestamp, which we do not serve.
//
// The handler holds the request loop and the response's skeleton; each
// partition's answer comes from an OffsetSource.
var listOffsetsAPI = ListOffsetsAPI(nil)

// The special timestamps of a ListOffsets request (Kafka's
// ListOffsetsRequest.LATEST_TIMESTAMP and EARLIEST_TIMESTAMP).
const (
	LatestTimestamp   = -1
	EarliestTimestamp = -2
)

// OffsetSource answers ListOffsets for one partition: Kafka's
// Partition.fetchOffsetForTimestamp, reached through
// ReplicaManager.fetchOffset. This stage's single broker answers from its
// store (StoreOffsetSource); stage 03 answers as the partition's leader,
// with the high watermark as the latest offset a consumer may have.
type OffsetSource interface {
	// ListOffset fills out (error code, offset, timestamp, leader epoch)
	// for one requested partition. rp.Timestamp is LatestTimestamp,
	// EarliestTimestamp or a timestamp (>= 0; the handler refuses the
	// other negative ones). out arrives with Offset, Timestamp and
	// LeaderEpoch -1, which is also the answer when no record is at or
	// after the timestamp. replicaID is -1 for consumers, a broker id for
	// replicas. It runs on the handler's goroutine and must not block.
	ListOffset(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition)
}

// ListOffsetsAPI is the ListOffsets handler answering from src; nil means
// the broker's own store (StoreOffsetSource).
func ListOffsetsAPI(src OffsetSource) API {
	return API{Key: 2, MinVersion: 1, MaxVersion: 6,
		Handle: func(r *Request) {
			s := src
			if s == nil {
				s = StoreOffsetSource{r.Broker.store}
			}
			handleListOffsets(r, s)
		}}
}

func handleListOffsets(r *Request, src OffsetSource) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.ListOffsetsResponseTopicPartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			if rp.Timestamp < EarliestTimestamp {
				sp.ErrorCode = kerrInvalidRequest // -3 and beyond: newer versions only
			} else {
				src.ListOffset(req.ReplicaID, rt.Topic, rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}

// StoreOffsetSource answers from a single broker's store: every partition
// is led here at epoch 0, and its high watermark is its log end offset.
type StoreOffsetSource struct{ Store *store.Store }

// ListOffset answers for one partition of the store.
func (s StoreOffsetSource) ListOffset(_ int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	p, code := s.Store.Lookup(topic, rp.Partition)
	if code == 0 {
		code = store.CheckLeaderEpoch(rp.CurrentLeaderEpoch, leaderEpoch)
	}
	if out.ErrorCode = code; code != 0 {
		return
	}
	switch rp.Timestamp {
	case LatestTimestamp:
		out.Offset, out.LeaderEpoch = p.Log.EndOffset(), leaderEpoch
	case EarliestTimestamp:
		out.Offset, out.LeaderEpoch = p.Log.StartOffset(), leaderEpoch
	default:
		offset, ts, found, err := p.Log.OffsetForTimestamp(rp.Timestamp)
		switch {
		case err != nil:
			out.ErrorCode = kerrKafkaStorageError
		case found:
			out.Offset, out.Timestamp, out.LeaderEpoch = offset, ts, leaderEpoch
		}
	}
}
