package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// TopicNamer names topic ids (KIP-516), for Fetch v13+ and Metadata v12.
// A single broker names them from its store, which gave every topic its
// id; from stage 03 the ids come from the controller, and a FetchSource
// that also implements TopicNamer (stage 03's, over its metadata cache)
// names them instead, as Kafka's handler names them from its
// MetadataCache.
type TopicNamer interface {
	TopicName(id store.TopicID) (string, bool)
}

// fetchNamer is src if it names ids, the broker's store otherwise.
func fetchNamer(src FetchSource, st *store.Store) TopicNamer {
	if n, ok := src.(TopicNamer); ok {
		return n
	}
	return st
}

// FetchReplicaID is the fetching broker's id, -1 for a consumer: v15 moved
// it from ReplicaID into the tagged ReplicaState (KIP-903). final's
// metrics use it to tell FetchFollower from FetchConsumer.
func FetchReplicaID(req *kmsg.FetchRequest) int32 {
	if req.Version >= 15 {
		return req.ReplicaState.ID
	}
	return req.ReplicaID
}

// nameTopics gives each topic of a v13+ fetch, which names topics by id,
// its name, and answers the partitions of an id nobody knows with
// UNKNOWN_TOPIC_ID (the client refreshes its metadata: the topic was
// deleted, or this broker has not heard of it yet). Then a partition this
// broker holds for another topic of the same name (store.CheckTopicID)
// answers INCONSISTENT_TOPIC_ID, unread, as Kafka's readFromLog does.
// Before v13 there are no ids and nothing to do. The zero id names no
// topic: UNKNOWN_TOPIC_ID, as in Kafka (a client that sends v13+ with
// names only has a bug).
func (f *fetchPlan) nameTopics(namer TopicNamer, st *store.Store) {
	if !f.byID {
		return
	}
	for i := range f.topics {
		t := &f.topics[i]
		name, ok := "", false
		if !t.id.IsZero() {
			name, ok = namer.TopicName(t.id)
		}
		t.topic = name
		for _, fp := range t.partitions {
			code := kerr.UnknownTopicID.Code
			if ok {
				code = st.CheckTopicID(commitlog.TopicPartition{Topic: name, Partition: fp.Partition}, t.id)
			}
			if code != 0 {
				out := newFetchPartition(fp.Partition)
				out.ErrorCode = code
				f.refuse(fp, out)
			}
		}
	}
}
