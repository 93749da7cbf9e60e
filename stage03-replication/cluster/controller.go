package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// PartitionState is what the controller decided for a partition: the
// content of its /brokers/topics/<t>/partitions/<p>/state znode in stage 05.
type PartitionState struct {
	Replicas       []int32 // the assignment; the first is the preferred leader
	Leader         int32   // -1: none
	LeaderEpoch    int32   // bumped at every leader change
	ISR            []int32
	PartitionEpoch int32 // the znode's version, bumped at every change
}

// Controller decides leaders and tells brokers, as stage 05's controller
// will, with the same requests.
type Controller struct {
	c *Cluster

	mu         sync.Mutex
	ID         int32 // the controller's broker id, as the requests say
	Epoch      int32 // the controller epoch; brokers refuse older ones
	partitions map[commitlog.TopicPartition]*PartitionState
	clients    map[int32]*protocol.Client
	// live is the controller's view of the live brokers and their
	// endpoints: a broker stays in it until BrokerStopped, however long
	// after its death that comes (in stage 05: until its ZooKeeper session
	// expires). KIP-101's stories live in that gap.
	live map[int32]string
}

func newController(c *Cluster) *Controller {
	return &Controller{c: c, Epoch: 1, partitions: map[commitlog.TopicPartition]*PartitionState{},
		clients: map[int32]*protocol.Client{}, live: map[int32]string{}}
}

// State returns a copy of a partition's state.
func (ct *Controller) State(tp commitlog.TopicPartition) (PartitionState, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	s, ok := ct.partitions[tp]
	if !ok {
		return PartitionState{}, false
	}
	out := *s
	out.Replicas, out.ISR = slices.Clone(s.Replicas), slices.Clone(s.ISR)
	return out, true
}

// CreateTopic assigns a topic's partitions round-robin over every broker
// (partition p's replicas start at broker p mod n, as Kafka's assignment
// does without racks), makes each first replica the leader at epoch 0, and
// tells the brokers.
func (ct *Controller) CreateTopic(topic string, partitions, replicationFactor int) error {
	ids := ct.c.IDs()
	if replicationFactor > len(ids) {
		return fmt.Errorf("replication factor %d larger than available brokers %d", replicationFactor, len(ids))
	}
	ct.mu.Lock()
	var tps []commitlog.TopicPartition
	for p := range partitions {
		var replicas []int32
		for i := range replicationFactor {
			replicas = append(replicas, ids[(p+i)%len(ids)])
		}
		tp := commitlog.TopicPartition{Topic: topic, Partition: int32(p)}
		ct.partitions[tp] = &PartitionState{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)}
		tps = append(tps, tp)
	}
	ct.mu.Unlock()
	return ct.send(tps)
}

// ElectLeader makes broker leader of tp at the next leader epoch and tells
// the partition's running replicas and every broker's metadata.
func (ct *Controller) ElectLeader(tp commitlog.TopicPartition, leader int32) error {
	ct.mu.Lock()
	s, ok := ct.partitions[tp]
	if !ok {
		ct.mu.Unlock()
		return fmt.Errorf("unknown partition %s", tp)
	}
	if !slices.Contains(s.Replicas, leader) {
		ct.mu.Unlock()
		return fmt.Errorf("broker %d is not a replica of %s (%v)", leader, tp, s.Replicas)
	}
	s.Leader = leader
	s.LeaderEpoch++
	s.PartitionEpoch++
	ct.mu.Unlock()
	return ct.send([]commitlog.TopicPartition{tp})
}

// BrokerStopped elects a new leader, the first running replica in
// assignment order, for every partition the stopped broker led, and tells
// the others. A partition with no running replica is left without a leader.
func (ct *Controller) BrokerStopped(id int32) error {
	ct.mu.Lock()
	delete(ct.live, id)
	var moved []commitlog.TopicPartition
	for tp, s := range ct.partitions {
		if s.Leader != id {
			continue
		}
		s.Leader = -1
		for _, r := range s.Replicas {
			if _, ok := ct.live[r]; ok {
				s.Leader = r
				break
			}
		}
		s.LeaderEpoch++
		s.PartitionEpoch++
		moved = append(moved, tp)
	}
	ct.mu.Unlock()
	return ct.send(moved)
}

// BrokerStarted tells a (re)started broker its roles for every partition
// it holds a replica of, and every broker the new metadata. A partition
// without a leader gets this broker as its leader.
func (ct *Controller) BrokerStarted(id int32) error {
	b, ok := ct.c.Broker(id)
	if !ok {
		return fmt.Errorf("broker %d is not running", id)
	}
	ct.mu.Lock()
	ct.live[id] = b.Endpoint().HostPort()
	var tps []commitlog.TopicPartition
	for tp, s := range ct.partitions {
		if !slices.Contains(s.Replicas, id) {
			continue
		}
		if s.Leader < 0 {
			s.Leader = id
			s.LeaderEpoch++
			s.PartitionEpoch++
		}
		tps = append(tps, tp)
	}
	ct.mu.Unlock()
	return ct.send(tps)
}

