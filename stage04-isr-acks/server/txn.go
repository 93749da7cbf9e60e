package server

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage03-replication/server"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// Transactions, the partition's side (KIP-98). A transactional producer's
// batches open a transaction in each partition they reach (the producer
// state, package producer); the transaction coordinator (stage 05) closes
// it with a marker that it asks each partition's leader to write
// (WriteTxnMarkers, below). Readers choose:
//
//	read_uncommitted  up to the high watermark, every record
//	read_committed    up to the last stable offset (LSO), told which
//	                  transactions were aborted among what they read
//	                  (the .txnindex, commitlog.AbortedTxn), whose records
//	                  they drop
//
// Fetch and ListOffsets read_committed reach this stage through stage 02's
// CommittedFetchSource and CommittedOffsetSource seams.

// LastStableOffset is the partition's LSO as its leader computes it: the
// high watermark, or the first offset of the oldest transaction not
// decided and replicated if that is lower. It builds the producer state
// from the log if nothing has used it yet.
func (s *Server) LastStableOffset(p *replica.Partition) (int64, error) {
	st, _, err := s.producers.get(p)
	if err != nil {
		return 0, err
	}
	return st.LastStableOffset(p.HighWatermark()), nil
}

// cleanLimit is where the log cleaner stops in a partition (stage 03's
// Options.CleanLimit): its last stable offset, below the high watermark
// hw. A record of a transaction not yet decided must not shadow an older
// value of its key: the transaction may still abort, and the cleaner would
// have removed the value that stays. A partition this broker does not
// hold, or whose producer state cannot be built, is not cleaned.
func (s *Server) cleanLimit(tp commitlog.TopicPartition, l *commitlog.Log, hw int64) int64 {
	if !s.built.Load() { // the logs' cleaner may start before New has finished
		return l.StartOffset()
	}
	p, ok := s.Replicas.Partition(tp.Topic, tp.Partition)
	if !ok || p.Log != l {
		return l.StartOffset()
	}
	st, _, err := s.producers.get(p)
	if err != nil {
		return l.StartOffset()
	}
	return min(hw, st.LastStableOffset(hw))
}

// txnFetchSource is stage 03's replica-aware fetch source with
// read_committed reads (broker.CommittedFetchSource).
type txnFetchSource struct {
	server.ReplicaSource
	s *Server
}

// ReadCommitted reads a partition up to its LSO and lists the aborted
// transactions that overlap what may be read (Kafka's
// UnifiedLog.read with FetchTxnCommitted and addAbortedTransactions). The
// list is a superset of what the records returned need: every aborted
// transaction from the fetch offset to the LSO; a consumer uses those
// whose first offset its batches reach.
func (src txnFetchSource) ReadCommitted(topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	s := src.s
	p, ok := s.Replicas.Partition(topic, fp.Partition)
	if !ok {
		out.ErrorCode = s.MissingPartitionCode(topic, fp.Partition)
		return
	}
	if err := p.CheckLeader(fp.CurrentLeaderEpoch); err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return
	}
	lso, err := s.LastStableOffset(p)
	if err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return
	}
	out.ErrorCode = broker.ReadPartition(p.Log, fp.FetchOffset, int64(fp.PartitionMaxBytes), remaining, first, lso, p.HighWatermark(), out)
	out.LastStableOffset = lso
	if out.ErrorCode != 0 {
		return
	}
	out.AbortedTransactions = []protocol.AbortedTxn{} // an empty list, not null: read_committed
	if out.Records.Len == 0 && len(out.Records.Bytes) == 0 {
		return
	}
	aborted, err := p.Log.AbortedTxns(fp.FetchOffset, lso)
	if err != nil {
		out.ErrorCode = replica.ErrorCode(err)
		return
	}
	for _, a := range aborted {
		out.AbortedTransactions = append(out.AbortedTransactions, protocol.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
	}
}

// txnOffsets answers ListOffsets read_committed with the LSO as the
// latest offset (broker.CommittedOffsetSource), and others as stage 03.
type txnOffsets struct{ s *Server }

func (o txnOffsets) ListOffset(replicaID int32, topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	o.s.ListOffsetUpTo(replicaID, topic, rp, out, (*replica.Partition).HighWatermark)
}

func (o txnOffsets) ListCommittedOffset(topic string, rp *kmsg.ListOffsetsRequestTopicPartition, out *kmsg.ListOffsetsResponseTopicPartition) {
	var failed error
	o.s.ListOffsetUpTo(-1, topic, rp, out, func(p *replica.Partition) int64 {
		lso, err := o.s.LastStableOffset(p)
		if err != nil {
			failed = err
			return p.Log.StartOffset()
		}
		return lso
	})
	if failed != nil {
		out.ErrorCode, out.Offset, out.Timestamp, out.LeaderEpoch = replica.ErrorCode(failed), -1, -1, -1
	}
}

