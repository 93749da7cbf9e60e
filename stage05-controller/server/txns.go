package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage05-controller/controller"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/txn"
)

// The transaction APIs (package txn's coordinator, stage 04's partition
// side), with the versions a Kafka 3.x broker in ZooKeeper mode serves to
// clients: AddPartitionsToTxn up to v3 (v4+ is broker to broker, KIP-890,
// which this broker does not use), EndTxn up to v3, TxnOffsetCommit up to
// v3. PRODUCER_FENCED (90) is answered as INVALID_PRODUCER_EPOCH to the
// versions older than it (InitProducerId v<4, the others v<2), as Kafka
// does.
func (s *Server) txnAPIs() []broker.API {
	return []broker.API{
		{Key: 22, MinVersion: 0, MaxVersion: 4, Handle: s.handleInitProducerID},
		{Key: 24, MinVersion: 0, MaxVersion: 3, Handle: s.handleAddPartitionsToTxn},
		{Key: 25, MinVersion: 0, MaxVersion: 3, Handle: s.handleAddOffsetsToTxn},
		{Key: 26, MinVersion: 0, MaxVersion: 3, Handle: s.handleEndTxn},
		{Key: 28, MinVersion: 0, MaxVersion: 3, Handle: func(r *broker.Request) {
			s.Groups.TxnOffsetCommit(r.Body.(*kmsg.TxnOffsetCommitRequest), func(resp *kmsg.TxnOffsetCommitResponse) { r.Respond(resp) })
		}},
		{Key: 65, MinVersion: 0, MaxVersion: 0, Handle: s.handleDescribeTransactions},
		{Key: 66, MinVersion: 0, MaxVersion: 1, Handle: s.handleListTransactions},
	}
}

// fenced is the code for PRODUCER_FENCED at a version that may not know
// it.
func fenced(code int16, version, since int16) int16 {
	if code == kerr.ProducerFenced.Code && version < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// handleInitProducerID: with a transactional id, the id's coordinator
// answers (txn.Coordinator.InitProducerID); without, stage 04's
// idempotent producer id.
func (s *Server) handleInitProducerID(r *broker.Request) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID == nil {
		s.Server.HandleInitProducerID(r)
		return
	}
	ir := txn.InitRequest{ID: *req.TransactionalID, Timeout: time.Duration(req.TransactionTimeoutMillis) * time.Millisecond,
		ProducerID: -1, Epoch: -1}
	if req.Version >= 3 {
		ir.ProducerID, ir.Epoch = req.ProducerID, req.ProducerEpoch
	}
	s.Txns.InitProducerID(ir, func(pid int64, epoch int16, code int16) {
		resp := kmsg.NewPtrInitProducerIDResponse()
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = pid, epoch, fenced(code, req.Version, 4)
		r.Respond(resp)
	})
}

// handleAddPartitionsToTxn checks the partitions against the metadata
// cache first, as Kafka does: an unknown one answers
// UNKNOWN_TOPIC_OR_PARTITION, and then every other one
// OPERATION_NOT_ATTEMPTED, with nothing added.
func (s *Server) handleAddPartitionsToTxn(r *broker.Request) {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	var parts []commitlog.TopicPartition
	unknown := map[commitlog.TopicPartition]bool{}
	for _, t := range req.Topics {
		known := s.Metadata.Partitions(t.Topic)
		for _, p := range t.Partitions {
			tp := commitlog.TopicPartition{Topic: t.Topic, Partition: p}
			if _, ok := known[p]; !ok || t.Topic == group.Topic || t.Topic == txn.Topic {
				unknown[tp] = true
			}
			parts = append(parts, tp)
		}
	}
	answer := func(code func(tp commitlog.TopicPartition) int16) {
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code(commitlog.TopicPartition{Topic: t.Topic, Partition: p})
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		r.Respond(resp)
	}
	if len(unknown) > 0 {
		answer(func(tp commitlog.TopicPartition) int16 {
			if unknown[tp] {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		})
		return
	}
	s.Txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, func(code int16) {
		code = fenced(code, req.Version, 2)
		answer(func(commitlog.TopicPartition) int16 { return code })
	})
}

