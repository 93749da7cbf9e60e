package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// PartitionState is what the controller decided for a partition: the
// content of its /brokers/topics/<t>/partitions/<p>/state znode in stage 05
// (the assignment lives in /brokers/topics/<t>), kept in a StateStore.
type PartitionState struct {
	Replicas       []int32 // the assignment; the first is the preferred leader
	Leader         int32   // -1: none
	LeaderEpoch    int32   // bumped at every leader change
	ISR            []int32
	PartitionEpoch int32 // the znode's version, bumped at every change
}

// maxAttempts bounds how often the controller loads and decides again on
// one partition because someone else wrote its state between its Load and
// its Update. Kafka's controller retries until it succeeds; a test that
// makes every write conflict wants an error instead of a hang.
const maxAttempts = 10

// Controller decides leaders and tells brokers, as stage 05's controller
// will, with the same requests.
//
// Like Kafka's controller, which handles one event at a time on its
// controller-event-thread, it runs one method (CreateTopic, ElectLeader,
// BrokerStopped, BrokerStarted, UpdateMetadata) at a time: each holds
// events throughout, and calls the StateStore and the election policy with
// events held and mu not held.
type Controller struct {
	c      *Cluster
	states StateStore // where partition states live (Options.States)
	// elect picks a leader after a failure or a start (Options.Elect).
	elect func(tp commitlog.TopicPartition, s PartitionState, live func(id int32) bool) (int32, []int32)

	events sync.Mutex // one controller method at a time; taken before mu

	mu    sync.Mutex
	ID    int32 // the controller's broker id, as the requests say
	Epoch int32 // the controller epoch; brokers refuse older ones
	// partitions is the controller's copy of every partition's state: the
	// assignment, and the rest as it last loaded or wrote it (Kafka's
	// ControllerContext). Protected by mu.
	partitions map[commitlog.TopicPartition]*PartitionState
	clients    map[int32]*protocol.Client // Protected by mu.
	// live is the controller's view of the live brokers and their
	// endpoints: a broker stays in it until BrokerStopped, however long
	// after its death that comes (in stage 05: until its ZooKeeper session
	// expires). KIP-101's stories live in that gap. Protected by mu.
	live map[int32]string
	// topicIDs is each topic's id (KIP-516), given at creation and sent
	// in LeaderAndIsr and UpdateMetadata, as stage 05's controller sends
	// the id it wrote to ZooKeeper. Protected by mu.
	topicIDs map[string]store.TopicID
}

func newController(c *Cluster) *Controller {
	ct := &Controller{c: c, states: c.opts.States, elect: c.opts.Elect, Epoch: 1,
		partitions: map[commitlog.TopicPartition]*PartitionState{},
		clients:    map[int32]*protocol.Client{}, live: map[int32]string{}, topicIDs: map[string]store.TopicID{}}
	if ct.states == nil {
		ct.states = NewMemoryStateStore()
	}
	if ct.elect == nil {
		ct.elect = FirstLiveReplica
	}
	return ct
}

// State returns a copy of a partition's state as the controller last
// loaded or wrote it. An ISR a leader wrote since shows after the
// controller's next decision about the partition or UpdateMetadata.
func (ct *Controller) State(tp commitlog.TopicPartition) (PartitionState, bool) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	s, ok := ct.partitions[tp]
	if !ok {
		return PartitionState{}, false
	}
	return cloneState(*s), true
}

