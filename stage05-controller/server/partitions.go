package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// CreatePartitions (key 37), v0-v3: a topic grows. Any broker validates
// the request and rewrites the topic's assignment in ZooKeeper with the
// new partitions added (Kafka's ZkAdminManager.createPartitions and
// AdminZkClient.addPartitions), keeping its topic id; the controller's
// data watch on /brokers/topics/<topic> sees them and creates them
// (controller/partitions.go). Without an explicit assignment the new
// partitions' replicas continue Kafka's rack-unaware assignment. With a
// timeout, the answer waits until this broker's metadata shows every new
// partition with a leader (Kafka's DelayedCreatePartitions). A Kafka 3.9
// broker in ZooKeeper mode answers NOT_CONTROLLER unless it is the
// controller; clients send it to the controller anyway, and here, as for
// CreateTopics, any broker can do the writing.
//
// A count whose assignment znode would be larger than ZooKeeper reads in
// one request (kafkazk.JuteMaxBuffer) is refused with INVALID_PARTITIONS
// before anything is written, validate_only too (CreateTopics' rule).
//
// Records are placed by a hash of their key modulo the partition count:
// a topic that grows sends most keys to other partitions from then on,
// as in Kafka. Ordering by key holds only within the old and within the
// new count.
func (s *Server) createPartitionsAPI() broker.API {
	return broker.API{Key: 37, MinVersion: 0, MaxVersion: 3, Handle: s.handleCreatePartitions}
}

