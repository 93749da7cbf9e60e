package server

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// Produce (key 0), v3-v9: stage 03's replicated produce, with acks as
// seed §1.4 and Kafka mean them:
//
//	acks=0    no response at all (the connection reads its next request)
//	acks=1    answered once the leader has appended
//	acks=all  answered once every ISR member has the batch: the high
//	          watermark has passed it
//
// and min.insync.replicas (broker default, per-topic override) for
// acks=all: with fewer ISR members, the batch is refused before it is
// appended (NOT_ENOUGH_REPLICAS); if the ISR shrinks below it after the
// append, the answer, once the high watermark passes the batch, is
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the batch is in the log, but fewer
// copies than asked for were made). acks=1 ignores min.insync.replicas, as
// in Kafka. An acks=all produce waits in the produce purgatory
// (DelayedProduce) for at most its timeout (then REQUEST_TIMED_OUT).
func (s *Server) produceAPI() broker.API { return broker.ProduceAPI(appender{s: s}) }

// appender is this broker's produce path; coordinator marks a
// coordinator's writes (AppendAsCoordinator).
type appender struct {
	s           *Server
	coordinator bool
}

// AppendRecords appends batches as this broker's produce handler does
// (broker.Appender: acks, min.insync.replicas, idempotence, the produce
// purgatory) for a writer inside the broker: stage 05's group coordinator
// writes its group metadata and offset commits to __consumer_offsets
// with acks=all through it (Kafka's ReplicaManager.appendRecords with
// internalTopicsAllowed). done is called exactly once, possibly from
// another goroutine, when each parts[i].Response holds its answer.
func (s *Server) AppendRecords(acks int16, timeout time.Duration, parts []broker.ProducePartition, done func()) {
	appender{s: s}.AppendRecords(nil, acks, timeout, parts, done)
}

// AppendAsCoordinator is AppendRecords with acks=all for a coordinator
// inside the broker writing a producer's transactional batch (stage 05's
// group coordinator, a transactional offset commit): Kafka's
// AppendOrigin.COORDINATOR. Its producer epoch is checked and its
// transaction opened as for a client's batch, but not its sequence: the
// coordinator writes every such batch at sequence 0.
func (s *Server) AppendAsCoordinator(timeout time.Duration, parts []broker.ProducePartition, done func()) {
	appender{s: s, coordinator: true}.AppendRecords(nil, -1, timeout, parts, done)
}

func (a appender) AppendRecords(r *broker.Request, acks int16, timeout time.Duration, parts []broker.ProducePartition, done func()) {
	base := server.NewReplicaAppender(a.s.Server)
	op := &delayedProduce{done: done}
	var keys []commitlog.TopicPartition
	for _, part := range parts {
		minISR := 0
		if acks == -1 {
			minISR = a.s.topics.get(part.Topic).MinInsyncReplicas
		}
		p, last, epoch := a.appendPartition(base, part, minISR)
		if p != nil && acks == -1 {
			op.parts = append(op.parts, pendingPartition{p: p, out: part.Response,
				required: last + 1, epoch: epoch, minISR: minISR})
			keys = append(keys, p.TopicPartition)
		}
	}
	if len(op.parts) == 0 {
		done()
		return
	}
	a.s.Produces.TryCompleteElseWatch(op, timeout, keys...)
}

// appendPartition appends one partition's batch with stage 03's
// AppendPartition, and for an idempotent producer's batch (producer id >=
// 0) first checks it against the partition's producer state, as Kafka's
// Log.analyzeAndValidateProducerState: a retry of a batch already in the
// log is answered with its offsets and not appended again (and, for
// acks=all, waits like the original for the high watermark to pass it); a
// gap in the sequence answers OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch
// INVALID_PRODUCER_EPOCH, a batch outside the producer's open transaction
// INVALID_TXN_STATE (txn.go). The check, the append and the recording are one
// step (State.Serialize).
func (a appender) appendPartition(base server.ReplicaAppender, part broker.ProducePartition, minISR int) (p *replica.Partition, last int64, epoch int32) {
	h, err := record.ReadHeader(part.Request.Records)
	p, ok := a.s.Replicas.Partition(part.Topic, part.Request.Partition)
	if err != nil || h.ProducerID < 0 || !ok {
		return base.AppendPartition(part, minISR) // not idempotent, or refused there
	}
	pp, _, err := a.s.producers.entry(p)
	if errors.Is(err, replica.ErrNotReplica) { // deleted since it was looked up
		part.Response.ErrorCode = replica.ErrorCode(err)
		return nil, 0, 0
	}
	if err != nil {
		part.Response.ErrorCode = kerr.KafkaStorageError.Code
		a.s.Logger().Error("producer state", "partition", p.TopicPartition, "err", err)
		return nil, 0, 0
	}
	b, st := batchOf(&h), pp.st
	st.Serialize(func() {
		if err := p.CheckLeader(-1); err != nil {
			part.Response.ErrorCode = replica.ErrorCode(err)
			p = nil
			return
		}
		var dup *producer.Batch
		if a.coordinator {
			err = st.CheckEpoch(h.ProducerID, h.ProducerEpoch)
		} else {
			dup, err = st.Check(h.ProducerID, h.ProducerEpoch, b.FirstSeq, b.LastSeq)
		}
		if err == nil && dup == nil {
			err = st.CheckTransactional(h.ProducerID, h.ProducerEpoch, b.Transactional)
		}
		switch {
		case errors.Is(err, producer.ErrOutOfOrderSequence):
			part.Response.ErrorCode, p = kerr.OutOfOrderSequenceNumber.Code, nil
		case errors.Is(err, producer.ErrInvalidProducerEpoch):
			part.Response.ErrorCode, p = kerr.InvalidProducerEpoch.Code, nil
		case errors.Is(err, producer.ErrInvalidTxnState):
			part.Response.ErrorCode, p = kerr.InvalidTxnState.Code, nil
		case dup != nil:
			// A damaged retry is refused, not acknowledged: Kafka validates
			// a batch before it looks for duplicates (AppendPartition
			// validates the batches it appends).
			if code, msg := a.s.ValidateProducedBatch(part.Request.Records, p.Log.Config().CleanupPolicy.Compact()); code != 0 {
				part.Response.ErrorCode, part.Response.ErrorMessage, p = code, &msg, nil
				return
			}
			part.Response.BaseOffset, part.Response.LogStartOffset = dup.FirstOffset, p.Log.StartOffset()
			last, epoch = dup.LastOffset, p.Epochs.EpochForOffset(dup.LastOffset)
		default:
			undo := func() {}
			if b.Transactional {
				undo = st.Opening(h.ProducerID, h.ProducerEpoch, p.Log.EndOffset())
			}
			if p, last, epoch = base.AppendPartition(part, minISR); p == nil {
				undo()
			} else {
				b.FirstOffset, b.LastOffset = part.Response.BaseOffset, last
				st.Append(h.ProducerID, h.ProducerEpoch, b)
				a.s.producers.recorded(pp)
			}
		}
	})
	return p, last, epoch
}

