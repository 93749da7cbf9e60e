package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
)

// DescribeCluster (key 60), v0-v1 (KIP-700): the live brokers, the
// controller and the cluster id, from this broker's metadata cache (what
// the controller's UpdateMetadata last said), as Kafka's handler answers
// them; admin clients ask it instead of Metadata. A broker of a
// ZooKeeper cluster is an endpoint of type 1 (brokers); a v1 request for
// the controllers (2) gets MISMATCHED_ENDPOINT_TYPE, any other type
// UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0).
//
// This workbook has no authorizer: cluster_authorized_operations is
// Kafka's "not asked" (-2147483648) unless the request asks for it, and
// then every operation Kafka defines on the cluster resource, as a Kafka
// broker without an authorizer answers.
func (s *Server) describeClusterAPI() broker.API {
	return broker.API{Key: 60, MinVersion: 0, MaxVersion: 1, Handle: s.handleDescribeCluster}
}

// clusterOperations is the bit field of the operations on the cluster
// resource (Kafka's AclEntry.supportedOperations(CLUSTER)): CREATE (5),
// ALTER (7), DESCRIBE (8), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10),
// ALTER_CONFIGS (11), IDEMPOTENT_WRITE (12).
const clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func (s *Server) handleDescribeCluster(r *broker.Request) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	const brokers, controllers = 1, 2
	if req.EndpointType != brokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType)
		if req.EndpointType == controllers {
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			msg = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
		}
		if req.Version == 0 {
			resp.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	resp.EndpointType = brokers
	resp.ClusterID = s.Store().ClusterID()
	resp.ControllerID = -1
	controller := s.Metadata.ControllerID()
	for _, b := range s.Metadata.Brokers() {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		if b.ID == controller {
			resp.ControllerID = controller // Kafka's too: a controller it cannot list is -1
		}
	}
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
	}
	r.Respond(resp)
}
