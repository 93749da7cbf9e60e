package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	s3 "github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// The group APIs, with the versions a Kafka 3.x broker in ZooKeeper mode
// serves (JoinGroup and LeaveGroup up to v8 and v5, the reason fields of
// KIP-800; JoinGroup v9's SkipAssignment, KIP-814, is not served).
func (s *Server) groupAPIs() []broker.API {
	return []broker.API{
		{Key: 8, MinVersion: 0, MaxVersion: 8, Handle: s.handleOffsetCommit},
		{Key: 9, MinVersion: 0, MaxVersion: 8, Handle: func(r *broker.Request) {
			r.Respond(s.Groups.OffsetFetch(r.Body.(*kmsg.OffsetFetchRequest)))
		}},
		{Key: 10, MinVersion: 0, MaxVersion: 4, Handle: s.handleFindCoordinator},
		{Key: 11, MinVersion: 0, MaxVersion: 8, Handle: s.handleJoinGroup},
		{Key: 12, MinVersion: 0, MaxVersion: 4, Handle: func(r *broker.Request) {
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.ErrorCode = s.Groups.Heartbeat(r.Body.(*kmsg.HeartbeatRequest))
			r.Respond(resp)
		}},
		{Key: 13, MinVersion: 0, MaxVersion: 5, Handle: func(r *broker.Request) {
			r.Respond(s.Groups.LeaveGroup(r.Body.(*kmsg.LeaveGroupRequest)))
		}},
		{Key: 14, MinVersion: 0, MaxVersion: 5, Handle: func(r *broker.Request) {
			s.Groups.SyncGroup(r.Body.(*kmsg.SyncGroupRequest), func(resp *kmsg.SyncGroupResponse) { r.Respond(resp) })
		}},
		{Key: 15, MinVersion: 0, MaxVersion: 5, Handle: func(r *broker.Request) {
			r.Respond(s.Groups.DescribeGroups(r.Body.(*kmsg.DescribeGroupsRequest)))
		}},
		{Key: 16, MinVersion: 0, MaxVersion: 4, Handle: func(r *broker.Request) {
			r.Respond(s.Groups.ListGroups(r.Body.(*kmsg.ListGroupsRequest)))
		}},
		{Key: 42, MinVersion: 0, MaxVersion: 2, Handle: func(r *broker.Request) {
			s.Groups.DeleteGroups(r.Body.(*kmsg.DeleteGroupsRequest), func(resp *kmsg.DeleteGroupsResponse) { r.Respond(resp) })
		}},
		{Key: 47, MinVersion: 0, MaxVersion: 0, Handle: func(r *broker.Request) {
			s.Groups.OffsetDelete(r.Body.(*kmsg.OffsetDeleteRequest), func(resp *kmsg.OffsetDeleteResponse) { r.Respond(resp) })
		}},
	}
}

func (s *Server) handleJoinGroup(r *broker.Request) {
	req := r.Body.(*kmsg.JoinGroupRequest)
	jr := group.JoinRequest{JoinGroupRequest: req, ClientHost: "/"}
	if r.Header.ClientID != nil {
		jr.ClientID = *r.Header.ClientID
	}
	if tcp, ok := r.RemoteAddr().(*net.TCPAddr); ok {
		jr.ClientHost += tcp.IP.String() // Kafka's InetAddress.toString: "/127.0.0.1"
	}
	s.Groups.JoinGroup(jr, func(resp *kmsg.JoinGroupResponse) { r.Respond(resp) })
}

