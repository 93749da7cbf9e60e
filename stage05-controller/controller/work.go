package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// build 05.I: the controller's work: failover, leader elections, broker deaths and births, topic and ISR changes
// tests: TestOneControllerAtATimeAndTheEpochOnlyGrows, TestControlledShutdownOfAFollowerBumpsTheLeaderEpoch, TestPartitionModificationsCreateNewPartitionsUnlessTheTopicIsBeingDeleted

// What the active controller does, event by event. Every function here
// runs on the event goroutine.

// failover is Kafka's onControllerFailover: the broker just won the
// election. It watches what it must react to, loads the cluster's state,
// tells every broker the metadata, gives every partition without a live
// leader one, and tells every live replica its role.
func (c *Controller) failover(epoch kafkazk.ControllerEpoch) {
	c.term++
	c.termDone = make(chan struct{})
	c.state = newClusterState(epoch, c.logger)
	c.channels = newChannels(c.brokerID, c.IsActive, c.logger)
	cs := c.state

	brokers, err := c.watchBrokers()
	if err == nil {
		err = c.loadTopics()
	}
	var deletions []string
	if err == nil {
		// The deletions in progress (Kafka's fetchTopicDeletionsInProgress,
		// before its state machines start): a topic being deleted gets no
		// leader and no new partition state below, and a deletion the last
		// controller left half done is resumed at the end.
		deletions, err = c.readDeletions()
	}
	if err != nil {
		c.failed("load the cluster state", err)
		return
	}
	for _, topic := range deletions {
		cs.deleting[topic] = true
	}
	for _, b := range brokers {
		cs.live[b.ID] = b
		c.channels.add(b.ID, c.addr(b))
	}
	c.logger.Info("controller state loaded", "epoch", epoch.Epoch, "live_brokers", cs.liveIDs(),
		"topics", len(cs.topics), "partitions", len(cs.states))
	// The state machines start from what ZooKeeper says (Kafka's
	// initializePartitionState and initializeReplicaState).
	// exercise 05.6: a new controller's state machines start from what ZooKeeper says
	// hint: a partition is online only if its recorded leader is alive; a replica is online only if its broker is, and a dead replica of a topic being deleted cannot be deleted now
	// tests: TestOneControllerAtATimeAndTheEpochOnlyGrows, TestPartitionModificationsCreateNewPartitionsUnlessTheTopicIsBeingDeleted
	for _, tp := range cs.partitions() {
		switch s, ok := cs.states[tp]; {
		case !ok:
			cs.machines.partitionTo(tp, NewPartition)
		case s.Leader >= 0 && cs.isLive(s.Leader):
			cs.machines.partitionTo(tp, OnlinePartition)
		default:
			cs.machines.partitionTo(tp, OfflinePartition)
		}
		for _, r := range cs.replicas(tp) {
			_, live := cs.live[r]
			switch {
			case live:
				cs.machines.replicaTo(Replica{tp, r}, OnlineReplica)
			case cs.deleting[tp.Topic]:
				// Kafka's initializeReplicaState: a dead replica of a topic
				// being deleted cannot be deleted now.
				cs.machines.replicaTo(Replica{tp, r}, ReplicaDeletionIneligible)
			default:
				cs.machines.replicaTo(Replica{tp, r}, OfflineReplica)
			}
		}
	}
	// end exercise

	// Leaders first: the partitions without one wait for nothing else.
	b := newBatch()
	b.allMetadata = true
	c.electWhereNeeded(cs.partitions(), b)
	c.send(b)
	// Then replicas on brokers that are not registered leave the ISRs (the
	// death may have happened before this controller was elected: this
	// controller's predecessor, for one), and every live replica hears its
	// role, but those of topics being deleted: they are to stop.
	b = newBatch()
	c.removeFromISRs(func(r int32) bool { _, live := cs.live[r]; return !live }, b)
	for _, tp := range cs.partitions() {
		if !cs.deleting[tp.Topic] {
			b.addLeaderAndIsr(cs, tp, nil)
		}
	}
	c.send(b)
	c.isrChanges()
	c.resumeDeletions() // Kafka's tryTopicDeletion
	c.resumeReassignments()
	c.legacyReassignments()
	if c.opts.AutoLeaderRebalance && c.opts.LeaderImbalanceCheckInterval > 0 {
		c.rebalanceLoop(c.term)
	}
}