// CreateTopic assigns a topic's partitions round-robin over every broker
// (partition p's replicas start at broker p mod n, as Kafka's assignment
// does without racks), makes each first replica the leader at epoch 0,
// records the states in the StateStore, and tells the brokers.
func (ct *Controller) CreateTopic(topic string, partitions, replicationFactor int) error {
	ct.events.Lock()
	defer ct.events.Unlock()
	ids := ct.c.IDs()
	if replicationFactor > len(ids) {
		return fmt.Errorf("replication factor %d larger than available brokers %d", replicationFactor, len(ids))
	}
	ct.mu.Lock()
	if _, ok := ct.topicIDs[topic]; !ok {
		ct.topicIDs[topic] = store.NewTopicID()
	}
	ct.mu.Unlock()
	var tps []commitlog.TopicPartition
	var errs []error
	for p := range partitions {
		var replicas []int32
		for i := range replicationFactor {
			replicas = append(replicas, ids[(p+i)%len(ids)])
		}
		tp := commitlog.TopicPartition{Topic: topic, Partition: int32(p)}
		s := PartitionState{Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)}
		epoch, err := ct.states.Create(tp, s, ct.Epoch)
		if err != nil {
			errs = append(errs, fmt.Errorf("create state of %s: %w", tp, err))
			break
		}
		s.PartitionEpoch = epoch
		ct.remember(tp, s)
		tps = append(tps, tp)
	}
	return errors.Join(append(errs, ct.send(tps))...)
}

// ElectLeader makes broker leader of tp at the next leader epoch, an
// explicit choice that bypasses the election policy, and tells the
// partition's running replicas and every broker's metadata.
func (ct *Controller) ElectLeader(tp commitlog.TopicPartition, leader int32) error {
	ct.events.Lock()
	defer ct.events.Unlock()
	_, err := ct.decide(tp, func(s *PartitionState) (bool, error) {
		if !slices.Contains(s.Replicas, leader) {
			return false, fmt.Errorf("broker %d is not a replica of %s (%v)", leader, tp, s.Replicas)
		}
		s.Leader = leader
		s.LeaderEpoch++
		return true, nil
	})
	if err != nil {
		return err
	}
	return ct.send([]commitlog.TopicPartition{tp})
}

// MoveLeader moves tp's leadership to another live member of its ISR, the
// one pick chooses among them, at the next leader epoch: a clean move, as
// a preferred leader election or a reassignment makes. The ISR is read in
// the same decision that writes the new leader, so a leader that shrank
// the ISR meanwhile cannot have its choice overtaken: nothing acknowledged
// is lost. It returns the new leader, or -1 if the ISR holds no other live
// replica (nothing is written then).
func (ct *Controller) MoveLeader(tp commitlog.TopicPartition, pick func(candidates []int32) int32) (int32, error) {
	ct.events.Lock()
	defer ct.events.Unlock()
	ct.mu.Lock()
	live := ct.liveFuncLocked()
	ct.mu.Unlock()
	leader := int32(-1)
	moved, err := ct.decide(tp, func(s *PartitionState) (bool, error) {
		var candidates []int32
		for _, id := range s.ISR {
			if id != s.Leader && live(id) {
				candidates = append(candidates, id)
			}
		}
		if len(candidates) == 0 {
			leader = -1
			return false, nil
		}
		leader = pick(candidates)
		if !slices.Contains(candidates, leader) {
			return false, fmt.Errorf("broker %d is not another live member of %s's ISR %v", leader, tp, s.ISR)
		}
		s.Leader = leader
		s.LeaderEpoch++
		return true, nil
	})
	if err != nil || !moved {
		return -1, err
	}
	return leader, ct.send([]commitlog.TopicPartition{tp})
}

// BrokerStopped elects, with the election policy (Options.Elect), a new
// leader for every partition the stopped broker led, and tells the others.
// Where the policy finds none (by default: no replica is running), the
// partition goes offline: leader -1, at the next leader epoch.
func (ct *Controller) BrokerStopped(id int32) error {
	ct.events.Lock()
	defer ct.events.Unlock()
	ct.mu.Lock()
	delete(ct.live, id)
	live := ct.liveFuncLocked()
	tps := ct.partitionsLocked()
	ct.mu.Unlock()
	var moved []commitlog.TopicPartition
	var errs []error
	for _, tp := range tps {
		changed, err := ct.decide(tp, func(s *PartitionState) (bool, error) {
			if s.Leader != id {
				return false, nil
			}
			leader, isr, err := ct.electLeader(tp, *s, live)
			if err != nil {
				return false, err
			}
			s.Leader, s.ISR = leader, isr
			s.LeaderEpoch++
			return true, nil
		})
		if err != nil {
			errs = append(errs, err)
		}
		if changed {
			moved = append(moved, tp)
		}
	}
	return errors.Join(append(errs, ct.send(moved))...)
}

