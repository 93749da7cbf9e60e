package server

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// Produce (key 0), v3-v9, as in stage 02 but replicated: only a partition's
// leader appends (others answer NOT_LEADER_OR_FOLLOWER, and the client
// refreshes its metadata and finds the leader), batches are stamped with the
// leader epoch, and acks=all (-1) is answered only when the high watermark
// has passed the batch: every replica that counts has it (§1.4). That wait
// is bounded by the request's timeout (REQUEST_TIMED_OUT after it); stage 04
// makes it a purgatory over the ISR.
func (s *Server) produceAPI() broker.API {
	return broker.ProduceAPI(s.handleProduce)
}

// awaitingHW is a partition of an acks=all produce waiting for replication.
type awaitingHW struct {
	p     *replica.Partition
	out   *kmsg.ProduceResponseTopicPartition
	last  int64 // the last offset appended: done when the HW passes it
	epoch int32 // the leader epoch it was appended under
}

func (s *Server) handleProduce(r *broker.Request) {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := kmsg.NewPtrProduceResponse()
	validAcks := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	failed := false
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, kmsg.ProduceResponseTopic{Topic: rt.Topic})
	}
	var waiting []awaitingHW
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		for _, rp := range rt.Partitions {
			st.Partitions = append(st.Partitions, kmsg.ProduceResponseTopicPartition{
				Partition: rp.Partition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1})
		}
		for j, rp := range rt.Partitions {
			out := &st.Partitions[j]
			if !validAcks {
				out.ErrorCode = kerr.InvalidRequiredAcks.Code
				failed = true
				continue
			}
			p, last, epoch := s.appendPartition(rt.Topic, rp, out)
			if out.ErrorCode != 0 {
				failed = true
			} else if req.Acks == -1 {
				waiting = append(waiting, awaitingHW{p: p, out: out, last: last, epoch: epoch})
			}
		}
	}
	switch {
	case req.Acks == 0 && failed:
		r.CloseConnection()
	case req.Acks == 0:
		r.NoResponse()
	case len(waiting) == 0:
		r.Respond(resp)
	default:
		s.awaitReplication(r, resp, waiting, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
}

func (s *Server) appendPartition(topic string, rp kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition) (p *replica.Partition, last int64, epoch int32) {
	p, ok := s.Replicas.Partition(topic, rp.Partition)
	if !ok {
		out.ErrorCode = s.missingPartitionCode(topic, rp.Partition)
		return nil, 0, 0
	}
	// Leadership first, as Kafka's ReplicaManager: a follower answers
	// NOT_LEADER_OR_FOLLOWER whatever the batch holds.
	if err := p.CheckLeader(-1); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return nil, 0, 0
	}
	if code, msg := s.ValidateProducedBatch(rp.Records); code != 0 {
		out.ErrorCode, out.ErrorMessage = code, &msg
		return nil, 0, 0
	}
	_, epoch = p.Leader()
	first, last, err := p.AppendAsLeader(rp.Records)
	if err != nil {
		if out.ErrorCode = replica.ErrorCode(err); out.ErrorCode != kerr.NotLeaderForPartition.Code {
			s.AppendFailed(p.TopicPartition, err) // counted and logged at the right level
		}
		return nil, 0, 0
	}
	out.BaseOffset, out.LogStartOffset = first, p.Log.StartOffset()
	return p, last, epoch
}

// missingPartitionCode answers for a partition this broker holds no replica
// of: another broker leads it, or nobody knows it.
func (s *Server) missingPartitionCode(topic string, partition int32) int16 {
	if _, ok := s.Metadata.Partitions(topic)[partition]; ok {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// awaitReplication answers once every partition's high watermark has
// passed its batch, a partition lost its leadership, the timeout expired, or
// the broker is shutting down; it gives up without answering when the
// producer's connection closes.
func (s *Server) awaitReplication(r *broker.Request, resp *kmsg.ProduceResponse, waiting []awaitingHW, timeout time.Duration) {
	wake := make(chan struct{}, 1)
	for _, w := range waiting {
		w.p.HWAdvanced.Watch(wake)
	}
	// done reports whether every partition is settled, settling the ones
	// whose leadership changed with NOT_LEADER_OR_FOLLOWER: even if this
	// broker leads again at a newer epoch, the batch may have been
	// truncated away in between.
	done := func() bool {
		all := true
		for _, w := range waiting {
			_, epoch := w.p.Leader()
			switch {
			case w.out.ErrorCode != 0:
			case w.p.Role() != replica.Leader || epoch != w.epoch:
				w.out.ErrorCode = kerr.NotLeaderForPartition.Code
			case w.p.HighWatermark() <= w.last:
				all = false
			}
		}
		return all
	}
	timedOut := func() {
		for _, w := range waiting {
			if w.out.ErrorCode == 0 && w.p.HighWatermark() <= w.last {
				w.out.ErrorCode = kerr.RequestTimedOut.Code
				msg := "the batch was not replicated within the request's timeout"
				w.out.ErrorMessage = &msg
			}
		}
	}
	timer := time.NewTimer(timeout)
	gone := r.Done()
	s.Delay(func() {
		defer timer.Stop()
		defer func() {
			for _, w := range waiting {
				w.p.HWAdvanced.Unwatch(wake)
			}
		}()
	wait:
		for !done() {
			select {
			case <-wake:
			case <-timer.C:
				timedOut()
				break wait
			case <-gone:
				return // the producer's connection closed: nobody to answer
			case <-s.ShuttingDown():
				timedOut()
				break wait
			}
		}
		r.Respond(resp)
	})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