// resigned is Kafka's onControllerResignation: forget the state, stop
// talking to brokers; the term's watch goroutines and timers end, and an
// event one of them queued before is ignored.
func (c *Controller) resigned() {
	c.term++
	if c.termDone != nil {
		close(c.termDone)
		c.termDone = nil
	}
	if c.channels != nil {
		c.channels.closeAll()
	}
	c.state, c.channels = nil, nil
}

// failed handles an error the controller cannot go on from: a fenced
// write (another controller was elected: resign) or ZooKeeper failing
// (resign too, and run again: the next controller, maybe this broker,
// starts from what ZooKeeper holds).
func (c *Controller) failed(what string, err error) {
	if errors.Is(err, kafkazk.ErrControllerMoved) {
		c.resign(fmt.Sprintf("%s: %v", what, err))
		return
	}
	c.logger.Error("controller failed; resigning", "doing", what, "err", err)
	c.resign(what + " failed")
	if err := c.zk.ResignController(); err != nil {
		c.logger.Warn("delete /controller", "err", err)
	}
	c.retryLater()
}

// watch arms a ZooKeeper watch for this term: when it fires, f runs as an
// event, unless the controller resigned or was elected again meanwhile.
// The goroutine that waits for it ends with the term: a watch on a znode
// nobody changes may never fire, and a controller that resigns and is
// elected again arms every watch anew (ZooKeeper cannot take a watch
// back; the old one fires into a channel nobody reads, and go-zookeeper
// drops it then).
func (c *Controller) watch(name string, ch <-chan zk.Event, f func(c *Controller)) {
	term, termDone := c.term, c.termDone
	if termDone == nil {
		return // not the controller: nothing to react to
	}
	c.wg.Go(func() {
		select {
		case <-c.done:
		case <-termDone:
		case <-ch:
			c.queue.put(event{name, func(c *Controller) {
				if c.state != nil && c.term == term {
					f(c)
				}
			}})
		}
	})
}

// watchBrokers reads /brokers/ids and watches it.
func (c *Controller) watchBrokers() ([]kafkazk.RegisteredBroker, error) {
	brokers, ch, err := c.zk.BrokersW()
	if err != nil {
		return nil, err
	}
	c.watch("BrokerChange", ch, (*Controller).brokerChange)
	return brokers, nil
}

// loadTopics reads every topic's assignment, config and partition states,
// and watches /brokers/topics.
func (c *Controller) loadTopics() error {
	topics, ch, err := c.zk.TopicsW()
	if err != nil {
		return err
	}
	c.watch("TopicChange", ch, (*Controller).topicChange)
	return c.addTopics(topics)
}

// addTopics loads topics into the state: assignment, unclean election
// setting, partition states (those without one are created by
// electWhereNeeded). Each topic's znode is watched from then on for new
// partitions (partitions.go).
func (c *Controller) addTopics(topics []string) error {
	cs := c.state
	assignments, watches, err := c.zk.TopicAssignmentsW(topics...)
	if err != nil {
		return err
	}
	var tps []commitlog.TopicPartition
	for topic, a := range assignments {
		cs.topics[topic] = a
		c.watchPartitionModifications(topic, watches[topic])
		for p := range a.Replicas {
			tps = append(tps, commitlog.TopicPartition{Topic: topic, Partition: p})
		}
		config, err := c.zk.TopicConfig(topic)
		if err != nil {
			return err
		}
		if v, ok := config["unclean.leader.election.enable"]; ok {
			cs.unclean[topic], _ = strconv.ParseBool(v)
		}
	}
	states, err := c.zk.PartitionStates(tps...)
	if err != nil {
		return err
	}
	maps.Copy(cs.states, states)
	return nil
}

// uncleanFor is a topic's unclean.leader.election.enable.
func (c *Controller) uncleanFor(topic string) bool {
	if v, ok := c.state.unclean[topic]; ok {
		return v
	}
	return c.opts.UncleanLeaderElection
}

// electWhereNeeded gives a leader to every partition among tps that lacks
// a live one: a new partition (no state yet) gets its first live replica
// and the live replicas as its ISR (Kafka's NewPartition to
// OnlinePartition); a partition whose leader is gone gets one by
// offlineElection. The decisions are written to ZooKeeper and added to b.
func (c *Controller) electWhereNeeded(tps []commitlog.TopicPartition, b *batch) {
	c.electLeaders(tps, b, true)
}

