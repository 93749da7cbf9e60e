package controller

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// leaderDuringDelete is the leader UpdateMetadata carries for a partition
// of a deleted topic: brokers drop it from their metadata (Kafka's
// LeaderAndIsr.LeaderDuringDelete).
const leaderDuringDelete = -2

// batch collects what one decision tells the brokers (Kafka's
// ControllerBrokerRequestBatch): LeaderAndIsr per broker for the
// partitions it replicates, UpdateMetadata to every live broker, and
// StopReplica per broker. send sends them in that order: a broker learns
// its role before anyone's metadata sends clients its way.
type batch struct {
	leaderAndIsr map[int32]map[commitlog.TopicPartition]bool // broker -> partitions
	isNew        map[commitlog.TopicPartition]bool           // created by this decision
	metadata     map[commitlog.TopicPartition]bool           // partitions whose metadata changed
	deleted      map[commitlog.TopicPartition]bool           // partitions of deleted topics (leader -2 in UpdateMetadata)
	allMetadata  bool                                        // every partition's metadata, to every broker
	stopReplica  map[int32]map[commitlog.TopicPartition]bool // broker -> partitions, with delete
	stopDelete   map[int32]bool
	stopCallback map[int32]func(*kmsg.StopReplicaResponse)
}

func newBatch() *batch {
	return &batch{leaderAndIsr: map[int32]map[commitlog.TopicPartition]bool{}, isNew: map[commitlog.TopicPartition]bool{},
		metadata: map[commitlog.TopicPartition]bool{}, deleted: map[commitlog.TopicPartition]bool{},
		stopReplica: map[int32]map[commitlog.TopicPartition]bool{}, stopDelete: map[int32]bool{},
		stopCallback: map[int32]func(*kmsg.StopReplicaResponse){}}
}

// addLeaderAndIsr tells the live replicas of tp (those in brokers, or all
// when brokers is nil) its state, and every broker its metadata. A broker
// in a controlled shutdown is not told: it would become a follower again
// and its leader would put it back in the ISR as it exits. A partition
// without a state (never elected: none of its replicas was live) has
// nothing to tell.
func (b *batch) addLeaderAndIsr(cs *clusterState, tp commitlog.TopicPartition, brokers []int32) {
	if _, ok := cs.states[tp]; !ok {
		return
	}
	if brokers == nil {
		brokers = cs.replicas(tp)
	}
	for _, r := range brokers {
		if !cs.isLive(r) {
			continue // dead, or shutting down: it stops its replicas itself (StopReplica)
		}
		if b.leaderAndIsr[r] == nil {
			b.leaderAndIsr[r] = map[commitlog.TopicPartition]bool{}
		}
		b.leaderAndIsr[r][tp] = true
	}
	b.metadata[tp] = true
}

// addStopReplica stops broker's replica of tp, deleting its log if del.
func (b *batch) addStopReplica(broker int32, tp commitlog.TopicPartition, del bool) {
	if b.stopReplica[broker] == nil {
		b.stopReplica[broker] = map[commitlog.TopicPartition]bool{}
	}
	b.stopReplica[broker][tp] = true
	b.stopDelete[broker] = b.stopDelete[broker] || del
}

// chain runs f, then g: two StopReplica callbacks for one broker's
// request.
func chain(f, g func(*kmsg.StopReplicaResponse)) func(*kmsg.StopReplicaResponse) {
	if f == nil {
		return g
	}
	return func(r *kmsg.StopReplicaResponse) { f(r); g(r) }
}

// empty reports whether there is nothing to send.
func (b *batch) empty() bool {
	return len(b.leaderAndIsr) == 0 && len(b.metadata) == 0 && len(b.deleted) == 0 && !b.allMetadata && len(b.stopReplica) == 0
}

