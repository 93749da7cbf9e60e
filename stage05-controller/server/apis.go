package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
	s3 "github.com/kafkaworkbook/workbook/stage03-replication/server"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// CreateTopics (key 19), v0-v7 (v6 only adds a quota error, v7 answers
// the new topic's id): any broker writes the new topic's config
// and assignment to ZooKeeper (Kafka's AdminZkClient); the controller sees
// the new /brokers/topics child, creates the partitions and tells the
// replicas. With a timeout, the answer waits until this broker's metadata
// shows every partition with a leader (Kafka's DelayedCreatePartitions).
//
// A topic named twice in one request gets INVALID_REQUEST for every
// entry and is not created (stage 02's broker.DuplicateTopics), as in
// Kafka. A topic whose assignment znode would be larger than ZooKeeper
// reads in one request (kafkazk.JuteMaxBuffer: about 88,000 partitions
// of one replica, 66,000 of three) gets INVALID_PARTITIONS with the
// sizes, validate_only too: written, it would cost the broker its
// ZooKeeper connection.
func (s *Server) createTopicsAPI() broker.API {
	return broker.API{Key: 19, MinVersion: 0, MaxVersion: 7, Handle: s.handleCreateTopics}
}

// legalTopic is Kafka's rule for topic names.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func (s *Server) handleCreateTopics(r *broker.Request) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	duplicates := broker.DuplicateTopics(req)
	var created []string
	for _, t := range req.Topics {
		out := kmsg.NewCreateTopicsResponseTopic()
		out.Topic = t.Topic
		var code int16
		var msg string
		if dup, ok := duplicates[t.Topic]; ok {
			code, msg = kerr.InvalidRequest.Code, dup
		} else {
			code, msg = s.createTopic(t, req.ValidateOnly, &out)
		}
		out.ErrorCode = code
		if code != 0 {
			// As Kafka: a refused topic answers no partitions, replication
			// factor or configs.
			out.NumPartitions, out.ReplicationFactor, out.Configs = -1, -1, nil
		}
		if msg != "" {
			out.ErrorMessage = &msg
		} else if code == 0 && !req.ValidateOnly {
			created = append(created, t.Topic)
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(created) == 0 || req.TimeoutMillis <= 0 {
		r.Respond(resp)
		return
	}
	answerWhen(r, resp, req.TimeoutMillis, func() bool { return s.allLed(created) }, func() {
		for i := range resp.Topics {
			if slices.Contains(created, resp.Topics[i].Topic) && !s.allLed([]string{resp.Topics[i].Topic}) {
				resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
			}
		}
	})
}

// answerWhen answers r with resp once done reports true, polling this
// broker's metadata, or after timeoutMillis, when timedOut marks what is
// late (Kafka's DelayedCreatePartitions and DelayedDeleteTopics). A
// request whose connection closed meanwhile is not answered.
func answerWhen(r *broker.Request, resp kmsg.Response, timeoutMillis int32, done func() bool, timedOut func()) {
	deadline := time.Now().Add(time.Duration(timeoutMillis) * time.Millisecond)
	go func() {
		for !done() {
			if time.Now().After(deadline) {
				timedOut()
				break
			}
			select {
			case <-r.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		r.Respond(resp)
	}()
}

// allLed reports whether this broker's metadata shows every partition of
// topics with a leader.
func (s *Server) allLed(topics []string) bool {
	for _, t := range topics {
		parts := s.Metadata.Partitions(t)
		if len(parts) == 0 {
			return false
		}
		for _, p := range parts {
			if p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// createTopic validates and writes one topic, returning the error code and
// message for the answer.
func (s *Server) createTopic(t kmsg.CreateTopicsRequestTopic, validateOnly bool, out *kmsg.CreateTopicsResponseTopic) (int16, string) {
	if len(t.Topic) == 0 || len(t.Topic) > 249 || t.Topic == "." || t.Topic == ".." || !legalTopic.MatchString(t.Topic) {
		return kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is illegal: up to 249 of [a-zA-Z0-9._-], not . or ..", t.Topic)
	}
	config := map[string]string{}
	for _, c := range t.Configs {
		if _, ok := lookupTopicKey(c.Name); !ok { // topicKeys
			return kerr.InvalidConfig.Code, fmt.Sprintf("unknown topic config %q", c.Name)
		}
		if c.Value == nil {
			return kerr.InvalidConfig.Code, fmt.Sprintf("config %q has no value", c.Name)
		}
		config[c.Name] = *c.Value
	}
	isrKeys, logKeys := splitTopicConfig(config)
	if _, err := s4.ParseTopicConfig(s.cfg.Topic, isrKeys); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	if _, err := s.Store().ValidateTopicConfigs(logKeys); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	var assignment map[int32][]int32
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return kerr.InvalidRequest.Code, "give either a replica assignment or partitions and a replication factor, not both"
		}
		assignment = map[int32][]int32{}
		for _, a := range t.ReplicaAssignment {
			if len(a.Replicas) == 0 || len(slices.Compact(slices.Sorted(slices.Values(a.Replicas)))) != len(a.Replicas) {
				return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("partition %d: replicas %v must be distinct and not empty", a.Partition, a.Replicas)
			}
			assignment[a.Partition] = a.Replicas
		}
		for p := range int32(len(assignment)) {
			if _, ok := assignment[p]; !ok {
				return kerr.InvalidReplicaAssignment.Code, "partitions must be numbered from 0 without gaps"
			}
		}
	} else {
		partitions, rf := int(t.NumPartitions), int(t.ReplicationFactor)
		if partitions == -1 {
			partitions = s.cfg.NumPartitions
		}
		if rf == -1 {
			rf = s.cfg.DefaultReplicationFactor
		}
		if err := kafkazk.CheckPartitionCount(partitions, rf); err != nil {
			return kerr.InvalidPartitions.Code, err.Error()
		}
		brokers, err := s.ZK.Brokers()
		if err != nil {
			return kerr.UnknownServerError.Code, err.Error()
		}
		ids := make([]int32, 0, len(brokers))
		for _, b := range brokers {
			ids = append(ids, b.ID)
		}
		assignment, err = controller.AssignReplicasRandomly(partitions, rf, ids)
		switch {
		case errors.Is(err, controller.ErrInvalidPartitions):
			return kerr.InvalidPartitions.Code, err.Error()
		case errors.Is(err, controller.ErrInvalidReplicationFactor):
			return kerr.InvalidReplicationFactor.Code, err.Error()
		case err != nil:
			return kerr.UnknownServerError.Code, err.Error()
		}
	}
	var id kafkazk.TopicID
	_, _ = rand.Read(id[:])
	a := kafkazk.TopicAssignment{ID: id, Replicas: assignment}
	if err := s.ZK.CheckTopicAssignment(t.Topic, a); err != nil {
		return kerr.InvalidPartitions.Code, err.Error()
	}
	out.NumPartitions, out.ReplicationFactor = int32(len(assignment)), int16(len(assignment[0]))
	for _, k := range slices.Sorted(maps.Keys(config)) {
		v := config[k]
		out.Configs = append(out.Configs, kmsg.CreateTopicsResponseTopicConfig{Name: k, Value: &v, Source: 1})
	}
	if validateOnly {
		return 0, ""
	}
	err := s.ZK.CreateTopic(t.Topic, a, config)
	switch {
	case errors.Is(err, kafkazk.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %q already exists", t.Topic)
	case err != nil:
		return kerr.UnknownServerError.Code, err.Error()
	}
	out.TopicID = id
	s.logger.Info("topic created", "topic", t.Topic, "topic_id", id, "partitions", len(assignment), "replication_factor", len(assignment[0]), "config", config)
	return 0, ""
}

// DeleteTopics (key 20), v0-v6: any broker marks the topics for deletion
// in ZooKeeper (/admin/delete_topics/<topic>); the controller stops and
// deletes every replica, then the znodes. With a timeout, the answer
// waits until this broker's metadata no longer has the topic. v6 may name
// a topic by its id instead (an id this broker's metadata does not know:
// UNKNOWN_TOPIC_ID), and answers each topic's id; v5 only adds a quota
// error.
//
// The internal topics (__consumer_offsets, __transaction_state) are
// refused with INVALID_TOPIC_EXCEPTION: deleting __consumer_offsets loses
// every group's committed offsets. Kafka's broker would delete them (only
// its kafka-topics.sh refused: "a kafka internal topic and is not allowed
// to be marked for deletion"); the code is the one Kafka answers for the
// other writes clients may not make to them (Produce, DeleteRecords).
func (s *Server) deleteTopicsAPI() broker.API {
	return broker.API{Key: 20, MinVersion: 0, MaxVersion: 6, Handle: s.handleDeleteTopics}
}

func (s *Server) handleDeleteTopics(r *broker.Request) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	names := req.TopicNames
	var unknownIDs [][16]byte
	for _, t := range req.Topics { // v6+: by name, or else by id
		switch name, ok := s.Metadata.TopicName(store.TopicID(t.TopicID)); {
		case t.Topic != nil:
			names = append(names, *t.Topic)
		case ok:
			names = append(names, name)
		default:
			unknownIDs = append(unknownIDs, t.TopicID)
		}
	}
	for _, id := range unknownIDs {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.TopicID, out.ErrorCode = id, kerr.UnknownTopicID.Code
		resp.Topics = append(resp.Topics, out)
	}
	existing, err := s.ZK.Topics()
	var marked []string
	for _, name := range names {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = &name, s.Metadata.TopicID(name)
		switch {
		case err != nil:
			out.ErrorCode = kerr.UnknownServerError.Code
		case !slices.Contains(existing, name):
			out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case s3.IsInternalTopic(name):
			out.ErrorCode = kerr.InvalidTopicException.Code
			msg := fmt.Sprintf("Topic %s is a Kafka internal topic and is not allowed to be marked for deletion.", name)
			out.ErrorMessage = &msg
		default:
			if err := s.ZK.MarkTopicForDeletion(name); err != nil {
				out.ErrorCode = kerr.UnknownServerError.Code
			} else {
				marked = append(marked, name)
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(marked) == 0 || req.TimeoutMillis <= 0 {
		r.Respond(resp)
		return
	}
	gone := func(t string) bool { return len(s.Metadata.Partitions(t)) == 0 }
	answerWhen(r, resp, req.TimeoutMillis, func() bool {
		for _, t := range marked {
			if !gone(t) {
				return false
			}
		}
		return true
	}, func() {
		for i := range resp.Topics {
			if t := resp.Topics[i].Topic; t != nil && slices.Contains(marked, *t) && !gone(*t) {
				resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
			}
		}
	})
}

// ControlledShutdown (key 7), v0-v3: a broker about to stop asks the
// controller to move its leaderships away; the answer lists the
// partitions it still leads. Only the controller answers it (others:
// NOT_CONTROLLER).
func (s *Server) controlledShutdownAPI() broker.API {
	return broker.API{Key: 7, MinVersion: 0, MaxVersion: 3, Handle: s.handleControlledShutdown}
}

func (s *Server) handleControlledShutdown(r *broker.Request) {
	req := r.Body.(*kmsg.ControlledShutdownRequest)
	go func() { // the controller's event queue may be busy: do not hold a handler
		resp := kmsg.NewPtrControlledShutdownResponse()
		remaining, err := s.Controller.ControlledShutdown(req.BrokerID, req.BrokerEpoch)
		switch {
		case errors.Is(err, controller.ErrNotController):
			resp.ErrorCode = kerr.NotController.Code
		case errors.Is(err, controller.ErrStaleBrokerEpoch):
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		case err != nil:
			resp.ErrorCode = kerr.UnknownServerError.Code
		}
		for _, tp := range remaining {
			resp.PartitionsRemaining = append(resp.PartitionsRemaining, kmsg.ControlledShutdownResponsePartitionsRemaining{
				Topic: tp.Topic, Partition: tp.Partition})
		}
		r.Respond(resp)
	}()
}

// AlterPartitionReassignments (key 45), v0: move partitions' replicas to
// other brokers, or cancel a move (KIP-455). Clients send it to the
// controller; another broker answers NOT_CONTROLLER.
func (s *Server) alterPartitionReassignmentsAPI() broker.API {
	return broker.API{Key: 45, MinVersion: 0, MaxVersion: 0, Handle: s.handleAlterPartitionReassignments}
}

func (s *Server) handleAlterPartitionReassignments(r *broker.Request) {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	go func() {
		resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
		targets := map[commitlog.TopicPartition][]int32{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				targets[commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Replicas
			}
		}
		errs, err := s.Controller.AlterReassignments(targets)
		if err != nil {
			resp.ErrorCode = kerr.NotController.Code
			r.Respond(resp)
			return
		}
		for _, t := range req.Topics {
			out := kmsg.AlterPartitionAssignmentsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.AlterPartitionAssignmentsResponseTopicPartition{Partition: p.Partition}
				if err := errs[commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; err != nil {
					msg := err.Error()
					rp.ErrorMessage = &msg
					switch {
					case errors.Is(err, controller.ErrUnknownPartition):
						rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					case errors.Is(err, controller.ErrInvalidAssignment):
						rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
					case errors.Is(err, controller.ErrNoReassignment):
						rp.ErrorCode = kerr.NoReassignmentInProgress.Code
					default:
						rp.ErrorCode = kerr.UnknownServerError.Code
					}
				}
				out.Partitions = append(out.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, out)
		}
		r.Respond(resp)
	}()
}

// ListPartitionReassignments (key 46), v0: the moves in progress, from
// the controller.
func (s *Server) listPartitionReassignmentsAPI() broker.API {
	return broker.API{Key: 46, MinVersion: 0, MaxVersion: 0, Handle: s.handleListPartitionReassignments}
}

func (s *Server) handleListPartitionReassignments(r *broker.Request) {
	req := r.Body.(*kmsg.ListPartitionReassignmentsRequest)
	go func() {
		resp := kmsg.NewPtrListPartitionReassignmentsResponse()
		list, err := s.Controller.ListReassignments()
		if err != nil {
			resp.ErrorCode = kerr.NotController.Code
			r.Respond(resp)
			return
		}
		wanted := func(tp commitlog.TopicPartition) bool {
			if req.Topics == nil {
				return true
			}
			for _, t := range req.Topics {
				if t.Topic == tp.Topic && slices.Contains(t.Partitions, tp.Partition) {
					return true
				}
			}
			return false
		}
		byTopic := map[string]int{}
		for _, tp := range slices.SortedFunc(maps.Keys(list), commitlog.TopicPartition.Compare) {
			if !wanted(tp) {
				continue
			}
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[tp.Topic] = i
				resp.Topics = append(resp.Topics, kmsg.ListPartitionReassignmentsResponseTopic{Topic: tp.Topic})
			}
			m := list[tp]
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, kmsg.ListPartitionReassignmentsResponseTopicPartition{
				Partition: tp.Partition, Replicas: m.Replicas, AddingReplicas: m.Adding, RemovingReplicas: m.Removing})
		}
		r.Respond(resp)
	}()
}