func (s *Server) handleCreatePartitions(r *broker.Request) {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	grown := map[string]int32{} // topic -> its new partition count, for the wait
	for _, t := range req.Topics {
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = t.Topic
		var code int16
		var msg string
		if seen[t.Topic] > 1 {
			code, msg = kerr.InvalidRequest.Code, "Duplicate topic in request."
			seen[t.Topic] = -1 // answered once
		} else if seen[t.Topic] < 0 {
			continue
		} else {
			code, msg = s.createPartitions(t, req.ValidateOnly)
		}
		out.ErrorCode = code
		if code != 0 {
			out.ErrorMessage = &msg
		} else if !req.ValidateOnly {
			grown[t.Topic] = t.Count
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(grown) == 0 || req.TimeoutMillis <= 0 {
		r.Respond(resp)
		return
	}
	led := func(topic string) bool {
		parts := s.Metadata.Partitions(topic)
		for p := range grown[topic] {
			if m, ok := parts[p]; !ok || m.Leader < 0 {
				return false
			}
		}
		return true
	}
	answerWhen(r, resp, req.TimeoutMillis, func() bool {
		for t := range grown {
			if !led(t) {
				return false
			}
		}
		return true
	}, func() {
		for i := range resp.Topics {
			if t := resp.Topics[i].Topic; grown[t] > 0 && !led(t) {
				resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
			}
		}
	})
}

// createPartitions validates one topic's growth and writes it, returning
// the error code and message for the answer (Kafka's, in Kafka's order).
// A write that finds the assignment changed since it was read (the
// controller moved a partition, another request grew the topic) starts
// over from the new one.
func (s *Server) createPartitions(t kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, string) {
	for range 5 {
		code, msg, err := s.tryCreatePartitions(t, validateOnly)
		if !errors.Is(err, zk.ErrBadVersion) {
			return code, msg
		}
	}
	return kerr.UnknownServerError.Code, fmt.Sprintf("the assignment of topic '%s' kept changing; try again", t.Topic)
}

func (s *Server) tryCreatePartitions(t kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, string, error) {
	topic := t.Topic
	if queued, err := s.ZK.TopicQueuedForDeletion(topic); err != nil {
		return kerr.UnknownServerError.Code, err.Error(), nil
	} else if queued {
		return kerr.InvalidTopicException.Code, "The topic is queued for deletion.", nil
	}
	brokers, err := s.ZK.Brokers()
	if err != nil {
		return kerr.UnknownServerError.Code, err.Error(), nil
	}
	ids := make([]int32, 0, len(brokers))
	for _, b := range brokers {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	assignments, err := s.ZK.TopicAssignments(topic)
	if err != nil {
		return kerr.UnknownServerError.Code, err.Error(), nil
	}
	existing, ok := assignments[topic]
	if !ok || len(existing.Replicas) == 0 {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("The topic '%s' does not exist.", topic), nil
	}
	if len(existing.Adding) > 0 || len(existing.Removing) > 0 {
		return kerr.ReassignmentInProgress.Code, fmt.Sprintf("A partition reassignment is in progress for the topic '%s'.", topic), nil
	}
	old := int32(len(existing.Replicas))
	increment := t.Count - old
	switch {
	case increment < 0:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", old, t.Count), nil
	case increment == 0:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("Topic already has %d partitions.", old), nil
	}
	partition0, ok := existing.Replicas[0]
	if !ok || len(partition0) == 0 {
		return kerr.UnknownServerError.Code, fmt.Sprintf("Unexpected existing replica assignment for topic '%s', partition id 0 is missing.", topic), nil
	}
	if err := kafkazk.CheckPartitionCount(int(t.Count), len(partition0)); err != nil {
		return kerr.InvalidPartitions.Code, err.Error(), nil
	}
	var added map[int32][]int32
	if t.Assignment != nil {
		added = map[int32][]int32{}
		var unknown []string
		for i, a := range t.Assignment {
			for _, id := range a.Replicas {
				if !slices.Contains(ids, id) && !slices.Contains(unknown, fmt.Sprint(id)) {
					unknown = append(unknown, fmt.Sprint(id))
				}
			}
			added[old+int32(i)] = a.Replicas
		}
		if len(unknown) > 0 {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Unknown broker(s) in replica assignment: %s.", strings.Join(unknown, ", ")), nil
		}
		if int32(len(t.Assignment)) != increment {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Increasing the number of partitions by %d but %d assignments provided.",
				increment, len(t.Assignment)), nil
		}
		if code, msg := checkNewAssignment(added, len(partition0)); code != 0 {
			return code, msg, nil
		}
	} else {
		added, err = controller.AssignNewPartitions(int(old), int(increment), len(partition0), ids, partition0[0])
		switch {
		case errors.Is(err, controller.ErrInvalidReplicationFactor):
			return kerr.InvalidReplicationFactor.Code, err.Error(), nil
		case err != nil:
			return kerr.UnknownServerError.Code, err.Error(), nil
		}
	}
	next := existing.TopicAssignment
	next.Replicas = maps.Clone(existing.Replicas)
	maps.Copy(next.Replicas, added)
	if err := s.ZK.CheckTopicAssignment(topic, next); err != nil {
		return kerr.InvalidPartitions.Code, err.Error(), nil
	}
	if validateOnly {
		return 0, "", nil
	}
	if err := s.ZK.AddPartitions(topic, next, existing.ZkVersion); err != nil {
		if errors.Is(err, zk.ErrBadVersion) {
			return 0, "", err
		}
		return kerr.UnknownServerError.Code, err.Error(), nil
	}
	s.logger.Info("partitions added", "topic", topic, "from", old, "to", t.Count, "assignment", added)
	return 0, "", nil
}

// checkNewAssignment is Kafka's AdminZkClient.validateReplicaAssignment
// for an explicit assignment of new partitions (its brokers are known to
// be registered): no partition without replicas, no broker twice, the
// topic's replication factor everywhere.
func checkNewAssignment(added map[int32][]int32, replicationFactor int) (int16, string) {
	join := func(xs []int32) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ", ")
	}
	var bad, factors []int32
	for _, p := range slices.Sorted(maps.Keys(added)) {
		replicas := added[p]
		if len(replicas) == 0 {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Cannot have replication factor of 0 for partition id %d.", p)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(replicas)))) != len(replicas) {
			return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Duplicate brokers not allowed in replica assignment: %s for partition id %d.",
				join(replicas), p)
		}
		if len(replicas) != replicationFactor {
			bad, factors = append(bad, p), append(factors, int32(len(replicas)))
		}
	}
	if len(bad) > 0 {
		return kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Inconsistent replication factor between partitions, partition 0 has %d "+
			"while partitions [%s] have replication factors [%s], respectively.", replicationFactor, join(bad), join(factors))
	}
	return 0, ""
}
