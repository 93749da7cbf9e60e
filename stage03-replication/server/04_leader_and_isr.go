package server

import (
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// LeaderAndIsr (key 4), v0-v4: the controller tells this broker, for some
// partitions, who leads at which leader epoch, and who the replicas are.
// This broker becomes leader or follower of each; a follower starts fetching
// from the leader, truncating first by leader epoch. A request from an older
// controller epoch is refused whole (STALE_CONTROLLER_EPOCH); a partition
// state whose leader epoch is not newer than this broker's is ignored, as
// Kafka does; one meant for an earlier incarnation of this broker
// (SetBrokerEpoch) is refused with STALE_BROKER_EPOCH. v1 adds IsNew, v2
// groups partitions by topic and adds the broker epoch, v3 the replicas being added and removed, v4 is flexible.
// v5 adds each topic's id (KIP-516), which the broker writes beside each
// partition it holds (partition.metadata) and checks: a partition held
// here for another topic of the same name answers INCONSISTENT_TOPIC_ID
// and is left alone (leader_and_isr_topic_ids.go); the v5+ response names
// topics by id. v6 adds the leader recovery state (KIP-704, a KRaft
// matter: always RECOVERED from a ZooKeeper controller), v7 the KRaft
// controller flag of a migration (never set here).
func (s *Server) leaderAndIsrAPI() broker.API {
	return broker.API{Key: 4, MinVersion: 0, MaxVersion: 7, Handle: s.handleLeaderAndIsr}
}

func (s *Server) handleLeaderAndIsr(r *broker.Request) {
	req := r.Body.(*kmsg.LeaderAndISRRequest)
	resp := kmsg.NewPtrLeaderAndISRResponse()
	if s.staleBrokerEpoch(req.BrokerEpoch) {
		s.Logger().Warn("ignoring LeaderAndIsr for an earlier incarnation of this broker", "broker_epoch", req.BrokerEpoch,
			"current", s.BrokerEpoch(), "controller", req.ControllerID)
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		r.Respond(resp)
		return
	}
	parts := req.PartitionStates         // v0-v1
	for _, ts := range req.TopicStates { // v2+
		for _, ps := range ts.PartitionStates {
			ps.Topic = ts.Topic
			parts = append(parts, ps)
		}
	}
	ids := requestTopicIDs(req)
	inconsistent := s.inconsistentTopicIDs(parts, ids)
	states := map[commitlog.TopicPartition]replica.LeaderAndIsrState{}
	for _, ps := range parts {
		if inconsistent[commitlog.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}] {
			continue
		}
		states[commitlog.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}] = replica.LeaderAndIsrState{
			ControllerEpoch: ps.ControllerEpoch, Leader: ps.Leader, LeaderEpoch: ps.LeaderEpoch,
			ISR: ps.ISR, PartitionEpoch: ps.ZKVersion, Replicas: ps.Replicas,
		}
	}
	leaders := map[int32]string{}
	for _, l := range req.LiveLeaders {
		leaders[l.BrokerID] = net.JoinHostPort(l.Host, itoa(l.Port))
	}
	results, err := s.Replicas.LeaderAndIsr(req.ControllerEpoch, states, leaders)
	if errors.Is(err, replica.ErrStaleController) {
		s.Logger().Warn("ignoring LeaderAndIsr from a stale controller", "err", err, "controller", req.ControllerID)
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
		r.Respond(resp)
		return
	}
	s.assignTopicIDs(states, ids)
	for _, ps := range parts {
		tp := commitlog.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}
		perr := results[tp]
		if perr != nil && !errors.Is(perr, replica.ErrStaleEpoch) {
			s.Logger().Warn("LeaderAndIsr partition failed", "partition", tp, "err", perr)
		}
		code := replica.ErrorCode(perr)
		if inconsistent[tp] {
			code = kerr.InconsistentTopicID.Code
		}
		appendLeaderAndIsrResult(resp, r.Header.APIVersion, ids[ps.Topic], kmsg.LeaderAndISRResponseTopicPartition{
			Topic: ps.Topic, Partition: ps.Partition, ErrorCode: code})
	}
	r.Respond(resp)
}