// electLeaders is electWhereNeeded; again says whether a decision that
// finds its state changed under it is decided once more (writeStates).
func (c *Controller) electLeaders(tps []commitlog.TopicPartition, b *batch, again bool) {
	cs := c.state
	created := map[commitlog.TopicPartition]isr.PartitionState{}
	decided := map[commitlog.TopicPartition]kafkazk.VersionedState{}
	for _, tp := range tps {
		if cs.deleting[tp.Topic] {
			continue
		}
		replicas := cs.replicas(tp)
		s, ok := cs.states[tp]
		if !ok {
			var live []int32
			for _, r := range replicas {
				if cs.isLive(r) {
					live = append(live, r)
				}
			}
			if len(live) == 0 {
				c.logger.Warn("new partition has no live replica; it stays offline", "partition", tp, "replicas", replicas)
				continue
			}
			created[tp] = isr.PartitionState{ControllerEpoch: cs.epoch.Epoch, Leader: live[0], LeaderEpoch: 0, ISR: live}
			continue
		}
		if s.Leader >= 0 && cs.isLive(s.Leader) {
			continue
		}
		next := s
		leader, newISR, ok := offlineElection(replicas, s.ISR, cs.isLive, c.uncleanFor(tp.Topic))
		if ok {
			if !slices.Contains(s.ISR, leader) {
				c.logger.Warn("unclean leader election: an out-of-sync replica leads; what only the ISR had is lost",
					"partition", tp, "leader", leader, "old_isr", s.ISR)
			}
			next.Leader, next.ISR = leader, newISR
		} else {
			if s.Leader < 0 {
				continue // offline already, and still no candidate
			}
			next.PartitionState = withoutReplicas(s.PartitionState, func(r int32) bool { return !cs.isLive(r) })
			c.logger.Warn("no live replica in the ISR; the partition goes offline", "partition", tp, "isr", s.ISR)
		}
		next.LeaderEpoch++
		next.ControllerEpoch = cs.epoch.Epoch
		decided[tp] = next
	}
	if len(created) > 0 {
		if err := c.zk.CreatePartitionStates(cs.epoch, created); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			c.failed("create partition states", err)
			return
		}
		for tp, s := range created {
			cs.states[tp] = kafkazk.VersionedState{PartitionState: s, ZkVersion: 0}
			cs.machines.partitionTo(tp, OnlinePartition)
			for _, r := range cs.replicas(tp) {
				if _, live := cs.live[r]; live {
					cs.machines.replicaTo(Replica{tp, r}, OnlineReplica)
				} else {
					cs.machines.replicaTo(Replica{tp, r}, OfflineReplica)
				}
			}
			b.isNew[tp] = true
			b.addLeaderAndIsr(cs, tp, nil)
		}
	}
	c.writeStatesThen(decided, b, again)
}

// writeStates writes the controller's decisions, fenced by its epoch and
// conditional on each state's version, and adds each written one to b.
// A state a leader changed meanwhile (BADVERSION: its ISR write raced
// with the decision) is read again and its leader decided again, once:
// if it moved again, it is left to the next event that concerns it, as
// every event must end (the retry used to call writeStates again without
// a bound). A state whose znode is gone (NONODE) is forgotten: its
// partition was deleted under the controller, and reading it again
// would find nothing to decide on, for ever.
func (c *Controller) writeStates(decided map[commitlog.TopicPartition]kafkazk.VersionedState, b *batch) {
	c.writeStatesThen(decided, b, true)
}

// writeStatesThen is writeStates; again false: a decision that finds
// its state changed is not decided again (this is the second try).
func (c *Controller) writeStatesThen(decided map[commitlog.TopicPartition]kafkazk.VersionedState, b *batch, again bool) {
	conflicts, ok := c.writeDecided(decided, b)
	if !ok || len(conflicts) == 0 {
		return
	}
	if !c.refreshStates(conflicts) {
		return
	}
	if !again {
		c.logger.Warn("partition states changed under the controller twice in one event; left to the next event", "partitions", conflicts)
		return
	}
	// Decide again on what is there now (a leader's ISR change raced
	// with the decision; the decision still has to be made).
	c.electLeaders(conflicts, b, false)
}

