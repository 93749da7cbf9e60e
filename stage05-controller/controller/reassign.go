package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// Partition reassignment, the controller's third job in seed §1.1
// (KIP-455's AlterPartitionReassignments): move a partition's replicas to
// other brokers without losing a record. The controller
//
//  1. writes the assignment as the union of the old replicas and the
//     target, with the target's new brokers as adding_replicas and the
//     old ones leaving as removing_replicas, and bumps the leader epoch, so
//     that the new replicas start copying from the leader;
//  2. waits until every target replica is in the ISR (the leader adds
//     them as they catch up, and notifies);
//  3. moves the leadership into the target if the leader is leaving,
//     writes the target as the assignment, takes the leaving replicas out
//     of the ISR and stops and deletes them (StopReplica).
//
// Nothing is lost because the old replicas serve until the new ones have
// everything the ISR has.

// Errors of AlterReassignments, per partition.
var (
	// ErrUnknownPartition: no such topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownPartition = errors.New("controller: unknown topic or partition")
	// ErrInvalidAssignment: an empty target, a broker twice, or a broker
	// that is not registered (INVALID_REPLICA_ASSIGNMENT).
	ErrInvalidAssignment = errors.New("controller: invalid replica assignment")
	// ErrNoReassignment: a cancellation of a partition that is not being
	// reassigned (NO_REASSIGNMENT_IN_PROGRESS).
	ErrNoReassignment = errors.New("controller: no reassignment in progress")
)

// reassignment is one partition's move in progress.
type reassignment struct {
	target []int32 // where the replicas go
	origin []int32 // where they were
}

// Reassignment is a partition's move as ListReassignments shows it.
type Reassignment struct {
	Replicas []int32 // the replicas now: the origin and the target together
	Adding   []int32
	Removing []int32
}

// AlterReassignments starts moving partitions to target replicas; a nil
// target cancels a partition's move (its replicas go back to where they
// were). It returns an error per partition that was refused.
func (c *Controller) AlterReassignments(targets map[commitlog.TopicPartition][]int32) (map[commitlog.TopicPartition]error, error) {
	out := make(chan map[commitlog.TopicPartition]error, 1)
	c.queue.put(event{"AlterPartitionReassignments", func(c *Controller) {
		if c.state == nil {
			out <- nil
			return
		}
		errs := map[commitlog.TopicPartition]error{}
		for _, tp := range slices.SortedFunc(maps.Keys(targets), commitlog.TopicPartition.Compare) {
			if err := c.reassign(tp, targets[tp]); err != nil {
				errs[tp] = err
			}
		}
		out <- errs
	}})
	select {
	case errs := <-out:
		if errs == nil {
			return nil, ErrNotController
		}
		return errs, nil
	case <-c.stopped:
		return nil, ErrNotController
	}
}

// ListReassignments returns the moves in progress.
func (c *Controller) ListReassignments() (map[commitlog.TopicPartition]Reassignment, error) {
	out := make(chan map[commitlog.TopicPartition]Reassignment, 1)
	c.queue.put(event{"ListPartitionReassignments", func(c *Controller) {
		if c.state == nil {
			out <- nil
			return
		}
		list := map[commitlog.TopicPartition]Reassignment{}
		for tp, r := range c.state.reassignments {
			list[tp] = Reassignment{Replicas: slices.Clone(c.state.replicas(tp)), Adding: without(r.target, r.origin),
				Removing: without(r.origin, r.target)}
		}
		out <- list
	}})
	select {
	case list := <-out:
		if list == nil {
			return nil, ErrNotController
		}
		return list, nil
	case <-c.stopped:
		return nil, ErrNotController
	}
}