// WriteTxnMarkers (key 27), v0-v1 (v1 flexible): a transaction
// coordinator asks this broker, as the leader of each partition named, to
// write a transaction's marker (Kafka's handleWriteTxnMarkersRequest). Each
// marker is appended as a control batch stamped with this leader's epoch
// and clock, through the same producer-state lock as a produce, after two
// checks: an older producer epoch than the partition has seen is
// INVALID_PRODUCER_EPOCH, an older coordinator epoch
// TRANSACTION_COORDINATOR_FENCED. Then, as acks=all: the answer waits for
// the high watermark to pass every marker (a marker the ISR has not copied
// could be lost with this leader, and the coordinator must send it again),
// under min.insync.replicas. Once a partition's marker is acknowledged,
// Options.TxnCompleted hears of it: stage 05's group coordinator makes a
// transaction's offset commits visible when its marker reaches
// __consumer_offsets.
func (s *Server) writeTxnMarkersAPI() broker.API {
	return broker.API{Key: 27, MinVersion: 0, MaxVersion: 1, Handle: s.handleWriteTxnMarkers}
}

// markerTimeout bounds the wait for a marker's replication. Kafka waits
// for the coordinator's request.timeout.ms (30 s); the coordinator retries
// what fails.
const markerTimeout = 30 * time.Second

func (s *Server) handleWriteTxnMarkers(r *broker.Request) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	op := &delayedProduce{}
	type written struct {
		out    *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		ack    *kmsg.ProduceResponseTopicPartition
		topic  string
		marker record.Marker
	}
	var all []written
	var keys []commitlog.TopicPartition
	for _, m := range req.Markers {
		rm := kmsg.WriteTxnMarkersResponseMarker{ProducerID: m.ProducerID}
		marker := record.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for _, t := range m.Topics {
			rt := kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: t.Topic}
			for _, partition := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: partition})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
		last := &resp.Markers[len(resp.Markers)-1]
		for ti := range last.Topics {
			rt := &last.Topics[ti]
			minISR := s.topics.get(rt.Topic).MinInsyncReplicas
			for pi := range rt.Partitions {
				out := &rt.Partitions[pi]
				ack := &kmsg.ProduceResponseTopicPartition{Partition: out.Partition}
				p, offset, epoch, code := s.appendMarker(rt.Topic, out.Partition, marker, minISR)
				out.ErrorCode = code
				if p == nil {
					continue
				}
				all = append(all, written{out: out, ack: ack, topic: rt.Topic, marker: marker})
				op.parts = append(op.parts, pendingPartition{p: p, out: ack, required: offset + 1, epoch: epoch, minISR: minISR})
				keys = append(keys, p.TopicPartition)
			}
		}
	}
	op.done = func() {
		for _, w := range all {
			w.out.ErrorCode = w.ack.ErrorCode
			if w.ack.ErrorCode == 0 && s.txnCompleted != nil {
				s.txnCompleted(w.topic, w.out.Partition, w.marker)
			}
		}
		r.Respond(resp)
	}
	if len(op.parts) == 0 {
		op.done()
		return
	}
	s.Produces.TryCompleteElseWatch(op, markerTimeout, keys...)
}

// appendMarker writes one marker to a partition this broker leads and
// records it in the producer state; p is nil when nothing was written
// (code says why).
func (s *Server) appendMarker(topic string, partition int32, m record.Marker, minISR int) (p *replica.Partition, offset int64, epoch int32, code int16) {
	p, ok := s.Replicas.Partition(topic, partition)
	if !ok {
		return nil, 0, 0, s.MissingPartitionCode(topic, partition)
	}
	pp, _, err := s.producers.entry(p)
	if err != nil {
		if errors.Is(err, replica.ErrNotReplica) {
			return nil, 0, 0, replica.ErrorCode(err)
		}
		s.Logger().Error("producer state", "partition", p.TopicPartition, "err", err)
		return nil, 0, 0, kerr.KafkaStorageError.Code
	}
	st := pp.st
	st.Serialize(func() {
		if err := p.CheckLeader(-1); err != nil {
			code = replica.ErrorCode(err)
			return
		}
		switch err := st.CheckMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch); {
		case errors.Is(err, producer.ErrInvalidProducerEpoch):
			code = kerr.InvalidProducerEpoch.Code
			return
		case errors.Is(err, producer.ErrCoordinatorFenced):
			code = kerr.TransactionCoordinatorFenced.Code
			return
		}
		now := time.Now().UnixMilli()
		batch := record.AppendMarker(nil, m, now)
		first, _, err := p.AppendAsLeaderMinISR(batch, minISR)
		if err != nil {
			if code = replica.ErrorCode(err); code != kerr.NotLeaderForPartition.Code && code != kerr.NotEnoughReplicas.Code {
				s.AppendFailed(p.TopicPartition, err)
			}
			return
		}
		completeTxn(st, p.Log, m, first, now, s.Logger())
		// Forget the transactions whose markers the high watermark passed:
		// on a leader no read_committed fetch may come to do it.
		st.LastStableOffset(p.HighWatermark())
		s.producers.recorded(pp)
		offset, epoch = first, p.Epochs.EpochForOffset(first)
	})
	if code != 0 {
		return nil, 0, 0, code
	}
	return p, offset, epoch, 0
}