// writeDecided writes decided states (fenced, conditional on their
// versions) and adds the written ones to b. It forgets the states whose
// znode is gone and returns, in order, those that changed under the
// controller (to read again); ok is false when the controller failed
// (resigned) on the way.
func (c *Controller) writeDecided(decided map[commitlog.TopicPartition]kafkazk.VersionedState, b *batch) (conflicts []commitlog.TopicPartition, ok bool) {
	cs := c.state
	if cs == nil {
		return nil, false
	}
	if len(decided) == 0 {
		return nil, true
	}
	if c.beforeStateWrite != nil {
		c.beforeStateWrite(slices.SortedFunc(maps.Keys(decided), commitlog.TopicPartition.Compare))
	}
	written, failed, err := c.zk.UpdatePartitionStates(cs.epoch, decided)
	if err != nil {
		c.failed("write partition states", err)
		return nil, false
	}
	for tp, v := range written {
		s := decided[tp]
		s.ZkVersion = v
		cs.states[tp] = s
		if s.Leader >= 0 && cs.isLive(s.Leader) {
			cs.machines.partitionTo(tp, OnlinePartition)
		} else {
			cs.machines.partitionTo(tp, OfflinePartition)
		}
		b.addLeaderAndIsr(cs, tp, nil)
	}
	for _, tp := range slices.SortedFunc(maps.Keys(failed), commitlog.TopicPartition.Compare) {
		if errors.Is(failed[tp], zk.ErrNoNode) {
			c.forgetState(tp)
			continue
		}
		c.logger.Info("partition state changed under the controller; reading it again", "partition", tp, "err", failed[tp])
		conflicts = append(conflicts, tp)
	}
	return conflicts, true
}

// refreshStates reads tps' states from ZooKeeper into the controller's
// view (ZooKeeper's are the newer: this session wrote the cached ones,
// and a session reads its own writes); a state whose znode is gone is
// forgotten. False when the read failed and the controller resigned.
func (c *Controller) refreshStates(tps []commitlog.TopicPartition) bool {
	cs := c.state
	current, err := c.zk.PartitionStates(tps...)
	if err != nil {
		c.failed("read partition states", err)
		return false
	}
	for _, tp := range tps {
		if s, ok := current[tp]; ok {
			cs.states[tp] = s
		} else if _, known := cs.states[tp]; known {
			c.forgetState(tp)
		}
	}
	return true
}

// forgetState drops a partition state whose znode is gone (its topic was
// deleted, by this controller's predecessor or by hand, before this one
// heard of it): there is nothing to elect or shrink any more. The
// partition goes offline; the TopicChange that follows the deletion
// forgets the rest, and a controller elected later creates a state again
// if the assignment is still there.
func (c *Controller) forgetState(tp commitlog.TopicPartition) {
	cs := c.state
	c.logger.Warn("partition state znode is gone; forgetting the partition's state", "partition", tp)
	delete(cs.states, tp)
	if !cs.deleting[tp.Topic] {
		cs.machines.partitionTo(tp, OfflinePartition)
	}
}

// brokerChange is Kafka's BrokerChange event: /brokers/ids changed. A
// broker that registered again with a newer epoch (it restarted, or its
// session expired, faster than the controller saw it go) is handled as
// having died and started.
func (c *Controller) brokerChange() {
	cs := c.state
	brokers, err := c.watchBrokers()
	if err != nil {
		c.failed("read /brokers/ids", err)
		return
	}
	now := map[int32]kafkazk.RegisteredBroker{}
	for _, b := range brokers {
		now[b.ID] = b
	}
	var started, died []int32
	for id, b := range now {
		old, ok := cs.live[id]
		switch {
		case !ok:
			started = append(started, id)
		case old.Epoch != b.Epoch:
			died = append(died, id)
			started = append(started, id)
		}
	}
	for id := range cs.live {
		if _, ok := now[id]; !ok {
			died = append(died, id)
		}
	}
	slices.Sort(started)
	slices.Sort(died)
	if len(died) > 0 {
		c.logger.Info("brokers died", "brokers", died)
		for _, id := range died {
			delete(cs.live, id)
			delete(cs.shuttingDown, id)
			c.channels.remove(id)
		}
		c.brokersDied(died)
		if c.state != cs {
			// Its writes found a newer controller and it resigned: the
			// started brokers are the new controller's to tell (and
			// this one's channels are gone).
			return
		}
	}
	if len(started) > 0 {
		c.logger.Info("brokers started", "brokers", started)
		for _, id := range started {
			cs.live[id] = now[id]
			c.channels.add(id, c.addr(now[id]))
		}
		c.brokersStarted(started)
	}
}