// reassign starts (or cancels) one partition's move: step 1.
func (c *Controller) reassign(tp commitlog.TopicPartition, target []int32) error {
	cs := c.state
	replicas := cs.replicas(tp)
	if replicas == nil || cs.deleting[tp.Topic] {
		return fmt.Errorf("%w: %s", ErrUnknownPartition, tp)
	}
	current, moving := cs.reassignments[tp]
	origin := replicas
	if moving {
		origin = current.origin
	}
	if target == nil {
		if !moving {
			return fmt.Errorf("%w: %s", ErrNoReassignment, tp)
		}
		target = origin
	}
	if len(target) == 0 || len(slices.Compact(slices.Sorted(slices.Values(target)))) != len(target) {
		return fmt.Errorf("%w: %s to %v: replicas must be distinct and not empty", ErrInvalidAssignment, tp, target)
	}
	for _, r := range target {
		if _, ok := cs.live[r]; !ok {
			return fmt.Errorf("%w: %s to %v: broker %d is not registered", ErrInvalidAssignment, tp, target, r)
		}
	}
	union := slices.Clone(target)
	for _, r := range origin {
		if !slices.Contains(union, r) {
			union = append(union, r)
		}
	}
	if err := c.writeAssignment(tp, union, without(target, origin), without(origin, target)); err != nil {
		return err
	}
	if slices.Equal(target, origin) {
		delete(cs.reassignments, tp)
	} else {
		cs.reassignments[tp] = reassignment{target: slices.Clone(target), origin: slices.Clone(origin)}
	}
	c.logger.Info("reassigning", "partition", tp, "from", origin, "to", target)
	for _, r := range without(target, origin) {
		cs.machines.replicaTo(Replica{tp, r}, OnlineReplica) // through NewReplica
	}
	// A new leader epoch with the union as replicas: the new ones follow.
	s := cs.states[tp]
	s.LeaderEpoch++
	s.ControllerEpoch = cs.epoch.Epoch
	b := newBatch()
	c.writeStates(map[commitlog.TopicPartition]kafkazk.VersionedState{tp: s}, b)
	c.send(b)
	c.maybeCompleteReassignment(tp)
	return nil
}

// maybeCompleteReassignment finishes a move whose target replicas are all
// in the ISR: steps 2 and 3.
func (c *Controller) maybeCompleteReassignment(tp commitlog.TopicPartition) {
	cs := c.state
	if cs == nil {
		return
	}
	r, ok := cs.reassignments[tp]
	s, known := cs.states[tp]
	if !ok || !known {
		return
	}
	for _, t := range r.target {
		if !slices.Contains(s.ISR, t) {
			return // step 2: wait for the ISR
		}
	}
	next := s
	if !slices.Contains(r.target, s.Leader) || !cs.isLive(s.Leader) {
		leader := int32(-1)
		for _, t := range r.target {
			if cs.isLive(t) && slices.Contains(s.ISR, t) {
				leader = t
				break
			}
		}
		if leader < 0 {
			return // no target replica can lead yet
		}
		next.Leader = leader
	}
	next.ISR = nil
	for _, i := range s.ISR {
		if slices.Contains(r.target, i) {
			next.ISR = append(next.ISR, i)
		}
	}
	next.LeaderEpoch++
	next.ControllerEpoch = cs.epoch.Epoch
	leaving := without(cs.replicas(tp), r.target)
	// Kafka's order (KIP-455 B3 before B6): the new leader and the ISR of
	// target replicas first, the assignment last. A controller that dies
	// between the two leaves a state its successor can finish from
	// (adding_replicas and removing_replicas are still in the
	// assignment), never a leader outside its partition's replicas.
	b := newBatch()
	c.writeStates(map[commitlog.TopicPartition]kafkazk.VersionedState{tp: next}, b)
	if s := cs.states[tp]; s.LeaderEpoch != next.LeaderEpoch || s.Leader != next.Leader {
		c.send(b) // the state changed under us: it was read again; try at the next change
		return
	}
	if err := c.writeAssignment(tp, r.target, nil, nil); err != nil {
		c.logger.Warn("completing a reassignment", "partition", tp, "err", err)
		c.send(b)
		return
	}
	for _, r := range leaving { // they get StopReplica, not the new state
		delete(b.leaderAndIsr[r], tp)
		if len(b.leaderAndIsr[r]) == 0 {
			delete(b.leaderAndIsr, r)
		}
	}
	delete(cs.reassignments, tp)
	defer func() {
		if cs.legacy[tp] {
			c.legacyDone()
		}
	}()
	for _, r := range leaving {
		rep := Replica{tp, r}
		if _, ok := cs.live[r]; !ok {
			cs.machines.replicaTo(rep, OfflineReplica)
			continue // a dead broker's leftover replica is a stray when it comes back
		}
		cs.machines.replicaTo(rep, ReplicaDeletionStarted)
		b.addStopReplica(r, tp, true)
		b.stopCallback[r] = chain(b.stopCallback[r], func(resp *kmsg.StopReplicaResponse) {
			if resp.ErrorCode == 0 {
				c.queue.put(event{"ReassignedReplicaDeleted", func(c *Controller) {
					if c.state != nil && c.state.machines.replicas[rep] == ReplicaDeletionStarted {
						c.state.machines.replica(rep, ReplicaDeletionSuccessful)
						c.state.machines.replica(rep, NonExistentReplica)
					}
				}})
			}
		})
	}
	c.send(b)
	c.logger.Info("reassignment complete", "partition", tp, "replicas", r.target, "leader", cs.states[tp].Leader, "removed", leaving)
}