// BrokerStarted tells a (re)started broker its roles for every partition
// it holds a replica of, and every broker the new metadata. A partition
// without a leader gets one from the election policy (by default the first
// live replica, which is this broker: the partition went offline when none
// was running); if the policy finds none it stays offline.
func (ct *Controller) BrokerStarted(id int32) error {
	b, ok := ct.c.Broker(id)
	if !ok {
		return fmt.Errorf("broker %d is not running", id)
	}
	ct.events.Lock()
	defer ct.events.Unlock()
	ct.mu.Lock()
	ct.live[id] = b.Endpoint().HostPort()
	live := ct.liveFuncLocked()
	var tps []commitlog.TopicPartition
	for _, tp := range ct.partitionsLocked() {
		if slices.Contains(ct.partitions[tp].Replicas, id) {
			tps = append(tps, tp)
		}
	}
	ct.mu.Unlock()
	var errs []error
	for _, tp := range tps {
		// Loaded even when nothing changes: the broker learns the ISR the
		// leader last wrote, at its partition epoch.
		_, err := ct.decide(tp, func(s *PartitionState) (bool, error) {
			if s.Leader >= 0 {
				return false, nil
			}
			leader, isr, err := ct.electLeader(tp, *s, live)
			if err != nil || leader < 0 {
				return false, err
			}
			s.Leader, s.ISR = leader, isr
			s.LeaderEpoch++
			return true, nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, ct.send(tps))...)
}

// UpdateMetadata loads tps' states from the StateStore and tells every live
// broker the metadata of every partition (UpdateMetadata only: no role
// changes). Kafka's controller does this when it reads an ISR change
// notification (/isr_change_notification): leaders changed ISRs, and
// clients read ISRs in Metadata answers, which any broker gives from its
// metadata cache.
func (ct *Controller) UpdateMetadata(tps ...commitlog.TopicPartition) error {
	ct.events.Lock()
	defer ct.events.Unlock()
	var errs []error
	for _, tp := range tps {
		if _, err := ct.load(tp); err != nil {
			errs = append(errs, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(append(errs, ct.sendUpdateMetadata(ctx))...)
}

// decide makes one decision about tp as Kafka's controller does against
// the state znode: it reads the state (so it decides on the ISR the leader
// last wrote), lets change decide, and writes the result with the zkVersion
// it read as the expected version. On BADVERSION (a leader wrote the ISR
// meanwhile) it reads and decides again, here at most maxAttempts times.
// change returns false to leave tp as it is; tp's state is then only
// refreshed. decide reports whether it wrote; the controller's copy of the
// state then carries the partition epoch Update returned, which LeaderAndIsr
// and UpdateMetadata send as ZKVersion. Called with events held.
func (ct *Controller) decide(tp commitlog.TopicPartition, change func(s *PartitionState) (bool, error)) (bool, error) {
	var err error
	for range maxAttempts {
		var s PartitionState
		if s, err = ct.load(tp); err != nil {
			return false, err
		}
		if ok, err := change(&s); err != nil || !ok {
			return false, err
		}
		var epoch int32
		if epoch, err = ct.states.Update(tp, s, ct.Epoch); err == nil {
			s.PartitionEpoch = epoch
			ct.remember(tp, s)
			return true, nil
		}
	}
	return false, fmt.Errorf("write state of %s: %d attempts conflicted, the last: %w", tp, maxAttempts, err)
}

// load reads tp's state from the StateStore into the controller's copy,
// and returns it. Called with events held.
func (ct *Controller) load(tp commitlog.TopicPartition) (PartitionState, error) {
	ct.mu.Lock()
	cur, ok := ct.partitions[tp]
	var s PartitionState
	if ok {
		s = cloneState(*cur)
	}
	ct.mu.Unlock()
	if !ok {
		return PartitionState{}, fmt.Errorf("unknown partition %s", tp)
	}
	if err := ct.states.Load(tp, &s); err != nil {
		return PartitionState{}, fmt.Errorf("load state of %s: %w", tp, err)
	}
	ct.remember(tp, s)
	return s, nil
}

// remember makes s the controller's copy of tp's state.
func (ct *Controller) remember(tp commitlog.TopicPartition, s PartitionState) {
	s = cloneState(s)
	ct.mu.Lock()
	ct.partitions[tp] = &s
	ct.mu.Unlock()
}

// liveFuncLocked returns a test of liveness against a copy of the
// controller's live brokers, for the election policy, which runs without
// mu. Called with mu held.
func (ct *Controller) liveFuncLocked() func(id int32) bool {
	live := maps.Clone(ct.live)
	return func(id int32) bool { _, ok := live[id]; return ok }
}

// partitionsLocked lists every partition, sorted. Called with mu held.
func (ct *Controller) partitionsLocked() []commitlog.TopicPartition {
	tps := slices.Collect(maps.Keys(ct.partitions))
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

// liveIDsLocked lists the live brokers, sorted. Called with mu held.
func (ct *Controller) liveIDsLocked() []int32 {
	live := slices.Collect(maps.Keys(ct.live))
	slices.Sort(live)
	return live
}

// send tells the running replicas of tps their state (LeaderAndIsr), then
// every running broker the metadata of every partition (UpdateMetadata).
func (ct *Controller) send(tps []commitlog.TopicPartition) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct.mu.Lock()
	live := ct.liveIDsLocked()
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
			req.TopicStates = appendLeaderAndIsr(req.TopicStates, tp, ct.topicIDs[tp.Topic], s, ct.Epoch)
		}
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
	return errors.Join(append(errs, ct.sendUpdateMetadata(ctx))...)
}

// sendUpdateMetadata tells every running broker the live brokers and every
// partition's state as the controller last loaded or wrote it.
func (ct *Controller) sendUpdateMetadata(ctx context.Context) error {
	ct.mu.Lock()
	live := ct.liveIDsLocked()
	update := kmsg.NewPtrUpdateMetadataRequest()
	update.ControllerID, update.ControllerEpoch, update.BrokerEpoch = ct.ID, ct.Epoch, -1
	for _, tp := range ct.partitionsLocked() {
		update.TopicStates = appendUpdateMetadata(update.TopicStates, tp, ct.topicIDs[tp.Topic], ct.partitions[tp], ct.Epoch, ct.live)
	}
	for _, id := range live {
		host, port := splitHostPort(ct.live[id])
		update.LiveBrokers = append(update.LiveBrokers, kmsg.UpdateMetadataRequestLiveBroker{ID: id,
			Endpoints: []kmsg.UpdateMetadataRequestLiveBrokerEndpoint{{Host: host, Port: port, ListenerName: "PLAINTEXT", SecurityProtocol: 0}}})
	}
	ct.mu.Unlock()

	var errs []error
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

func appendLeaderAndIsr(states []kmsg.LeaderAndISRRequestTopicState, tp commitlog.TopicPartition, id store.TopicID, s *PartitionState, controllerEpoch int32) []kmsg.LeaderAndISRRequestTopicState {
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Partition, ps.ControllerEpoch, ps.Leader, ps.LeaderEpoch = tp.Partition, controllerEpoch, s.Leader, s.LeaderEpoch
	ps.ISR, ps.ZKVersion, ps.Replicas = slices.Clone(s.ISR), s.PartitionEpoch, slices.Clone(s.Replicas)
	for i := range states {
		if states[i].Topic == tp.Topic {
			states[i].PartitionStates = append(states[i].PartitionStates, ps)
			return states
		}
	}
	return append(states, kmsg.LeaderAndISRRequestTopicState{Topic: tp.Topic, TopicID: id, PartitionStates: []kmsg.LeaderAndISRRequestTopicPartition{ps}})
}

func appendUpdateMetadata(states []kmsg.UpdateMetadataRequestTopicState, tp commitlog.TopicPartition, id store.TopicID, s *PartitionState, controllerEpoch int32, live map[int32]string) []kmsg.UpdateMetadataRequestTopicState {
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
	return append(states, kmsg.UpdateMetadataRequestTopicState{Topic: tp.Topic, TopicID: id, PartitionStates: []kmsg.UpdateMetadataRequestTopicPartition{ps}})
}
