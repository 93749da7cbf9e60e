package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// DeleteRecords (key 21), v0-v2: kafka-delete-records.sh, an admin
// client's deleteRecords. v1 is v0 (throttling after the answer), v2 is
// flexible. For each partition, its leader moves the log start offset to
// the offset asked for (-1: the high watermark), refusing one past the
// high watermark (OFFSET_OUT_OF_RANGE), and the answer waits in the
// DeleteRecords purgatory (Kafka's DelayedDeleteRecords) until the
// partition's low watermark, the smallest log start offset of its replicas
// on live brokers, has reached it: the followers learn the leader's start
// from their fetch responses, move their own, and tell it with their next
// fetch. The answer carries the low watermark, or REQUEST_TIMED_OUT after
// the request's timeout. Other errors are Kafka's: UNKNOWN_TOPIC_OR_PARTITION,
// NOT_LEADER_OR_FOLLOWER (another broker leads, or this one stopped
// leading while the request waited), POLICY_VIOLATION for a topic whose
// cleanup.policy lacks delete, INVALID_TOPIC_EXCEPTION for an internal
// topic.
//
// The records go for readers at once; their segments go at the next
// retention pass (commitlog.Log.IncrementStartOffset), and the new start
// reaches the log-start-offset-checkpoint file within
// log.flush.start.offset.checkpoint.interval.ms, as in Kafka.
func (s *Server) deleteRecordsAPI() broker.API {
	return broker.API{Key: 21, MinVersion: 0, MaxVersion: 2, Handle: s.handleDeleteRecords}
}

// internalTopics are the topics whose records only the broker deletes
// (Kafka's Topic.isInternal).
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

func (s *Server) handleDeleteRecords(r *broker.Request) {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	for _, rt := range req.Topics {
		st := kmsg.DeleteRecordsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			st.Partitions = append(st.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: rp.Partition, LowWatermark: -1})
		}
		resp.Topics = append(resp.Topics, st)
	}
	op := &delayedDeleteRecords{s: s, r: r, resp: resp}
	var keys []commitlog.TopicPartition
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			out := &resp.Topics[i].Partitions[j]
			requested, ok := s.deleteRecordsOnLeader(rt.Topic, rp.Partition, rp.Offset, out)
			if ok {
				tp := commitlog.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
				op.pending = append(op.pending, pendingDelete{tp: tp, required: requested, out: out})
				keys = append(keys, tp)
			}
		}
	}
	if len(op.pending) == 0 {
		r.Respond(resp)
		return
	}
	s.DeleteRecords.TryCompleteElseWatch(op, time.Duration(req.TimeoutMillis)*time.Millisecond, keys...)
}

// deleteRecordsOnLeader moves one partition's log start (Kafka's
// deleteRecordsOnLocalLog) and fills out; it reports whether the answer
// must wait for the followers, and the offset they must reach.
func (s *Server) deleteRecordsOnLeader(topic string, partition int32, offset int64, out *kmsg.DeleteRecordsResponseTopicPartition) (int64, bool) {
	if internalTopics[topic] {
		out.ErrorCode = kerr.InvalidTopicException.Code
		return 0, false
	}
	p, ok := s.Replicas.Partition(topic, partition)
	if !ok {
		out.ErrorCode = s.MissingPartitionCode(topic, partition)
		return 0, false
	}
	requested, lw, err := p.DeleteRecordsOnLeader(offset, s.alive)
	if err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return 0, false
	}
	out.LowWatermark = lw // kept if the wait times out, as Kafka answers
	return requested, lw < requested
}

// alive reports whether a broker is live, as the controller last said
// (UpdateMetadata): a dead follower does not hold the low watermark back.
func (s *Server) alive(id int32) bool {
	_, ok := s.Metadata.Broker(id)
	return ok
}

// delayedDeleteRecords is Kafka's DelayedDeleteRecords: a DeleteRecords
// request whose partitions wait for their low watermarks. Fields are
// touched by one goroutine at a time (purgatory.Operation).
type delayedDeleteRecords struct {
	s       *Server
	r       *broker.Request
	resp    *kmsg.DeleteRecordsResponse
	pending []pendingDelete
}

// pendingDelete is one partition of a delayedDeleteRecords.
type pendingDelete struct {
	tp       commitlog.TopicPartition
	required int64 // the offset the low watermark must reach
	out      *kmsg.DeleteRecordsResponseTopicPartition
	done     bool
}

// TryComplete settles each partition whose low watermark has reached its
// offset, or whose leadership moved (NOT_LEADER_OR_FOLLOWER) or that is
// gone (UNKNOWN_TOPIC_OR_PARTITION).
func (d *delayedDeleteRecords) TryComplete() bool {
	all := true
	for i := range d.pending {
		w := &d.pending[i]
		if w.done {
			continue
		}
		p, ok := d.s.Replicas.Partition(w.tp.Topic, w.tp.Partition)
		if !ok {
			w.out.ErrorCode, w.out.LowWatermark, w.done = kerr.UnknownTopicOrPartition.Code, -1, true
			continue
		}
		lw, err := p.LowWatermark(d.s.alive)
		switch {
		case err != nil:
			w.out.ErrorCode, w.out.LowWatermark, w.done = replica.ErrorCode(err), -1, true
		case lw >= w.required:
			w.out.LowWatermark, w.done = lw, true
		default:
			all = false
		}
	}
	return all
}

// OnComplete answers; a partition still waiting timed out, with the low
// watermark it had when the request came.
func (d *delayedDeleteRecords) OnComplete() {
	for _, w := range d.pending {
		if !w.done {
			w.out.ErrorCode = kerr.RequestTimedOut.Code
		}
	}
	d.r.Respond(d.resp)
}

func (d *delayedDeleteRecords) OnExpiration() {}