// writeAssignment writes one partition's replicas (and the moving ones)
// into its topic's assignment, fenced and conditional on its version.
func (c *Controller) writeAssignment(tp commitlog.TopicPartition, replicas, adding, removing []int32) error {
	cs := c.state
	va := cs.topics[tp.Topic]
	a := va.TopicAssignment
	a.Replicas = cloneMap(a.Replicas)
	a.Adding, a.Removing = cloneMap(a.Adding), cloneMap(a.Removing)
	a.Replicas[tp.Partition] = slices.Clone(replicas)
	delete(a.Adding, tp.Partition)
	delete(a.Removing, tp.Partition)
	if len(adding) > 0 {
		a.Adding[tp.Partition] = adding
	}
	if len(removing) > 0 {
		a.Removing[tp.Partition] = removing
	}
	v, err := c.zk.SetTopicAssignment(cs.epoch, tp.Topic, a, va.ZkVersion)
	if err != nil {
		if errors.Is(err, kafkazk.ErrControllerMoved) {
			c.failed("write a topic assignment", err)
		}
		return err
	}
	cs.topics[tp.Topic] = kafkazk.VersionedAssignment{TopicAssignment: a, ZkVersion: v}
	return nil
}

// resumeReassignments picks up the moves a previous controller left in
// the assignments (adding_replicas, removing_replicas), at failover.
func (c *Controller) resumeReassignments() {
	cs := c.state
	for _, topic := range slices.Sorted(maps.Keys(cs.topics)) {
		a := cs.topics[topic]
		for p, adding := range a.Adding {
			tp := commitlog.TopicPartition{Topic: topic, Partition: p}
			replicas := a.Replicas[p]
			removing := a.Removing[p]
			cs.reassignments[tp] = reassignment{target: without(replicas, removing), origin: without(replicas, adding)}
		}
		for p, removing := range a.Removing {
			tp := commitlog.TopicPartition{Topic: topic, Partition: p}
			if _, ok := cs.reassignments[tp]; !ok {
				replicas := a.Replicas[p]
				cs.reassignments[tp] = reassignment{target: without(replicas, removing), origin: replicas}
			}
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(cs.reassignments), commitlog.TopicPartition.Compare) {
		c.maybeCompleteReassignment(tp)
	}
}

// without returns a's members that are not in b, in a's order.
func without(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func cloneMap(m map[int32][]int32) map[int32][]int32 {
	out := make(map[int32][]int32, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// legacyReassignments is the /admin/reassign_partitions event: the znode
// was created (or deleted). Its moves are started as
// AlterPartitionReassignments' are; the znode is deleted once they are
// all complete (legacyDone), as Kafka does for the old tool.
func (c *Controller) legacyReassignments() {
	cs := c.state
	rs, ch, err := c.zk.ReassignmentsW()
	if err != nil {
		c.logger.Warn("reading /admin/reassign_partitions", "err", err)
		return
	}
	c.watch("PartitionReassignment", ch, (*Controller).legacyReassignments)
	if len(rs) == 0 {
		return
	}
	for _, r := range rs {
		tp := commitlog.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if err := c.reassign(tp, r.Replicas); err != nil {
			c.logger.Warn("refusing a reassignment from /admin/reassign_partitions", "partition", tp, "err", err)
			continue
		}
		if cs.reassigning(tp) {
			cs.legacy[tp] = true
		}
	}
	c.legacyDone()
}

// legacyDone deletes /admin/reassign_partitions when none of the moves it
// asked for is still in progress.
func (c *Controller) legacyDone() {
	cs := c.state
	if cs == nil {
		return
	}
	for tp := range cs.legacy {
		if cs.reassigning(tp) {
			return
		}
	}
	cs.legacy = map[commitlog.TopicPartition]bool{}
	if err := c.zk.DeleteReassignments(cs.epoch); err != nil {
		c.failed("delete /admin/reassign_partitions", err)
	}
}
