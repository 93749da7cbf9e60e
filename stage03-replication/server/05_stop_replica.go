package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// StopReplica (key 5), v0-v2: the controller stops this broker's replicas
// of some partitions (they moved away) and, with DeletePartitions, deletes
// their logs (their topic was deleted); a request for an earlier
// incarnation of this broker gets STALE_BROKER_EPOCH. v1 groups partitions by topic and
// adds the broker epoch, v2 is flexible.
func (s *Server) stopReplicaAPI() broker.API {
	return broker.API{Key: 5, MinVersion: 0, MaxVersion: 2, Handle: s.handleStopReplica}
}

func (s *Server) handleStopReplica(r *broker.Request) {
	req := r.Body.(*kmsg.StopReplicaRequest)
	resp := kmsg.NewPtrStopReplicaResponse()
	if s.staleBrokerEpoch(req.BrokerEpoch) {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		r.Respond(resp)
		return
	}
	var tps []commitlog.TopicPartition
	for _, t := range req.Topics {
		if req.Version == 0 {
			tps = append(tps, commitlog.TopicPartition{Topic: t.Topic, Partition: t.Partition})
		}
		for _, p := range t.Partitions {
			tps = append(tps, commitlog.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	results, err := s.Replicas.StopReplica(req.ControllerEpoch, tps, req.DeletePartitions)
	if errors.Is(err, replica.ErrStaleController) {
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
		r.Respond(resp)
		return
	}
	for _, tp := range tps {
		resp.Partitions = append(resp.Partitions, kmsg.StopReplicaResponsePartition{
			Topic: tp.Topic, Partition: tp.Partition, ErrorCode: replica.ErrorCode(results[tp])})
	}
	r.Respond(resp)
}
