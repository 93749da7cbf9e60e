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
var listOffsetsAPI = API{Key: 2, MinVersion: 1, MaxVersion: 6, Handle: handleListOffsets}

const (
	latestTimestamp   = -1
	earliestTimestamp = -2
)

func handleListOffsets(r *Request) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	b := r.Broker
	resp := kmsg.NewPtrListOffsetsResponse()
	for _, rt := range req.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.ListOffsetsResponseTopicPartition{Partition: rp.Partition, Timestamp: -1, Offset: -1, LeaderEpoch: -1}
			p, code := b.store.Lookup(rt.Topic, rp.Partition)
			switch {
			case code != 0:
				sp.ErrorCode = code
			case store.CheckLeaderEpoch(rp.CurrentLeaderEpoch, leaderEpoch) != 0:
				sp.ErrorCode = store.CheckLeaderEpoch(rp.CurrentLeaderEpoch, leaderEpoch)
			case rp.Timestamp == latestTimestamp:
				sp.Offset, sp.LeaderEpoch = p.Log.EndOffset(), leaderEpoch
			case rp.Timestamp == earliestTimestamp:
				sp.Offset, sp.LeaderEpoch = p.Log.StartOffset(), leaderEpoch
			case rp.Timestamp < 0:
				sp.ErrorCode = kerrInvalidRequest // -3 and beyond: newer versions only
			default:
				offset, ts, found, err := p.Log.OffsetForTimestamp(rp.Timestamp)
				switch {
				case err != nil:
					sp.ErrorCode = kerrKafkaStorageError
				case found:
					sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}
