package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// ListOffsets (key 2), v1-v9: where a consumer should start. The special
// timestamps -1 (latest: the high watermark) and -2 (earliest: the log start
// offset), or any other timestamp: the first record whose timestamp is at or
// after it, with that record's timestamp, found through the time index and
// then record by record (commitlog.Log.OffsetForTimestamp).
//
// v2 adds the isolation level (read_committed reads up to the last stable
// offset, which without transactions is the high watermark), v4 the current
// leader epoch (KIP-320) and the epoch in the answer, v6 is flexible. Three
// versions only add special timestamps, each refused with
// UNSUPPORTED_VERSION below its version, as Kafka 3.9 refuses them (and
// any other negative one):
//
//	v7  -3 MAX_TIMESTAMP (KIP-734): the record with the largest timestamp,
//	    the first of equals as in Kafka 3.8+ (KAFKA-16310; before, the last
//	    offset of its batch), from batch headers the produce validation
//	    made true (commitlog.Log.OffsetForMaxTimestamp), what
//	    kafka-get-offsets --time max-timestamp asks
//	v8  -4 EARLIEST_LOCAL (KIP-405): the first offset on local disk; without
//	    tiered storage, the log start offset, as -2
//	v9  -5 LATEST_TIERED (KIP-1005): the last offset in remote storage;
//	    without tiered storage, none: offset -1, leader epoch -1, no error
//
// The handler holds the request loop and the response's skeleton; each
// partition's answer comes from an OffsetSource.
var listOffsetsAPI = ListOffsetsAPI(nil)

// The special timestamps of a ListOffsets request (Kafka's
// ListOffsetsRequest.LATEST_TIMESTAMP and the others).
const (
	LatestTimestamp        = -1
	EarliestTimestamp      = -2
	MaxTimestamp           = -3 // v7+
	EarliestLocalTimestamp = -4 // v8+
	LatestTieredTimestamp  = -5 // v9+
)

// timestampMinVersion is the first version that may ask for each special
// timestamp (Kafka's timestampMinSupportedVersion).
var timestampMinVersion = map[int64]int16{
	LatestTimestamp: 1, EarliestTimestamp: 1, MaxTimestamp: 7, EarliestLocalTimestamp: 8, LatestTieredTimestamp: 9,
}

// OffsetSource answers ListOffsets for one partition: Kafka's
// Partition.fetchOffsetForTimestamp, reached through
// ReplicaManager.fetchOffset. This stage's single broker answers from its
// store (StoreOffsetSource); stage 03 answers as the partition's leader,
// with the high watermark as the latest offset a consumer may have.
type OffsetSource interface {
	// ListOffset fills out (error code, offset, timestamp, leader epoch)
	// for one requested partition. rp.Timestamp is one of the special
	// timestamps above, allowed at the request's version, or a timestamp
	// (>= 0; the handler refuses the other negative ones). A source
	// without tiered storage answers EarliestLocalTimestamp as
	// EarliestTimestamp and LatestTieredTimestamp with out as it arrives.
	// out arrives with Offset, Timestamp and
	// LeaderEpoch -1, which is also the answer when no record is at or
	// after the timestamp. replicaID is -1 for consumers, a broker id for
	// replicas. It runs on the handler's goroutine and must not block.
	ListOffset(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition)
}

// CommittedOffsetSource is implemented by an OffsetSource that keeps
// transactions (stage 04): a consumer's ListOffsets with isolation_level
// READ_COMMITTED (v2+) is answered by ListCommittedOffset, whose latest
// offset is the last stable offset and whose timestamp lookups find only
// offsets below it (Kafka's Partition.fetchOffsetForTimestamp).
type CommittedOffsetSource interface {
	ListCommittedOffset(topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition)
}

// ListOffsetsAPI is the ListOffsets handler answering from src; nil means
// the broker's own store (StoreOffsetSource).
func ListOffsetsAPI(src OffsetSource) API {
	return API{Key: 2, MinVersion: 1, MaxVersion: 9,
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
	committed, _ := src.(CommittedOffsetSource)
	if req.Version < 2 || req.IsolationLevel != 1 || req.ReplicaID >= 0 {
		committed = nil
	}
	for _, rt := range req.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.ListOffsetsResponseTopicPartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			if min, ok := timestampMinVersion[rp.Timestamp]; rp.Timestamp < 0 && (!ok || req.Version < min) {
				sp.ErrorCode = kerrUnsupportedVersion
			} else if committed != nil {
				committed.ListCommittedOffset(rt.Topic, rp, &sp)
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
	case EarliestTimestamp, EarliestLocalTimestamp:
		out.Offset, out.LeaderEpoch = p.Log.StartOffset(), leaderEpoch
	case LatestTieredTimestamp:
		// nothing is tiered: no offset
	default:
		offset, ts, found, err := FindOffset(p.Log, rp.Timestamp)
		switch {
		case err != nil:
			out.ErrorCode = kerrKafkaStorageError
		case found:
			out.Offset, out.Timestamp, out.LeaderEpoch = offset, ts, leaderEpoch
		}
	}
}

// FindOffset answers a lookup by time: a timestamp >= 0, or MaxTimestamp.
func FindOffset(l *commitlog.Log, timestamp int64) (offset, ts int64, found bool, err error) {
	if timestamp == MaxTimestamp {
		return l.OffsetForMaxTimestamp()
	}
	return l.OffsetForTimestamp(timestamp)
}