// handleOffsetCommit checks each partition against the metadata cache
// before the coordinator sees it, as Kafka's
// KafkaApis.handleOffsetCommitRequest does (metadataCache.contains): a
// commit for a topic or partition that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION and is not stored, so that the offsets topic
// does not collect commits for topics that never were (a typo, a topic
// deleted). The rest go to the coordinator; when none is left, Kafka
// answers without asking it.
func (s *Server) handleOffsetCommit(r *broker.Request) {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	known := *req
	known.Topics = nil
	unknown := map[string]map[int32]bool{}
	for _, t := range req.Topics {
		parts := s.Metadata.Partitions(t.Topic)
		kt := t
		kt.Partitions = nil
		for _, p := range t.Partitions {
			if _, ok := parts[p.Partition]; ok {
				kt.Partitions = append(kt.Partitions, p)
				continue
			}
			if unknown[t.Topic] == nil {
				unknown[t.Topic] = map[int32]bool{}
			}
			unknown[t.Topic][p.Partition] = true
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	if len(unknown) == 0 {
		s.Groups.OffsetCommit(req, func(resp *kmsg.OffsetCommitResponse) { r.Respond(resp) })
		return
	}
	answer := func(stored *kmsg.OffsetCommitResponse) {
		codes := map[string]map[int32]int16{}
		for _, t := range stored.Topics {
			codes[t.Topic] = map[int32]int16{}
			for _, p := range t.Partitions {
				codes[t.Topic][p.Partition] = p.ErrorCode
			}
		}
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.ThrottleMillis = stored.ThrottleMillis
		for _, t := range req.Topics { // in the request's order
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, codes[t.Topic][p.Partition]
				if unknown[t.Topic][p.Partition] {
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		r.Respond(resp)
	}
	if len(known.Topics) == 0 {
		answer(kmsg.NewPtrOffsetCommitResponse())
		return
	}
	s.Groups.OffsetCommit(&known, answer)
}

// FindCoordinator (key 10), v0-v4: the coordinator of a group is the
// leader of its partition of __consumer_offsets, which the first
// FindCoordinator creates (COORDINATOR_NOT_AVAILABLE until it has
// leaders). v4 asks for several keys at once (KIP-699). Key type 1 finds
// a transactional id's coordinator the same way, on __transaction_state
// (txns.go).
func (s *Server) handleFindCoordinator(r *broker.Request) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var msg string
		c.NodeID, c.Host, c.Port, c.ErrorCode, msg = s.findCoordinator(req.CoordinatorType, key, r.Listener())
		if msg != "" {
			c.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage
		resp.Coordinators = nil
	}
	r.Respond(resp)
}

func (s *Server) findCoordinator(keyType int8, key, listener string) (node int32, host string, port int32, code int16, msg string) {
	switch {
	case keyType == 1:
		return s.findTxnCoordinator(key, listener)
	case keyType != 0:
		return -1, "", -1, kerr.InvalidRequest.Code, fmt.Sprintf("coordinator key type %d: groups (0) and transactions (1) are served", keyType)
	case key == "":
		return -1, "", -1, kerr.InvalidRequest.Code, "the group id is empty"
	}
	parts := s.Metadata.Partitions(group.Topic)
	if parts == nil {
		if err := s.createOffsetsTopic(); err != nil {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, err.Error()
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "creating " + group.Topic
	}
	p, ok := parts[group.PartitionFor(key, s.Groups.Partitions())]
	if !ok || p.Leader < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "the group's partition of " + group.Topic + " has no leader"
	}
	host, port, found := s.Metadata.BrokerFor(p.Leader, listener) // its address on the listener the client asked on
	if !found {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("broker %d is not alive on listener %s", p.Leader, listener)
	}
	return p.Leader, host, port, 0, ""
}

// createOffsetsTopic creates __consumer_offsets with
// offsets.topic.num.partitions partitions, offsets.topic.replication.factor
// replicas (refused while fewer brokers are alive, as Kafka refuses) and
// cleanup.policy=compact, as Kafka's first FindCoordinator does.
func (s *Server) createOffsetsTopic() error {
	brokers, err := s.ZK.Brokers()
	if err != nil {
		return err
	}
	if len(brokers) < s.cfg.OffsetsReplicationFactor {
		return fmt.Errorf("%s needs %d alive brokers (offsets.topic.replication.factor), %d are", group.Topic,
			s.cfg.OffsetsReplicationFactor, len(brokers))
	}
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	assignment, err := controller.AssignReplicasRandomly(int(s.Groups.Partitions()), s.cfg.OffsetsReplicationFactor, ids)
	if err != nil {
		return err
	}
	var id kafkazk.TopicID
	_, _ = rand.Read(id[:])
	config := map[string]string{"cleanup.policy": "compact", "compression.type": "producer",
		"segment.bytes": strconv.FormatInt(s.cfg.OffsetsSegmentBytes, 10)}
	err = s.ZK.CreateTopic(group.Topic, kafkazk.TopicAssignment{ID: id, Replicas: assignment}, config)
	if err != nil && !errors.Is(err, kafkazk.ErrTopicExists) {
		return err
	}
	if err == nil {
		s.logger.Info("created the offsets topic", "topic", group.Topic, "partitions", len(assignment),
			"replication_factor", s.cfg.OffsetsReplicationFactor)
	}
	return nil
}

// ProduceAppender is this broker's produce path (broker.Appender): stage
// 04's appends, refusing internal topics. Stage 06 wraps it to
// recompress batches to their topic's compression.type.
func (s *Server) ProduceAppender() broker.Appender { return internalGuard{s} }

// internalGuard is the broker's Produce path (stage 04's AppendRecords)
// refusing clients' batches for internal topics with
// INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager does: only the
// coordinator writes __consumer_offsets.
type internalGuard struct{ s *Server }

func (g internalGuard) AppendRecords(_ *broker.Request, acks int16, timeout time.Duration, parts []broker.ProducePartition, done func()) {
	allowed := parts[:0:0]
	for _, p := range parts {
		if s3.IsInternalTopic(p.Topic) {
			p.Response.ErrorCode = kerr.InvalidTopicException.Code
			msg := "cannot append to internal topic " + p.Topic
			p.Response.ErrorMessage = &msg
			continue
		}
		allowed = append(allowed, p)
	}
	if len(allowed) == 0 {
		done()
		return
	}
	g.s.AppendRecords(acks, timeout, allowed, done)
}

// offsetsWriter appends the coordinator's records through stage 04's
// produce path, with acks=all.
type offsetsWriter struct{ s *Server }

func (w offsetsWriter) Append(partition int32, batch []byte, timeout time.Duration, done func(code int16)) {
	part := broker.ProducePartition{Topic: group.Topic,
		Request:  &kmsg.ProduceRequestTopicPartition{Partition: partition, Records: batch},
		Response: &kmsg.ProduceResponseTopicPartition{Partition: partition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}}
	w.s.AppendAsCoordinator(timeout, []broker.ProducePartition{part}, func() { done(part.Response.ErrorCode) })
}

// coordinatorPartitionChanged tells the group and transaction
// coordinators of a change to a partition of their topics (stage 04's
// Options.StateChanged).
func (s *Server) coordinatorPartitionChanged(p *replica.Partition) {
	s.offsetsPartitionChanged(p)
	s.txnPartitionChanged(p)
}

// offsetsPartitionChanged tells the coordinator when this broker starts
// or stops leading a partition of __consumer_offsets (stage 04's
// Options.StateChanged).
func (s *Server) offsetsPartitionChanged(p *replica.Partition) {
	if p.Topic != group.Topic {
		return
	}
	if p.Role() == replica.Leader {
		_, epoch := p.Leader()
		s.Groups.Elected(p.TopicPartition.Partition, epoch, p.Log)
		return
	}
	s.Groups.Resigned(p.TopicPartition.Partition)
}
