package controller

import (
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Topic deletion, Kafka's TopicDeletionManager (ZooKeeper mode), with its
// names. A topic marked in /admin/delete_topics is queued (deleting); it
// is deleted once every replica of every partition is
// ReplicaDeletionSuccessful, and only then do its znodes go. Each replica
// passes through the replica state machine:
//
//	OfflineReplica -> ReplicaDeletionStarted     StopReplica(delete) sent
//	ReplicaDeletionStarted -> Successful         the broker answered without error
//	ReplicaDeletionStarted -> Ineligible         it answered an error, or died first
//	OfflineReplica -> Ineligible                 its broker is down
//	Ineligible -> OfflineReplica                 the retry: started again below
//
// A topic with an ineligible replica is ineligible for deletion: it waits,
// and is resumed (resumeDeletionForTopics) when one of its replicas'
// brokers starts, or when a refusal's retry is due. While any replica is
// ReplicaDeletionStarted the topic waits for the answers; when none is, the
// ineligible replicas go back to OfflineReplica and, the topic eligible
// again, every replica not deleted yet is sent StopReplica again. So every
// path ends: a broker that dies before answering (its channel and the
// request with it are dropped) has its replicas retried when it starts; a
// broker that refuses is asked again; a controller elected mid-deletion
// reads /admin/delete_topics in its failover and starts over (a broker
// asked twice deletes nothing twice: a StopReplica for a replica it no
// longer holds succeeds).
//
// Every function here runs on the event goroutine.

// deletionRetryBackoff is how long a topic whose replica refused its
// StopReplica waits before the replica is asked again. Kafka waits for a
// broker to start, a reassignment of the topic to finish or a controller
// to be elected; a live broker that refused (a log directory it could not
// delete from) would then hold the topic until something unrelated
// happens, so this controller also retries on a timer.
const deletionRetryBackoff = time.Second

// topicDeletion is Kafka's TopicDeletion event: /admin/delete_topics
// changed. The topics marked are queued for deletion.
func (c *Controller) topicDeletion() {
	topics, err := c.readDeletions()
	if err != nil {
		c.failed("read /admin/delete_topics", err)
		return
	}
	c.enqueueTopicsForDeletion(topics)
}

// readDeletions lists the topics marked for deletion and watches for
// more. A mark for a topic that does not exist is dropped (Kafka: "Ignoring
// request to delete non-existing topics").
func (c *Controller) readDeletions() ([]string, error) {
	cs := c.state
	names, ch, err := c.zk.TopicsToDeleteW()
	if err != nil {
		return nil, err
	}
	c.watch("TopicDeletion", ch, (*Controller).topicDeletion)
	var topics []string
	for _, topic := range names {
		if _, ok := cs.topics[topic]; ok {
			topics = append(topics, topic)
			continue
		}
		if err := c.zk.DeleteTopicZNodes(cs.epoch, topic); err != nil {
			return nil, err
		}
	}
	return topics, nil
}

// enqueueTopicsForDeletion queues topics (Kafka's
// enqueueTopicsForDeletion) and starts what can start.
func (c *Controller) enqueueTopicsForDeletion(topics []string) {
	cs := c.state
	for _, topic := range topics {
		if !cs.deleting[topic] {
			cs.deleting[topic] = true
			c.logger.Info("deleting topic", "topic", topic)
		}
	}
	c.resumeDeletions()
}

// resumeDeletionForTopics makes topics eligible for deletion again (a
// broker holding one of their replicas started, or a retry is due) and
// resumes them.
func (c *Controller) resumeDeletionForTopics(topics []string) {
	cs := c.state
	resume := false
	for _, topic := range topics {
		if cs.deleting[topic] {
			delete(cs.ineligible, topic)
			resume = true
		}
	}
	if resume {
		c.resumeDeletions()
	}
}

// failReplicaDeletion: replicas of topics being deleted could not be
// deleted now (their broker died, or it refused). They go
// ReplicaDeletionIneligible and their topics wait; retry says to resume
// them after deletionRetryBackoff rather than when a broker starts.
func (c *Controller) failReplicaDeletion(replicas []Replica, why string, retry bool) {
	cs := c.state
	var topics []string
	for _, r := range replicas {
		if !cs.deleting[r.Topic] || cs.machines.replicas[r] == ReplicaDeletionSuccessful {
			continue
		}
		cs.machines.replicaTo(r, ReplicaDeletionIneligible)
		topics = append(topics, r.Topic)
	}
	if len(topics) == 0 {
		return
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	c.markTopicsIneligibleForDeletion(topics, why)
	if retry {
		c.retryDeletionLater(topics)
	}
	c.resumeDeletions()
}

// markTopicsIneligibleForDeletion halts the deletion of topics.
func (c *Controller) markTopicsIneligibleForDeletion(topics []string, why string) {
	cs := c.state
	var halted []string
	for _, topic := range topics {
		if cs.deleting[topic] && !cs.ineligible[topic] {
			cs.ineligible[topic] = true
			halted = append(halted, topic)
		}
	}
	if len(halted) > 0 {
		c.logger.Info("topic deletion halted", "topics", halted, "why", why)
	}
}

// completeReplicaDeletion: a broker deleted replicas; a topic whose every
// replica is deleted is torn down.
func (c *Controller) completeReplicaDeletion(replicas []Replica) {
	cs := c.state
	for _, r := range replicas {
		if cs.deleting[r.Topic] && cs.machines.replicas[r] == ReplicaDeletionStarted {
			cs.machines.replica(r, ReplicaDeletionSuccessful)
		}
	}
	c.resumeDeletions()
}

// resumeDeletions is Kafka's resumeDeletions, run after anything that may
// move a deletion on: a topic whose replicas are all deleted is torn down;
// one with no StopReplica awaiting an answer has its ineligible replicas
// put back to OfflineReplica; and one that is neither waiting for answers
// nor ineligible is (re)started.
func (c *Controller) resumeDeletions() {
	cs := c.state
	if cs == nil || len(cs.deleting) == 0 {
		return
	}
	done := newBatch()
	var retry, eligible []string
	for _, topic := range slices.Sorted(maps.Keys(cs.deleting)) {
		if c.allReplicasIn(topic, ReplicaDeletionSuccessful) {
			if !c.completeDeleteTopic(topic, done) {
				return // the controller failed
			}
			continue
		}
		inProgress := c.anyReplicaIn(topic, ReplicaDeletionStarted)
		if !inProgress && c.anyReplicaIn(topic, ReplicaDeletionIneligible) {
			retry = append(retry, topic)
		}
		if !inProgress && !cs.ineligible[topic] {
			eligible = append(eligible, topic)
		}
	}
	c.send(done)
	for _, topic := range retry {
		c.forEachReplica(topic, func(r Replica) {
			if cs.machines.replicas[r] == ReplicaDeletionIneligible {
				cs.machines.replica(r, OfflineReplica)
			}
		})
	}
	if len(eligible) > 0 {
		c.onTopicDeletion(eligible)
	}
}

// onTopicDeletion (re)starts the deletion of topics: the first time, their
// partitions leave the partition state machine (OfflinePartition, then
// NonExistentPartition); every time, every broker is told to drop them
// from its metadata (leader -2: clients stop using the topic now, and
// DeleteTopics, which waits for that, answers, although a replica on a
// broker that is down may be deleted much later), and onPartitionDeletion.
func (c *Controller) onTopicDeletion(topics []string) {
	cs := c.state
	b := newBatch()
	for _, topic := range topics {
		if !cs.deletionStarted[topic] {
			c.logger.Info("topic deletion started", "topic", topic)
			for _, tp := range c.topicPartitions(topic) {
				cs.machines.partitionTo(tp, OfflinePartition)
				cs.machines.partitionTo(tp, NonExistentPartition)
			}
			cs.deletionStarted[topic] = true
		}
		for _, tp := range c.topicPartitions(topic) {
			b.deleted[tp] = true
		}
	}
	c.onPartitionDeletion(topics, b)
}

// onPartitionDeletion sends StopReplica with delete to every live replica
// of topics not deleted yet (ReplicaDeletionStarted), in b; a replica on a
// broker that is down, or shutting down, goes ReplicaDeletionIneligible
// and its topic waits for the broker.
func (c *Controller) onPartitionDeletion(topics []string, b *batch) {
	cs := c.state
	sent := map[int32][]commitlog.TopicPartition{}
	var offline []string
	for _, topic := range topics {
		c.forEachReplica(topic, func(r Replica) {
			switch {
			case !cs.isLive(r.Broker):
				cs.machines.replicaTo(r, ReplicaDeletionIneligible)
				offline = append(offline, topic)
			case cs.machines.replicas[r] == ReplicaDeletionSuccessful:
			default:
				cs.machines.replicaTo(r, ReplicaDeletionStarted)
				b.addStopReplica(r.Broker, r.TopicPartition, true)
				sent[r.Broker] = append(sent[r.Broker], r.TopicPartition)
			}
		})
	}
	for broker, tps := range sent {
		// The answer is for the broker's incarnation at this epoch, in
		// this term: a later incarnation's start, or a later term, has
		// sent its own StopReplica meanwhile.
		term, epoch := c.term, cs.live[broker].Epoch
		b.stopCallback[broker] = chain(b.stopCallback[broker], func(resp *kmsg.StopReplicaResponse) {
			c.queue.put(event{"TopicDeletionStopReplicaResponseReceived", func(c *Controller) {
				if c.state == nil || c.term != term || c.state.live[broker].Epoch != epoch {
					return
				}
				c.stopReplicaAnswered(broker, tps, resp)
			}})
		})
	}
	if len(offline) > 0 {
		slices.Sort(offline)
		c.markTopicsIneligibleForDeletion(slices.Compact(offline), "offline replicas")
	}
	c.send(b)
}

// stopReplicaAnswered is Kafka's TopicDeletionStopReplicaResponseReceived:
// the replicas the broker deleted are ReplicaDeletionSuccessful, those it
// refused (an error for the request, or for the partition) or left out
// of its answer are ReplicaDeletionIneligible and asked again later.
func (c *Controller) stopReplicaAnswered(broker int32, sent []commitlog.TopicPartition, resp *kmsg.StopReplicaResponse) {
	cs := c.state
	codes := map[commitlog.TopicPartition]int16{}
	for _, p := range resp.Partitions {
		codes[commitlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p.ErrorCode
	}
	var deleted, refused []Replica
	for _, tp := range sent {
		r := Replica{tp, broker}
		if cs.machines.replicas[r] != ReplicaDeletionStarted {
			continue
		}
		code, answered := codes[tp]
		switch {
		case resp.ErrorCode != 0:
			code = resp.ErrorCode
		case !answered:
			code = kerr.UnknownServerError.Code
		}
		if code != 0 {
			c.logger.Warn("StopReplica refused; the replica's deletion will be retried", "replica", r, "err", kerr.ErrorForCode(code))
			refused = append(refused, r)
		} else {
			deleted = append(deleted, r)
		}
	}
	if len(refused) > 0 {
		c.failReplicaDeletion(refused, "StopReplica refused", true)
	}
	if len(deleted) > 0 && c.state == cs {
		c.completeReplicaDeletion(deleted)
	}
}

// retryDeletionLater resumes topics after deletionRetryBackoff, unless the
// term ends first.
func (c *Controller) retryDeletionLater(topics []string) {
	term, termDone := c.term, c.termDone
	if termDone == nil {
		return
	}
	c.wg.Go(func() {
		t := time.NewTimer(deletionRetryBackoff)
		defer t.Stop()
		select {
		case <-c.done:
		case <-termDone:
		case <-t.C:
			c.queue.put(event{"TopicDeletionRetry", func(c *Controller) {
				if c.state != nil && c.term == term {
					c.resumeDeletionForTopics(topics)
				}
			}})
		}
	})
}

// completeDeleteTopic is Kafka's completeDeleteTopic: every replica is
// deleted; the topic's znodes go (the mark last), the controller forgets
// it, and b tells every broker to drop its partitions (leader -2). False
// when the controller failed.
func (c *Controller) completeDeleteTopic(topic string, b *batch) bool {
	cs := c.state
	if err := c.zk.DeleteTopicZNodes(cs.epoch, topic); err != nil {
		c.failed("delete the topic's znodes", err)
		return false
	}
	for _, tp := range c.topicPartitions(topic) {
		b.deleted[tp] = true
	}
	c.forEachReplica(topic, func(r Replica) { cs.machines.replica(r, NonExistentReplica) })
	c.forgetTopic(topic)
	c.logger.Info("topic deleted", "topic", topic)
	return true
}

// topicPartitions lists a topic's partitions, in order.
func (c *Controller) topicPartitions(topic string) []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, p := range slices.Sorted(maps.Keys(c.state.topics[topic].Replicas)) {
		out = append(out, commitlog.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

// forEachReplica calls f for every replica of topic, in order.
func (c *Controller) forEachReplica(topic string, f func(Replica)) {
	for _, tp := range c.topicPartitions(topic) {
		for _, r := range c.state.replicas(tp) {
			f(Replica{tp, r})
		}
	}
}

// allReplicasIn and anyReplicaIn are Kafka's areAllReplicasInState and
// isAnyReplicaInState for a topic.
func (c *Controller) allReplicasIn(topic string, s ReplicaStateName) bool {
	all := true
	c.forEachReplica(topic, func(r Replica) { all = all && c.state.machines.replicas[r] == s })
	return all
}

func (c *Controller) anyReplicaIn(topic string, s ReplicaStateName) bool {
	anyIn := false
	c.forEachReplica(topic, func(r Replica) { anyIn = anyIn || c.state.machines.replicas[r] == s })
	return anyIn
}
