package controller

import (
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// New partitions of an existing topic (CreatePartitions, Kafka's
// PartitionModifications event). Any broker that accepts a
// CreatePartitions request rewrites the topic's assignment in
// /brokers/topics/<topic> with the new partitions added; the controller
// watches each topic's znode (a data watch, armed when the topic is
// loaded and again at each change) and creates the partitions it did not
// know, as it creates a new topic's: NewPartition to OnlinePartition with
// the first live replica as leader and the live replicas as ISR,
// LeaderAndIsr to the replicas, UpdateMetadata to every broker.
//
// The controller's own rewrites of the assignment (a reassignment's
// steps) fire the same watch; it knows their version already and skips
// them. Only new partitions are taken from the znode, as Kafka does: the
// controller's view of the existing ones is its own.

// watchPartitionModifications queues a PartitionModifications event for
// topic when its znode changes.
func (c *Controller) watchPartitionModifications(topic string, ch <-chan zk.Event) {
	if ch == nil {
		return
	}
	c.watch("PartitionModifications("+topic+")", ch, func(c *Controller) { c.partitionModifications(topic) })
}

// partitionModifications is Kafka's processPartitionModifications: read
// the topic's assignment (and watch it again) and create the partitions
// it has that the controller does not know. A topic being deleted gets
// no new partition: its assignment is written back without them.
func (c *Controller) partitionModifications(topic string) {
	cs := c.state
	assignments, watches, err := c.zk.TopicAssignmentsW(topic)
	if err != nil {
		c.failed("read a topic's assignment", err)
		return
	}
	a, exists := assignments[topic]
	if !exists {
		return // deleted: TopicChange forgets it
	}
	c.watchPartitionModifications(topic, watches[topic])
	known, ok := cs.topics[topic]
	if !ok || a.ZkVersion <= known.ZkVersion {
		return // not loaded yet (TopicChange will, whole), or this controller's own write
	}
	var added []commitlog.TopicPartition
	for _, p := range slices.Sorted(maps.Keys(a.Replicas)) {
		if _, ok := known.Replicas[p]; !ok {
			added = append(added, commitlog.TopicPartition{Topic: topic, Partition: p})
		}
	}
	if cs.deleting[topic] {
		if len(added) > 0 {
			c.logger.Warn("not adding partitions to a topic being deleted; restoring its assignment", "topic", topic, "partitions", added)
			v, err := c.zk.SetTopicAssignment(cs.epoch, topic, known.TopicAssignment, a.ZkVersion)
			if err != nil {
				c.failed("restore a topic's assignment", err)
				return
			}
			known.ZkVersion = v
			cs.topics[topic] = known
		}
		return
	}
	next := known.TopicAssignment
	next.Replicas = cloneMap(known.Replicas)
	for _, tp := range added {
		next.Replicas[tp.Partition] = slices.Clone(a.Replicas[tp.Partition])
	}
	cs.topics[topic] = kafkazk.VersionedAssignment{TopicAssignment: next, ZkVersion: a.ZkVersion}
	if len(added) == 0 {
		return
	}
	c.logger.Info("new partitions", "topic", topic, "partitions", added)
	b := newBatch()
	c.electWhereNeeded(added, b)
	c.send(b)
}