// handleAddOffsetsToTxn adds the group's partition of __consumer_offsets
// to the transaction.
func (s *Server) handleAddOffsetsToTxn(r *broker.Request) {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	tp := commitlog.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor(req.Group, s.Groups.Partitions())}
	s.Txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []commitlog.TopicPartition{tp}, func(code int16) {
		resp := kmsg.NewPtrAddOffsetsToTxnResponse()
		resp.ErrorCode = fenced(code, req.Version, 2)
		r.Respond(resp)
	})
}

func (s *Server) handleEndTxn(r *broker.Request) {
	req := r.Body.(*kmsg.EndTxnRequest)
	s.Txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, func(code int16) {
		resp := kmsg.NewPtrEndTxnResponse()
		resp.ErrorCode = fenced(code, req.Version, 2)
		r.Respond(resp)
	})
}

// handleDescribeTransactions (key 65): each id's state, from this broker
// if it coordinates the id.
func (s *Server) handleDescribeTransactions(r *broker.Request) {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		m, code := s.Txns.Describe(id)
		st.ErrorCode = code
		if code == 0 {
			st.State, st.TimeoutMillis, st.StartTimestamp = m.State.String(), int32(m.Timeout.Milliseconds()), m.Start
			st.ProducerID, st.ProducerEpoch = m.ProducerID, m.Epoch
			for _, tp := range m.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					st.Topics = append(st.Topics, kmsg.DescribeTransactionsResponseTransactionStateTopic{Topic: tp.Topic})
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	r.Respond(resp)
}

// handleListTransactions (key 66): the ids this broker coordinates;
// clients ask every broker.
func (s *Server) handleListTransactions(r *broker.Request) {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := kmsg.NewPtrListTransactionsResponse()
	var states []txn.State
	for _, name := range req.StateFilters {
		st, ok := txn.ParseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, st)
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		r.Respond(resp) // only unknown states: none match
		return
	}
	openFor := time.Duration(-1)
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		openFor = time.Duration(req.DurationFilterMillis) * time.Millisecond
	}
	found, code := s.Txns.List(states, req.ProducerIDFilters, openFor)
	resp.ErrorCode = code
	for _, m := range found {
		resp.TransactionStates = append(resp.TransactionStates, kmsg.ListTransactionsResponseTransactionState{
			TransactionalID: m.ID, ProducerID: m.ProducerID, TransactionState: m.State.String()})
	}
	r.Respond(resp)
}

// findTxnCoordinator is FindCoordinator for key type 1: the leader of the
// id's partition of __transaction_state, which the first such request
// creates.
func (s *Server) findTxnCoordinator(key, listener string) (node int32, host string, port int32, code int16, msg string) {
	if key == "" {
		return -1, "", -1, kerr.InvalidRequest.Code, "the transactional id is empty"
	}
	parts := s.Metadata.Partitions(txn.Topic)
	if parts == nil {
		if err := s.createTxnTopic(); err != nil {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, err.Error()
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "creating " + txn.Topic
	}
	p, ok := parts[txn.PartitionFor(key, s.Txns.Partitions())]
	if !ok || p.Leader < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "the id's partition of " + txn.Topic + " has no leader"
	}
	host, port, found := s.Metadata.BrokerFor(p.Leader, listener)
	if !found {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("broker %d is not alive on listener %s", p.Leader, listener)
	}
	return p.Leader, host, port, 0, ""
}

