package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// UpdateMetadata (key 6), v0-v8: the controller tells every broker the
// state of every partition and which brokers are alive; clients' Metadata
// requests are answered from it (unless it is for an earlier incarnation
// of this broker: STALE_BROKER_EPOCH). v1 lists each broker's endpoints, v2 its
// rack, v3 listener names, v4 offline replicas, v5 groups partitions by
// topic and adds the broker epoch, v6 is flexible, v7 adds each topic's id
// (KIP-516), v8 the KRaft controller flag of a ZooKeeper migration (never
// set here).
func (s *Server) updateMetadataAPI() broker.API {
	return broker.API{Key: 6, MinVersion: 0, MaxVersion: 8, Handle: s.handleUpdateMetadata}
}

func (s *Server) handleUpdateMetadata(r *broker.Request) {
	req := r.Body.(*kmsg.UpdateMetadataRequest)
	resp := kmsg.NewPtrUpdateMetadataResponse()
	if s.staleBrokerEpoch(req.BrokerEpoch) {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
	} else if err := s.Replicas.CheckControllerEpoch(req.ControllerEpoch); err != nil {
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
	} else {
		s.Metadata.update(req)
	}
	r.Respond(resp)
}