// brokersDied is Kafka's onBrokerFailure: the partitions the dead brokers
// led get new leaders from their live ISRs, and the dead brokers leave the
// ISRs of the others; the survivors are told. Their replicas of topics
// being deleted cannot be deleted now (Kafka's failReplicaDeletion): a
// StopReplica that was on its way to them is lost with their channel, and
// their start resumes the deletion (brokersStarted).
func (c *Controller) brokersDied(ids []int32) {
	cs := c.state
	dead := func(r int32) bool { return slices.Contains(ids, r) }
	b := newBatch()
	var leaderless []commitlog.TopicPartition
	var forDeletion []Replica
	for _, tp := range cs.partitions() {
		for _, r := range cs.replicas(tp) {
			if dead(r) && !cs.deleting[tp.Topic] {
				cs.machines.replicaTo(Replica{tp, r}, OfflineReplica)
			} else if dead(r) {
				forDeletion = append(forDeletion, Replica{tp, r})
			}
		}
		s, ok := cs.states[tp]
		if !ok || cs.deleting[tp.Topic] {
			continue
		}
		if dead(s.Leader) {
			cs.machines.partitionTo(tp, OfflinePartition)
			leaderless = append(leaderless, tp)
		}
	}
	// New leaders first, told at once; the ISRs the dead brokers only
	// followed in shrink after (Kafka's order: OfflinePartition elections,
	// then OfflineReplica).
	c.electWhereNeeded(leaderless, b)
	b.allMetadata = len(b.metadata) == 0 // the live brokers changed: every broker hears it
	c.send(b)
	b = newBatch()
	c.removeFromISRs(dead, b)
	c.send(b)
	if c.state == cs {
		c.failReplicaDeletion(forDeletion, "broker died", false)
	}
}

// removeFromISRs takes the brokers gone says are gone out of the ISRs of
// the partitions whose leader is live (Kafka's OfflineReplica transition,
// removeReplicasFromIsr): a leader keeps a dead follower whose log end
// matched its own in the ISR for ever (Kafka's rule: only a follower that
// is behind can fall out of sync), so the controller, which sees the
// death, must. Each change is a new leader epoch.
func (c *Controller) removeFromISRs(gone func(int32) bool, b *batch) {
	cs := c.state
	if cs == nil {
		return
	}
	var candidates []commitlog.TopicPartition
	for _, tp := range cs.partitions() {
		if slices.ContainsFunc(cs.replicas(tp), gone) && !cs.deleting[tp.Topic] {
			candidates = append(candidates, tp)
		}
	}
	c.shrinkISRs(gone, candidates, b)
}

// shrinkISRs is removeFromISRs for the partitions candidates. It works
// from the states as ZooKeeper has them now, not as last seen: a leader
// may have changed its ISR since, put a broker back in it for one
// (Kafka's doRemoveReplicasFromIsr reads them too). A write that finds
// the state changed again (the leader wrote meanwhile) is read and tried
// once more; those that still fail are returned, in order, and left to
// the next event. ok is false when the controller failed (resigned).
func (c *Controller) shrinkISRs(gone func(int32) bool, candidates []commitlog.TopicPartition, b *batch) (failed []commitlog.TopicPartition, ok bool) {
	cs := c.state
	for attempt := 0; attempt < 2 && len(candidates) > 0; attempt++ {
		if !c.refreshStates(candidates) {
			return nil, false
		}
		shrunk := map[commitlog.TopicPartition]kafkazk.VersionedState{}
		for _, tp := range candidates {
			s, ok := cs.states[tp]
			if !ok || cs.deleting[tp.Topic] || s.Leader < 0 || gone(s.Leader) || !slices.ContainsFunc(s.ISR, gone) {
				continue
			}
			next := s
			next.PartitionState = withoutReplicas(s.PartitionState, gone)
			next.LeaderEpoch++
			next.ControllerEpoch = cs.epoch.Epoch
			shrunk[tp] = next
		}
		if candidates, ok = c.writeDecided(shrunk, b); !ok {
			return nil, false
		}
	}
	if len(candidates) > 0 {
		c.logger.Warn("ISR changed under the controller twice in one event; left to the next event", "partitions", candidates)
	}
	return candidates, true
}

// brokersStarted is Kafka's onBrokerStartup: every broker learns the new
// live set and all the metadata; the new brokers are told their roles;
// partitions that were offline, or never got a state, get a leader if a
// new broker can be one; the deletion of topics with a replica on a new
// broker resumes (resumeDeletionForTopics).
func (c *Controller) brokersStarted(ids []int32) {
	cs := c.state
	b := newBatch()
	b.allMetadata = true
	var offline []commitlog.TopicPartition
	var deleting []string
	for _, id := range ids {
		for _, tp := range cs.partitionsOn(id) {
			if cs.deleting[tp.Topic] {
				deleting = append(deleting, tp.Topic)
				continue
			}
			cs.machines.replicaTo(Replica{tp, id}, OnlineReplica)
			// Offline partitions, and new ones that got no state because
			// none of their replicas was live (Kafka's
			// triggerOnlinePartitionStateChange elects both).
			if s, ok := cs.states[tp]; !ok || s.Leader < 0 || !cs.isLive(s.Leader) {
				offline = append(offline, tp)
			}
			b.addLeaderAndIsr(cs, tp, []int32{id})
		}
	}
	c.electWhereNeeded(dedupe(offline), b)
	c.send(b)
	if c.state == cs && len(deleting) > 0 {
		slices.Sort(deleting)
		c.resumeDeletionForTopics(slices.Compact(deleting))
	}
}