// delayedProduce is Kafka's DelayedProduce: an acks=all produce waiting
// for each of its partitions' high watermarks to pass its batch.
type delayedProduce struct {
	parts []pendingPartition
	done  func()
}

// pendingPartition is one partition of a delayedProduce.
type pendingPartition struct {
	p        *replica.Partition
	out      *kmsg.ProduceResponseTopicPartition
	required int64 // the high watermark that acknowledges the batch: its last offset + 1
	epoch    int32 // the leader epoch it was appended under
	minISR   int
	settled  bool // out holds the answer
}

// TryComplete settles each partition it can, as Kafka's
// DelayedProduce.tryComplete and Partition.checkEnoughReplicasReachOffset
// (success, NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS_AFTER_APPEND),
// and reports whether every partition is settled; OnComplete answers the
// others at the deadline.
func (d *delayedProduce) TryComplete() bool {
	// exercise 04.5: settle each partition of an acks=all produce that can be answered
	// hint: a partition settles once the high watermark passes its batch or its broker no longer leads that batch; the others keep the produce waiting
	// tests: ./cluster.TestWaitingProduceSurvivesALeaderEpochBumpWithTheSameLeader, ./cluster.TestAWaitingProduceIsAnsweredNotLeaderWhenTheLeaderMoves, ./cluster.TestISRShrinkingAfterTheAppendAnswersNotEnoughReplicasAfterAppend, ./cluster.TestAcksAllTimesOutWhenTheISRCannotCatchUp, ./cluster.TestSlowFollowerLeavesTheISRAndRejoins
	all := true
	for i := range d.parts {
		pp := &d.parts[i]
		if pp.settled {
			continue
		}
		// Tried at every move of the partition's high watermark: the ISR
		// is copied only once the high watermark has passed the batch.
		// break 04.b1: answer acks=all once the leader has the batch
		// predict: the producer hears "written" as soon as the leader appended; the leader then dies before a follower fetched. Which tests notice, and what does a consumer of the new leader read?
		// tests: ./cluster.TestAcksAllTimesOutWhenTheISRCannotCatchUp, ./cluster.TestISRShrinkingAfterTheAppendAnswersNotEnoughReplicasAfterAppend, ./cluster.TestSlowFollowerLeavesTheISRAndRejoins
		switch {
		case !pp.p.StillLeadsBatch(pp.required-1, pp.epoch):
			pp.out.ErrorCode, pp.settled = kerr.NotLeaderForPartition.Code, true
		case pp.p.HighWatermark() < pp.required:
			all = false
		default:
			pp.settled = true
			if _, isr := pp.p.Replicas(); len(isr) < pp.minISR {
				pp.out.ErrorCode = kerr.NotEnoughReplicasAfterAppend.Code
				msg := "the batch was appended, but the ISR shrank below min.insync.replicas before it was acknowledged"
				pp.out.ErrorMessage = &msg
			}
		}
		// broken:
		// switch {
		// case !pp.p.StillLeadsBatch(pp.required-1, pp.epoch):
		// 	pp.out.ErrorCode, pp.settled = kerr.NotLeaderForPartition.Code, true
		// default:
		// 	pp.settled = true // the leader has the batch: good enough
		// }
		// end break
	}
	return all
	// end exercise
}

// OnComplete answers: partitions not settled by the deadline (or at
// shutdown) answer REQUEST_TIMED_OUT.
func (d *delayedProduce) OnComplete() {
	for i := range d.parts {
		if pp := &d.parts[i]; !pp.settled {
			pp.out.ErrorCode = kerr.RequestTimedOut.Code
			msg := "the batch was not replicated to the ISR within the request's timeout"
			pp.out.ErrorMessage = &msg
		}
	}
	d.done()
}

func (d *delayedProduce) OnExpiration() {}