// send tells the running replicas of tps their state (LeaderAndIsr) and
// every running broker the metadata of every partition (UpdateMetadata).
func (ct *Controller) send(tps []commitlog.TopicPartition) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct.mu.Lock()
	var live []int32
	for id := range ct.live {
		live = append(live, id)
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	leaders := []kmsg.LeaderAndISRRequestLiveLeader{}
	seen := map[int32]bool{}
	byBroker := map[int32]*kmsg.LeaderAndISRRequest{}
	for _, tp := range tps {
		s := ct.partitions[tp]
		if addr, ok := ct.live[s.Leader]; ok && !seen[s.Leader] {
			seen[s.Leader] = true
			host, port := splitHostPort(addr)
			leaders = append(leaders, kmsg.LeaderAndISRRequestLiveLeader{BrokerID: s.Leader, Host: host, Port: port})
		}
		for _, r := range s.Replicas {
			if _, ok := ct.live[r]; !ok {
				continue
			}
			req := byBroker[r]
			if req == nil {
				req = kmsg.NewPtrLeaderAndISRRequest()
				req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = ct.ID, ct.Epoch, -1
				byBroker[r] = req
			}
			req.TopicStates = appendLeaderAndIsr(req.TopicStates, tp, s, ct.Epoch)
		}
	}
	update := kmsg.NewPtrUpdateMetadataRequest()
	update.ControllerID, update.ControllerEpoch, update.BrokerEpoch = ct.ID, ct.Epoch, -1
	for tp, s := range ct.partitions {
		update.TopicStates = appendUpdateMetadata(update.TopicStates, tp, s, ct.Epoch, ct.live)
	}
	for _, id := range live {
		host, port := splitHostPort(ct.live[id])
		update.LiveBrokers = append(update.LiveBrokers, kmsg.UpdateMetadataRequestLiveBroker{ID: id,
			Endpoints: []kmsg.UpdateMetadataRequestLiveBrokerEndpoint{{Host: host, Port: port, ListenerName: "PLAINTEXT", SecurityProtocol: 0}}})
	}
	ct.mu.Unlock()

	// Like Kafka's controller: LeaderAndIsr to the replicas first, then
	// UpdateMetadata to every live broker. A broker the controller still
	// believes alive but that is gone cannot be told; Kafka's controller
	// keeps retrying until it learns of the death, ours moves on.
	var errs []error
	for _, id := range live {
		req, ok := byBroker[id]
		if !ok || !ct.reachable(id) {
			continue
		}
		req.LiveLeaders = leaders
		resp, err := ct.request(ctx, id, req)
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.LeaderAndISRResponse).ErrorCode)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("LeaderAndIsr to broker %d: %w", id, err))
		}
	}
	for _, id := range live {
		if !ct.reachable(id) {
			continue
		}
		resp, err := ct.request(ctx, id, update)
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.UpdateMetadataResponse).ErrorCode)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("UpdateMetadata to broker %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// reachable reports whether a broker the controller believes alive is
// really running.
func (ct *Controller) reachable(id int32) bool {
	_, ok := ct.c.Broker(id)
	return ok
}

func splitHostPort(addr string) (string, int32) {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return host, int32(p)
}

// Send sends a request to a broker on the controller's connection, for tests
// that craft their own controller requests.
func (ct *Controller) Send(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	return ct.request(ctx, id, req)
}

func (ct *Controller) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	ct.mu.Lock()
	cl := ct.clients[id]
	ct.mu.Unlock()
	if cl == nil {
		b, ok := ct.c.Broker(id)
		if !ok {
			return nil, fmt.Errorf("broker %d is not running", id)
		}
		var err error
		if cl, err = protocol.Dial(ctx, b.Addr().String(), fmt.Sprintf("controller-%d", ct.ID)); err != nil {
			return nil, err
		}
		ct.mu.Lock()
		ct.clients[id] = cl
		ct.mu.Unlock()
	}
	resp, err := cl.Request(ctx, req)
	if err != nil {
		ct.forget(id)
	}
	return resp, err
}

// forget drops the connection to a broker (stopped, or failed).
func (ct *Controller) forget(id int32) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if cl := ct.clients[id]; cl != nil {
		cl.Close()
		delete(ct.clients, id)
	}
}

func (ct *Controller) close() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for id, cl := range ct.clients {
		cl.Close()
		delete(ct.clients, id)
	}
}

func appendLeaderAndIsr(states []kmsg.LeaderAndISRRequestTopicState, tp commitlog.TopicPartition, s *PartitionState, controllerEpoch int32) []kmsg.LeaderAndISRRequestTopicState {
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = tp.Partition, controllerEpoch, s.Leader, s.LeaderEpoch
	ps.ISR, ps.ZKVersion, ps.Replicas = slices.Clone(s.ISR), s.PartitionEpoch, slices.Clone(s.Replicas)
	for i := range states {
		if states[i].Topic == tp.Topic {
			states[i].PartitionStates = append(states[i].PartitionStates, ps)
			return states
		}
	}
	return append(states, kmsg.LeaderAndISRRequestTopicState{Topic: tp.Topic, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}})
}

func appendUpdateMetadata(states []kmsg.UpdateMetadataRequestTopicState, tp commitlog.TopicPartition, s *PartitionState, controllerEpoch int32, live map[int32]string) []kmsg.UpdateMetadataRequestTopicState {
	ps := kmsg.NewUpdateMetadataRequestTopicPartition()
	ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = tp.Partition, controllerEpoch, s.Leader, s.LeaderEpoch
	ps.ISR, ps.ZKVersion, ps.Replicas = slices.Clone(s.ISR), s.PartitionEpoch, slices.Clone(s.Replicas)
	ps.OfflineReplicas = []int32{}
	for _, r := range s.Replicas {
		if _, ok := live[r]; !ok {
			ps.OfflineReplicas = append(ps.OfflineReplicas, r)
		}
	}
	for i := range states {
		if states[i].Topic == tp.Topic {
			states[i].PartitionStates = append(states[i].PartitionStates, ps)
			return states
		}
	}
	return append(states, kmsg.UpdateMetadataRequestTopicState{Topic: tp.Topic, PartitionStates: []kmsg.UpdateMetadataRequestTopicPartition{ps}})
}
