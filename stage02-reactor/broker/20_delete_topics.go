package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// DeleteTopics (key 20), v0-v5. Deleting a topic closes its partitions'
// logs and removes their directories (renamed "-delete" first, so a crash
// midway is finished at the next start). v4 is flexible, v5 adds an error
// message; v6 names topics by ID.
var deleteTopicsAPI = API{Key: 20, MinVersion: 0, MaxVersion: 5, Handle: handleDeleteTopics}

func handleDeleteTopics(r *Request) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	// A name listed twice is deleted once; every listing gets its result,
	// as Kafka answers from the set of names it deleted.
	results := map[string]kmsg.DeleteTopicsResponseTopic{}
	for _, name := range req.TopicNames {
		st, done := results[name]
		if !done {
			st = kmsg.DeleteTopicsResponseTopic{Topic: kmsg.StringPtr(name)}
			if err := r.Broker.store.DeleteTopic(name); errors.Is(err, store.ErrUnknownTopic) {
				st.ErrorCode = kerrUnknownTopicOrPartition
			} else if err != nil {
				st.ErrorCode = kerrUnknownServerError
				msg := err.Error()
				st.ErrorMessage = &msg
			}
			results[name] = st
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}