// createTxnTopic creates __transaction_state with
// transaction.state.log.num.partitions partitions,
// transaction.state.log.replication.factor replicas (refused while fewer
// brokers are alive), its min.isr as min.insync.replicas, compacted and
// never electing an unclean leader, as Kafka's first FindCoordinator for
// a transactional id does.
func (s *Server) createTxnTopic() error {
	brokers, err := s.ZK.Brokers()
	if err != nil {
		return err
	}
	if len(brokers) < s.cfg.TxnReplicationFactor {
		return fmt.Errorf("%s needs %d alive brokers (transaction.state.log.replication.factor), %d are", txn.Topic,
			s.cfg.TxnReplicationFactor, len(brokers))
	}
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	assignment, err := controller.AssignReplicasRandomly(int(s.Txns.Partitions()), s.cfg.TxnReplicationFactor, ids)
	if err != nil {
		return err
	}
	var id kafkazk.TopicID
	_, _ = rand.Read(id[:])
	config := map[string]string{"cleanup.policy": "compact", "compression.type": "uncompressed",
		"min.insync.replicas": strconv.Itoa(s.cfg.TxnMinISR), "unclean.leader.election.enable": "false",
		"segment.bytes": strconv.FormatInt(s.cfg.TxnSegmentBytes, 10)}
	err = s.ZK.CreateTopic(txn.Topic, kafkazk.TopicAssignment{ID: id, Replicas: assignment}, config)
	if err != nil && !errors.Is(err, kafkazk.ErrTopicExists) {
		return err
	}
	if err == nil {
		s.logger.Info("created the transaction state topic", "topic", txn.Topic, "partitions", len(assignment),
			"replication_factor", s.cfg.TxnReplicationFactor)
	}
	return nil
}

// txnWriter appends the transaction coordinator's records through stage
// 04's produce path, with acks=all.
type txnWriter struct{ s *Server }

func (w txnWriter) Append(partition int32, batch []byte, timeout time.Duration, done func(code int16)) {
	part := broker.ProducePartition{Topic: txn.Topic,
		Request:  &kmsg.ProduceRequestTopicPartition{Partition: partition, Records: batch},
		Response: &kmsg.ProduceResponseTopicPartition{Partition: partition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}}
	w.s.AppendRecords(-1, timeout, []broker.ProducePartition{part}, func() { done(part.Response.ErrorCode) })
}

// markerSender sends WriteTxnMarkers to each partition's leader, itself
// included, over the inter-broker listener (Kafka's
// TransactionMarkerChannelManager): one request per leader per marker,
// on connections kept per broker and reused.
type markerSender struct {
	s *Server

	mu    sync.Mutex
	idle  map[string][]*protocol.Client // by address. Protected by mu.
	alive bool                          // Protected by mu.
}

// markerTimeout bounds one WriteTxnMarkers round trip: the leader waits
// up to 30 s for the ISR.
const markerTimeout = 40 * time.Second