// topicChange is Kafka's TopicChange event: new topics' partitions are
// created; topics gone from ZooKeeper are forgotten.
func (c *Controller) topicChange() {
	cs := c.state
	topics, ch, err := c.zk.TopicsW()
	if err != nil {
		c.failed("read /brokers/topics", err)
		return
	}
	c.watch("TopicChange", ch, (*Controller).topicChange)
	var added []string
	for _, t := range topics {
		if _, ok := cs.topics[t]; !ok {
			added = append(added, t)
		}
	}
	for t := range cs.topics {
		if !slices.Contains(topics, t) {
			c.forgetTopic(t)
		}
	}
	if len(added) == 0 {
		return
	}
	if err := c.addTopics(added); err != nil {
		c.failed("load new topics", err)
		return
	}
	c.logger.Info("new topics", "topics", added)
	var tps []commitlog.TopicPartition
	for _, t := range added {
		for _, p := range slices.Sorted(maps.Keys(cs.topics[t].Replicas)) {
			tps = append(tps, commitlog.TopicPartition{Topic: t, Partition: p})
		}
	}
	b := newBatch()
	c.electWhereNeeded(tps, b)
	c.send(b)
}

// forgetTopic drops a topic from the state.
func (c *Controller) forgetTopic(topic string) {
	cs := c.state
	for p := range cs.topics[topic].Replicas {
		delete(cs.states, commitlog.TopicPartition{Topic: topic, Partition: p})
	}
	delete(cs.topics, topic)
	cs.machines.forgetTopic(topic)
	delete(cs.unclean, topic)
	delete(cs.deleting, topic)
	delete(cs.deletionStarted, topic)
	delete(cs.ineligible, topic)
}

// isrChanges is Kafka's IsrChangeNotification event: leaders changed
// ISRs; read the new states and tell every broker (clients read ISRs in
// Metadata answers).
func (c *Controller) isrChanges() {
	cs := c.state
	names, ch, err := c.zk.IsrChangeNotificationsW()
	if err != nil {
		c.failed("read /isr_change_notification", err)
		return
	}
	c.watch("IsrChangeNotification", ch, (*Controller).isrChanges)
	if len(names) == 0 {
		return
	}
	tps, err := c.zk.ConsumeIsrChanges(cs.epoch, names)
	if err != nil {
		c.failed("consume ISR change notifications", err)
		return
	}
	var known []commitlog.TopicPartition
	for _, tp := range tps {
		if _, ok := cs.topics[tp.Topic]; ok {
			known = append(known, tp)
		}
	}
	states, err := c.zk.PartitionStates(known...)
	if err != nil {
		c.failed("read partition states", err)
		return
	}
	b := newBatch()
	for tp, s := range states {
		if s.ZkVersion >= cs.states[tp].ZkVersion {
			cs.states[tp] = s
			b.metadata[tp] = true
		}
	}
	// A leader may have put a broker back in its ISR after the controller
	// saw it die (it was still fetching as it exited): take it out again.
	notLive := func(r int32) bool { return !cs.isLive(r) }
	for _, tp := range slices.SortedFunc(maps.Keys(b.metadata), commitlog.TopicPartition.Compare) {
		if slices.ContainsFunc(cs.states[tp].ISR, notLive) {
			c.removeFromISRs(notLive, b)
			break
		}
	}
	c.send(b)
	for _, tp := range slices.SortedFunc(maps.Keys(b.metadata), commitlog.TopicPartition.Compare) {
		if cs.reassigning(tp) {
			c.maybeCompleteReassignment(tp) // a target replica may have joined the ISR
		}
	}
}

// dedupe sorts partitions and drops repeats.
func dedupe(tps []commitlog.TopicPartition) []commitlog.TopicPartition {
	slices.SortFunc(tps, commitlog.TopicPartition.Compare)
	return slices.Compact(tps)
}

// end build
