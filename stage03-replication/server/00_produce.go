package server

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
)

// Produce (key 0), v3-v9: stage 02's handler (the acks check, the
// response, acks=0) over a replicating Appender. Only a partition's leader
// appends (others answer NOT_LEADER_OR_FOLLOWER, and the client refreshes
// its metadata and finds the leader), batches are stamped with the leader
// epoch, and acks=all (-1) is answered only when the high watermark has
// passed the batch: every replica that counts has it (§1.4). That wait is
// bounded by the request's timeout (REQUEST_TIMED_OUT after it); stage 04
// makes it a purgatory over the ISR.
func (s *Server) produceAPI() broker.API { return broker.ProduceAPI(NewReplicaAppender(s)) }

// ReplicaAppender is the replicating broker.Appender: leaders append, and
// acks=all waits for the high watermark. Stage 04 reuses its
// AppendPartition and waits in a purgatory instead.
type ReplicaAppender struct{ s *Server }

// NewReplicaAppender is the appender to s's replicas.
func NewReplicaAppender(s *Server) ReplicaAppender { return ReplicaAppender{s} }

// AppendRecords appends each batch as its partition's leader. With acks 0
// and 1 it is done at once; with acks=all it waits, off the handler pool,
// for the high watermark (awaitReplication).
func (a ReplicaAppender) AppendRecords(r *broker.Request, acks int16, timeout time.Duration, parts []broker.ProducePartition, done func()) {
	var waiting []awaitingHW
	for _, part := range parts {
		p, last, epoch := a.AppendPartition(part, 0)
		if p != nil && acks == -1 {
			waiting = append(waiting, awaitingHW{p: p, out: part.Response, last: last, epoch: epoch})
		}
	}
	if len(waiting) == 0 {
		done()
		return
	}
	a.s.awaitReplication(r, waiting, timeout, done)
}

// awaitingHW is a partition of an acks=all produce waiting for replication.
type awaitingHW struct {
	p     *replica.Partition
	out   *kmsg.ProduceResponseTopicPartition
	last  int64 // the last offset appended: done when the HW passes it
	epoch int32 // the leader epoch it was appended under
}

// AppendPartition appends one partition's batch as its leader and fills
// its response entry. It returns what a wait for replication needs: the
// partition, the last offset appended and the leader epoch it was appended
// under; p is nil if nothing was appended (the entry's error code says
// why). minISR > 0 refuses the batch while the ISR is smaller
// (NOT_ENOUGH_REPLICAS, stage 04's min.insync.replicas); this stage passes
// 0.
func (a ReplicaAppender) AppendPartition(part broker.ProducePartition, minISR int) (p *replica.Partition, last int64, epoch int32) {
	s, topic, rp, out := a.s, part.Topic, part.Request, part.Response
	p, ok := s.Replicas.Partition(topic, rp.Partition)
	if !ok {
		out.ErrorCode = s.MissingPartitionCode(topic, rp.Partition)
		return nil, 0, 0
	}
	// Leadership first, as Kafka's ReplicaManager: a follower answers
	// NOT_LEADER_OR_FOLLOWER whatever the batch holds.
	if err := p.CheckLeader(-1); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return nil, 0, 0
	}
	if code, msg := s.ValidateProducedBatch(rp.Records, p.Log.Config().CleanupPolicy.Compact()); code != 0 {
		out.ErrorCode, out.ErrorMessage = code, &msg
		return nil, 0, 0
	}
	first, last, err := p.AppendAsLeaderMinISR(rp.Records, minISR)
	if err != nil {
		// A lost leadership and too few in-sync replicas are answers, not
		// failures: the others are counted and logged at the right level.
		if out.ErrorCode = replica.ErrorCode(err); out.ErrorCode != kerr.NotLeaderForPartition.Code && out.ErrorCode != kerr.NotEnoughReplicas.Code {
			s.AppendFailed(p.TopicPartition, err)
		}
		return nil, 0, 0
	}
	out.BaseOffset, out.LogStartOffset = first, p.Log.StartOffset()
	// The epoch the batch was stamped with, as the epoch cache recorded it
	// under the append's lock (reading the partition's epoch before the
	// append could race a LeaderAndIsr).
	return p, last, p.Epochs.EpochForOffset(last)
}

// MissingPartitionCode answers for a partition this broker holds no replica
// of: another broker leads it, or nobody knows it.
func (s *Server) MissingPartitionCode(topic string, partition int32) int16 {
	if _, ok := s.Metadata.Partitions(topic)[partition]; ok {
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

// awaitReplication calls done once every partition's high watermark has
// passed its batch, a partition lost its leadership, the timeout expired,
// the broker is shutting down, or the producer's connection closed.
func (s *Server) awaitReplication(r *broker.Request, waiting []awaitingHW, timeout time.Duration, done func()) {
	wake := make(chan struct{}, 1)
	for _, w := range waiting {
		w.p.HWAdvanced.Watch(wake)
	}
	// settled reports whether every partition is settled, settling the
	// ones whose batch this broker no longer leads with
	// NOT_LEADER_OR_FOLLOWER (Partition.StillLeadsBatch).
	settled := func() bool {
		all := true
		for _, w := range waiting {
			switch {
			case w.out.ErrorCode != 0:
			case !w.p.StillLeadsBatch(w.last, w.epoch):
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
		for !settled() {
			select {
			case <-wake:
			case <-timer.C:
				timedOut()
				break wait
			case <-gone:
				// The producer's connection closed: nobody to answer.
				// done is still called, as the Appender's contract asks
				// (one way out for every wait); the network layer drops
				// an answer to a closed connection.
				break wait
			case <-s.ShuttingDown():
				timedOut()
				break wait
			}
		}
		done()
	})
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