func (ms *markerSender) Write(m record.Marker, parts []commitlog.TopicPartition, done func(map[commitlog.TopicPartition]int16)) {
	codes := map[commitlog.TopicPartition]int16{}
	byLeader := map[int32][]commitlog.TopicPartition{}
	for _, tp := range parts {
		p, ok := ms.s.Metadata.Partitions(tp.Topic)[tp.Partition]
		switch {
		case !ok && ms.topicGone(tp.Topic):
			codes[tp] = 0 // the topic was deleted: nothing to mark (Kafka drops it too)
		case !ok || p.Leader < 0:
			// Not in this broker's metadata yet (the controller sends
			// LeaderAndIsr before UpdateMetadata: a coordinator elected at
			// start-up loads before it knows the topics), or no leader:
			// sent again after a backoff.
			codes[tp] = kerr.NotLeaderForPartition.Code
		default:
			byLeader[p.Leader] = append(byLeader[p.Leader], tp)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, tps := range byLeader {
		wg.Go(func() {
			got := ms.send(leader, m, tps)
			mu.Lock()
			for tp, code := range got {
				codes[tp] = code
			}
			mu.Unlock()
		})
	}
	go func() {
		wg.Wait()
		done(codes)
	}()
}

// topicGone reports whether a topic no longer exists, from ZooKeeper
// (the metadata cache may simply not know it yet): a transaction's marker
// for a deleted topic's partitions is not waited for.
func (ms *markerSender) topicGone(topic string) bool {
	exists, err := ms.s.ZK.TopicExists(topic)
	if err != nil {
		return false // ask again later
	}
	if !exists {
		return true
	}
	deleting, err := ms.s.ZK.TopicQueuedForDeletion(topic)
	return err == nil && deleting
}

// send asks one leader for m on tps and returns each partition's code; a
// failed round trip answers NOT_LEADER_OR_FOLLOWER for all, which the
// coordinator retries.
func (ms *markerSender) send(leader int32, m record.Marker, tps []commitlog.TopicPartition) map[commitlog.TopicPartition]int16 {
	out := map[commitlog.TopicPartition]int16{}
	for _, tp := range tps {
		out[tp] = kerr.NotLeaderForPartition.Code
	}
	host, port, ok := ms.s.Metadata.BrokerFor(leader, ms.s.cfg.Broker.InterBrokerListener)
	if !ok {
		return out
	}
	addr := fmt.Sprintf("%s:%d", host, port)
	ctx, cancel := context.WithTimeout(context.Background(), markerTimeout)
	defer cancel()
	cl, err := ms.client(ctx, addr)
	if err != nil {
		ms.s.logger.Debug("cannot reach a leader for transaction markers", "broker", leader, "err", err)
		return out
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	marker := kmsg.NewWriteTxnMarkersRequestMarker()
	marker.ProducerID, marker.ProducerEpoch, marker.Committed, marker.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	for _, tp := range tps {
		if n := len(marker.Topics); n == 0 || marker.Topics[n-1].Topic != tp.Topic {
			marker.Topics = append(marker.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: tp.Topic})
		}
		t := &marker.Topics[len(marker.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{marker}
	resp, err := cl.Request(ctx, protocol.CapVersion(req, 1))
	if err != nil {
		cl.Close()
		return out
	}
	ms.release(addr, cl)
	for _, rm := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				out[commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	return out
}

// client takes an idle connection to addr, or dials one.
func (ms *markerSender) client(ctx context.Context, addr string) (*protocol.Client, error) {
	ms.mu.Lock()
	if n := len(ms.idle[addr]); n > 0 {
		cl := ms.idle[addr][n-1]
		ms.idle[addr] = ms.idle[addr][:n-1]
		ms.mu.Unlock()
		return cl, nil
	}
	ms.mu.Unlock()
	return protocol.Dial(ctx, addr, fmt.Sprintf("broker-%d-txn-markers", ms.s.ID()))
}

// release keeps a connection for the next request, unless the sender is
// closed.
func (ms *markerSender) release(addr string, cl *protocol.Client) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if !ms.alive || len(ms.idle[addr]) >= 4 {
		cl.Close()
		return
	}
	ms.idle[addr] = append(ms.idle[addr], cl)
}

// close closes the idle connections; those in use close when released.
func (ms *markerSender) close() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.alive = false
	for _, cls := range ms.idle {
		for _, cl := range cls {
			cl.Close()
		}
	}
	clear(ms.idle)
}

// txnPartitionChanged tells the transaction coordinator when this broker
// starts or stops leading a partition of __transaction_state.
func (s *Server) txnPartitionChanged(p *replica.Partition) {
	if p.Topic != txn.Topic {
		return
	}
	if p.Role() == replica.Leader {
		_, epoch := p.Leader()
		s.Txns.Elected(p.TopicPartition.Partition, epoch, p.Log)
		return
	}
	s.Txns.Resigned(p.TopicPartition.Partition)
}

// txnCompleted hears of every marker this broker wrote as a leader
// (stage 04's TxnCompleted): a marker on __consumer_offsets decides the
// offsets its producer committed in the transaction.
func (s *Server) txnCompleted(topic string, partition int32, m record.Marker) {
	if topic == group.Topic {
		s.Groups.CompleteTxn(partition, m.ProducerID, m.Commit)
	}
}
