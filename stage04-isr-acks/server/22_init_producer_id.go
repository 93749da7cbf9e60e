package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// InitProducerId (key 22), v0-v4, as a Kafka 2.8 broker serves it for an
// idempotent producer: a new producer id, from this broker's block
// (producer.Allocator), at epoch 0. Any broker answers. v2 adds nothing
// here, v3 the producer's current id and epoch (KIP-360: a transactional
// producer asks to bump its epoch; an idempotent one gets a new id, as in
// Kafka), v2+ is flexible from v2.
//
// A request with a transactional id is refused (INVALID_REQUEST): this
// stage keeps the partition's side of transactions (txn.go) but has no
// transaction coordinator, which stage 05 adds beside its group
// coordinator and which answers these requests there. A transactional
// client here fails at once instead of writing records nobody can commit.
func (s *Server) initProducerIDAPI() broker.API {
	return broker.API{Key: 22, MinVersion: 0, MaxVersion: 4, Handle: s.HandleInitProducerID}
}

// HandleInitProducerID answers an InitProducerId as this stage does:
// stage 05 calls it for the requests without a transactional id.
func (s *Server) HandleInitProducerID(r *broker.Request) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil:
		resp.ErrorCode = kerr.InvalidRequest.Code
		s.Logger().Info("refused InitProducerId with a transactional id: transactions are not supported", "transactional_id", *req.TransactionalID)
	default:
		id, err := s.ids.Next()
		if err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable: the block store may come back
			s.Logger().Error("cannot allocate a producer id", "err", err)
			break
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
	}
	r.Respond(resp)
}

// ProducerIDs is the broker's producer id allocator, which stage 05's
// transaction coordinator draws from too.
func (s *Server) ProducerIDs() *producer.Allocator { return s.ids }
