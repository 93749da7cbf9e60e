package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// CreateTopics (key 19), v0-v5. A single broker can only hold one replica
// of each partition, so a replication factor other than 1 is refused with
// INVALID_REPLICATION_FACTOR, as Kafka refuses one larger than its number of
// brokers. Topic configs are checked against the log's topic-level keys.
//
// v1 adds ValidateOnly and error messages, v4 lets -1 mean the broker's
// default partitions and replication factor (KIP-464), v5 is flexible and
// returns the topic's partitions, replication factor and configs.
//
// As in Kafka, a topic named twice in one request gets INVALID_REQUEST for
// every entry: neither is created. A topic that would take the broker past
// the partitions it can hold (store.Options.MaxPartitions) gets
// POLICY_VIOLATION naming the limit. Creation is all or nothing, and other
// clients are served while the files are made (see store.Store.CreateTopic).
var createTopicsAPI = API{Key: 19, MinVersion: 0, MaxVersion: 5, Handle: handleCreateTopics}

func handleCreateTopics(r *Request) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	duplicates := DuplicateTopics(req)
	for _, rt := range req.Topics {
		st := kmsg.CreateTopicsResponseTopic{Topic: rt.Topic, NumPartitions: -1, ReplicationFactor: -1}
		code, msg := int16(0), ""
		if dup, ok := duplicates[rt.Topic]; ok {
			code, msg = kerrInvalidRequest, dup
		} else {
			code, msg = r.Broker.createTopic(r.Header.APIVersion, &rt, req.ValidateOnly, &st)
		}
		if code != 0 {
			st.ErrorCode, st.ErrorMessage = code, &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	r.Respond(resp)
}

// DuplicateTopics returns the topics a CreateTopics request names more
// than once, each with the message every one of its entries is answered
// with, under INVALID_REQUEST: as Kafka does, neither entry is created
// (KafkaApis.handleCreateTopicsRequest). Stage 05's CreateTopics answers
// duplicates with it too.
func DuplicateTopics(req *kmsg.CreateTopicsRequest) map[string]string {
	named := map[string]int{} // not sized by the request: a million copies of one name are one entry
	for _, rt := range req.Topics {
		named[rt.Topic]++
	}
	out := map[string]string{}
	for name, n := range named {
		if n > 1 {
			out[name] = fmt.Sprintf("the request names topic %q %d times", name, n)
		}
	}
	return out
}

func (b *Broker) createTopic(version int16, rt *kmsg.CreateTopicsRequestTopic, validateOnly bool, st *kmsg.CreateTopicsResponseTopic) (int16, string) {
	if err := store.ValidateTopicName(rt.Topic); err != nil {
		return kerrInvalidTopic, err.Error()
	}
	if len(b.store.TopicPartitions(rt.Topic)) > 0 {
		return kerrTopicAlreadyExists, fmt.Sprintf("topic %q already exists", rt.Topic)
	}
	partitions, rf := rt.NumPartitions, rt.ReplicationFactor
	if len(rt.ReplicaAssignment) > 0 {
		if partitions != -1 || rf != -1 {
			return kerrInvalidRequest, "give either a replica assignment or partitions and replication factor, not both"
		}
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) || len(a.Replicas) != 1 || a.Replicas[0] != b.cfg.BrokerID {
				return kerrInvalidReplicaAssignment, fmt.Sprintf("partition %d: replicas %v; partitions must be numbered from 0 and this cluster has one broker, %d",
					a.Partition, a.Replicas, b.cfg.BrokerID)
			}
		}
		partitions, rf = int32(len(rt.ReplicaAssignment)), 1
	}
	if partitions == -1 && version >= 4 {
		partitions = b.cfg.NumPartitions
	}
	if rf == -1 && version >= 4 {
		rf = b.cfg.DefaultReplicationFactor
	}
	if partitions <= 0 {
		return kerrInvalidPartitions, fmt.Sprintf("number of partitions must be at least 1, got %d", partitions)
	}
	if rf <= 0 {
		return kerrInvalidReplicationFactor, fmt.Sprintf("replication factor must be at least 1, got %d", rf)
	}
	if rf > 1 {
		return kerrInvalidReplicationFactor, fmt.Sprintf("replication factor: %d larger than available brokers: 1", rf)
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return kerrInvalidConfig, fmt.Sprintf("config %s has a null value", c.Name)
		}
		configs[c.Name] = *c.Value
	}
	if _, err := b.store.ValidateTopicConfigs(configs); err != nil {
		return kerrInvalidConfig, err.Error()
	}
	st.NumPartitions, st.ReplicationFactor = partitions, rf
	for name, value := range configs {
		st.Configs = append(st.Configs, kmsg.CreateTopicsResponseTopicConfig{Name: name, Value: &value, Source: 1}) // DYNAMIC_TOPIC_CONFIG
	}
	if validateOnly {
		if err := b.store.Fits(int(partitions)); err != nil {
			return kerrPolicyViolation, err.Error()
		}
		return 0, ""
	}
	if len(configs) == 0 {
		configs = nil
	}
	if _, err := b.store.CreateTopic(rt.Topic, partitions, configs); err != nil {
		switch {
		case errors.Is(err, store.ErrTopicExists):
			return kerrTopicAlreadyExists, err.Error()
		case errors.Is(err, store.ErrTooManyPartitions):
			return kerrPolicyViolation, err.Error()
		}
		return kerrUnknownServerError, err.Error()
	}
	return 0, ""
}