// send queues the batch's requests on the brokers' channels.
func (c *Controller) send(b *batch) {
	cs := c.state
	if cs == nil || b.empty() {
		return
	}
	var leaders []kmsg.LeaderAndISRRequestLiveLeader
	for _, id := range cs.liveIDs() {
		e, _ := c.endpoint(cs.live[id])
		leaders = append(leaders, kmsg.LeaderAndISRRequestLiveLeader{BrokerID: id, Host: e.Host, Port: int32(e.Port)})
	}
	for _, id := range slices.Sorted(maps.Keys(b.leaderAndIsr)) {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.brokerID, cs.epoch.Epoch, cs.live[id].Epoch
		req.LiveLeaders = leaders
		tps := slices.SortedFunc(maps.Keys(b.leaderAndIsr[id]), commitlog.TopicPartition.Compare)
		for _, tp := range tps {
			s := cs.states[tp]
			ps := kmsg.NewLeaderAndISRRequestTopicPartition()
			ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = tp.Partition, s.ControllerEpoch, s.Leader, s.LeaderEpoch
			ps.ISR, ps.ZKVersion, ps.Replicas, ps.IsNew = slices.Clone(s.ISR), s.ZkVersion, slices.Clone(cs.replicas(tp)), b.isNew[tp]
			req.TopicStates = appendTopicState(req.TopicStates, tp.Topic, cs.topics[tp.Topic].ID, ps)
		}
		broker := id
		c.channels.send(id, req, func(r kmsg.Response) {
			if code := r.(*kmsg.LeaderAndISRResponse).ErrorCode; code != 0 {
				c.logger.Warn("LeaderAndIsr refused", "broker", broker, "err", kerr.ErrorForCode(code))
			}
		})
	}

	var parts []commitlog.TopicPartition
	if b.allMetadata {
		parts = cs.partitions()
	} else {
		for tp := range b.metadata {
			parts = append(parts, tp)
		}
		slices.SortFunc(parts, commitlog.TopicPartition.Compare)
	}
	if len(parts) > 0 || len(b.deleted) > 0 || b.allMetadata {
		c.sendUpdateMetadata(parts, slices.SortedFunc(maps.Keys(b.deleted), commitlog.TopicPartition.Compare))
	}

	for _, id := range slices.Sorted(maps.Keys(b.stopReplica)) {
		req := kmsg.NewPtrStopReplicaRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch, req.DeletePartitions = c.brokerID, cs.epoch.Epoch, cs.live[id].Epoch, b.stopDelete[id]
		byTopic := map[string]int{}
		for _, tp := range slices.SortedFunc(maps.Keys(b.stopReplica[id]), commitlog.TopicPartition.Compare) {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(req.Topics)
				byTopic[tp.Topic] = i
				req.Topics = append(req.Topics, kmsg.StopReplicaRequestTopic{Topic: tp.Topic})
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
		cb := b.stopCallback[id]
		c.channels.send(id, req, func(r kmsg.Response) {
			if cb != nil {
				cb(r.(*kmsg.StopReplicaResponse))
			}
		})
	}
}

// sendUpdateMetadata tells every live broker the live brokers and the
// states of parts (deleted: those to drop). A partition of a topic whose
// deletion has started is always sent as one to drop (Kafka's
// LeaderDuringDelete), whatever asked for it: a broker that starts during
// a deletion must not learn the topic again.
func (c *Controller) sendUpdateMetadata(parts, deleted []commitlog.TopicPartition) {
	cs := c.state
	parts = slices.DeleteFunc(slices.Clone(parts), func(tp commitlog.TopicPartition) bool {
		if cs.deletionStarted[tp.Topic] {
			deleted = append(deleted, tp)
			return true
		}
		return false
	})
	deleted = dedupe(slices.Clone(deleted))
	var brokers []kmsg.UpdateMetadataRequestLiveBroker
	for _, id := range cs.liveIDs() {
		b := cs.live[id]
		lb := kmsg.UpdateMetadataRequestLiveBroker{ID: id, Rack: nil}
		if b.Rack != "" {
			lb.Rack = &b.Rack
		}
		for _, e := range b.Endpoints {
			lb.Endpoints = append(lb.Endpoints, kmsg.UpdateMetadataRequestLiveBrokerEndpoint{
				Host: e.Host, Port: int32(e.Port), ListenerName: e.Listener, SecurityProtocol: securityProtocolID(e.SecurityProtocol)})
		}
		brokers = append(brokers, lb)
	}
	var topics []kmsg.UpdateMetadataRequestTopicState
	for _, tp := range parts {
		s, ok := cs.states[tp]
		if !ok {
			continue
		}
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = tp.Partition, s.ControllerEpoch, s.Leader, s.LeaderEpoch
		ps.ISR, ps.ZKVersion, ps.Replicas = slices.Clone(s.ISR), s.ZkVersion, slices.Clone(cs.replicas(tp))
		ps.OfflineReplicas = []int32{}
		for _, r := range ps.Replicas {
			if _, ok := cs.live[r]; !ok {
				ps.OfflineReplicas = append(ps.OfflineReplicas, r)
			}
		}
		topics = appendMetadataState(topics, tp.Topic, cs.topics[tp.Topic].ID, ps)
	}
	for _, tp := range deleted {
		ps := kmsg.NewUpdateMetadataRequestTopicPartition()
		ps.Partition, ps.ControllerEpoch, ps.Leader = tp.Partition, cs.epoch.Epoch, leaderDuringDelete
		topics = appendMetadataState(topics, tp.Topic, kafkazk.TopicID{}, ps)
	}
	for _, id := range cs.liveIDs() {
		req := kmsg.NewPtrUpdateMetadataRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = c.brokerID, cs.epoch.Epoch, cs.live[id].Epoch
		req.LiveBrokers, req.TopicStates = brokers, topics
		broker := id
		c.channels.send(id, req, func(r kmsg.Response) {
			if code := r.(*kmsg.UpdateMetadataResponse).ErrorCode; code != 0 {
				c.logger.Warn("UpdateMetadata refused", "broker", broker, "err", kerr.ErrorForCode(code))
			}
		})
	}
}

// securityProtocolID is a security protocol's id on the wire.
func securityProtocolID(name string) int16 {
	switch name {
	case "SSL":
		return 1
	case "SASL_PLAINTEXT":
		return 2
	case "SASL_SSL":
		return 3
	}
	return 0 // PLAINTEXT
}

// appendTopicState adds a partition's state under its topic, with the
// topic's id (LeaderAndIsr v5+, KIP-516: brokers write it beside their
// replicas and refuse a replica held for another id).
func appendTopicState(states []kmsg.LeaderAndISRRequestTopicState, topic string, id kafkazk.TopicID, ps kmsg.LeaderAndISRRequestTopicPartition) []kmsg.LeaderAndISRRequestTopicState {
	if n := len(states); n > 0 && states[n-1].Topic == topic {
		states[n-1].PartitionStates = append(states[n-1].PartitionStates, ps)
		return states
	}
	return append(states, kmsg.LeaderAndISRRequestTopicState{Topic: topic, TopicID: id, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}})
}

// appendMetadataState adds a partition's state under its topic, with the
// topic's id (UpdateMetadata v7+: every broker's metadata cache names
// topics by it; the zero id for a deleted topic's partitions).
func appendMetadataState(states []kmsg.UpdateMetadataRequestTopicState, topic string, id kafkazk.TopicID, ps kmsg.UpdateMetadataRequestTopicPartition) []kmsg.UpdateMetadataRequestTopicState {
	if n := len(states); n > 0 && states[n-1].Topic == topic {
		states[n-1].PartitionStates = append(states[n-1].PartitionStates, ps)
		return states
	}
	return append(states, kmsg.UpdateMetadataRequestTopicState{Topic: topic, TopicID: id, PartitionStates: []kmsg.UpdateMetadataRequestTopicPartition{ps}})
}
