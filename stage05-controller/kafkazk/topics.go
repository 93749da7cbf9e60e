package kafkazk

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// pipelined is how many requests a bulk operation keeps in flight on the
// session at once. go-zookeeper pipelines concurrent requests on its one
// connection, so a controller that writes thousands of partition states
// waits for one round trip per pipelined batch, not per znode (what Kafka
// 1.1 gained with ZooKeeper's async API).
const pipelined = 128

// parallel runs f(0) … f(n-1) with up to pipelined calls at once and
// returns their errors, joined.
func parallel(n int, f func(i int) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, pipelined)
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CreateTopic writes a new topic's config overrides and then its
// assignment, as Kafka's AdminZkClient does for CreateTopics on any
// broker; the controller sees the new /brokers/topics child and creates
// the partitions. ErrTopicExists if the assignment exists, checked first,
// so that a refused create leaves the existing topic's config alone.
func (c *Client) CreateTopic(topic string, a TopicAssignment, config map[string]string) error {
	exists, _, err := c.conn.Exists(TopicPath(topic))
	if err != nil {
		return fmt.Errorf("kafkazk: read %s: %w", TopicPath(topic), err)
	}
	if exists {
		return fmt.Errorf("%w: %s", ErrTopicExists, topic)
	}
	if err := c.setTopicConfig(topic, config, false); err != nil {
		return err
	}
	_, err = c.conn.Create(TopicPath(topic), a.Encode(), 0, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("%w: %s", ErrTopicExists, topic)
	}
	if err != nil {
		return fmt.Errorf("kafkazk: create %s: %w", TopicPath(topic), err)
	}
	return nil
}

// CheckTopicAssignment reports whether a's assignment znode fits in one
// ZooKeeper request (JuteMaxBuffer), as CreateTopic or AddPartitions
// would write it for topic: nil, or an error wrapping ErrRequestTooLarge
// that gives the size. About 88,000 partitions of one replica fit (12
// bytes each), 66,000 of three. CreateTopics and CreatePartitions ask before they
// write (and for validate_only), so that the client learns why.
func (c *Client) CheckTopicAssignment(topic string, a TopicAssignment) error {
	n := requestBytes(&zk.CreateRequest{Path: c.conn.abs(TopicPath(topic)), Data: a.Encode(), Acl: acl})
	if err := checkSize(n); err != nil {
		return fmt.Errorf("the assignment of topic %q (%d partitions): %w", topic, len(a.Replicas), err)
	}
	return nil
}

// CheckPartitionCount is CheckTopicAssignment's cheap first step, before
// an assignment is drawn: it refuses a count of partitions whose
// assignment cannot fit whatever the broker ids, each partition taking at
// least "0":[1], (six bytes and two a replica), so that a request for two
// billion partitions is refused before two billion are assigned.
func CheckPartitionCount(partitions, replicationFactor int) error {
	least := partitions * (6 + 2*max(replicationFactor, 1))
	if partitions > JuteMaxBuffer || least > JuteMaxBuffer {
		return fmt.Errorf("the assignment of %d partitions: %w: it would be more than %d bytes", partitions, ErrRequestTooLarge, JuteMaxBuffer)
	}
	return nil
}

// SetTopicConfig replaces a topic's config overrides and notifies every
// broker through /config/changes (Kafka's AdminZkClient.changeTopicConfig).
func (c *Client) SetTopicConfig(topic string, config map[string]string) error {
	return c.setTopicConfig(topic, config, true)
}

func (c *Client) setTopicConfig(topic string, config map[string]string, notify bool) error {
	return c.setEntityConfig(ConfigEntityTopics, topic, config, notify)
}

// The config entity types this package writes: the children of /config
// and the first part of a notification's entity path ("topics/orders",
// "brokers/1", "brokers/<default>").
const (
	ConfigEntityTopics  = "topics"
	ConfigEntityBrokers = "brokers"
	// ConfigBrokerDefault names the cluster-wide dynamic broker config,
	// /config/brokers/<default> (Kafka's ZooKeeperInternals.DEFAULT_STRING).
	ConfigBrokerDefault = "<default>"
)

// setEntityConfig writes /config/<entityType>/<name> in Kafka's JSON and,
// with notify, a /config/changes/config_change_<seq> naming it, as
// AdminZkClient.changeEntityConfig does: the znode first, so a broker
// that reads the notification reads the new config.
func (c *Client) setEntityConfig(entityType, name string, config map[string]string, notify bool) error {
	p := ConfigPath + "/" + entityType + "/" + name
	data := EncodeTopicConfig(config)
	if _, err := c.conn.Set(p, data, -1); errors.Is(err, zk.ErrNoNode) {
		if _, err = c.conn.Create(p, data, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("kafkazk: create %s: %w", p, err)
		}
	} else if err != nil {
		return fmt.Errorf("kafkazk: write %s: %w", p, err)
	}
	if !notify {
		return nil
	}
	if _, err := c.conn.Create(configChangePrefix, EncodeConfigChange(entityType+"/"+name), zk.FlagSequence, acl); err != nil {
		return fmt.Errorf("kafkazk: notify %s: %w", ConfigChangesPath, err)
	}
	return nil
}

// entityConfig reads /config/<entityType>/<name> (empty if it is missing).
func (c *Client) entityConfig(entityType, name string) (map[string]string, error) {
	p := ConfigPath + "/" + entityType + "/" + name
	data, _, err := c.conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) || (err == nil && len(data) == 0) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kafkazk: read %s: %w", p, err)
	}
	return DecodeTopicConfig(data)
}

// TopicConfig reads a topic's config overrides (none if it has none).
func (c *Client) TopicConfig(topic string) (map[string]string, error) {
	return c.entityConfig(ConfigEntityTopics, topic)
}

// SetBrokerConfig replaces the dynamic broker config of broker ("1") or,
// with ConfigBrokerDefault, of every broker, in /config/brokers, and
// notifies every broker (Kafka's AdminZkClient.changeBrokerConfig). The
// JSON is a topic config's: {"version":1,"config":{...}}.
func (c *Client) SetBrokerConfig(broker string, config map[string]string) error {
	return c.setEntityConfig(ConfigEntityBrokers, broker, config, true)
}

// BrokerConfig reads the dynamic broker config of broker ("1" or
// ConfigBrokerDefault); empty if none was set.
func (c *Client) BrokerConfig(broker string) (map[string]string, error) {
	return c.entityConfig(ConfigEntityBrokers, broker)
}

// TopicExists reports whether /brokers/topics/<topic> exists.
func (c *Client) TopicExists(topic string) (bool, error) {
	ok, _, err := c.conn.Exists(TopicPath(topic))
	if err != nil {
		return false, fmt.Errorf("kafkazk: exists %s: %w", TopicPath(topic), err)
	}
	return ok, nil
}

// ConfigChangesW lists /config/changes' notifications, with a watch for
// the next.
func (c *Client) ConfigChangesW() ([]string, <-chan zk.Event, error) {
	names, _, ch, err := c.conn.ChildrenW(ConfigChangesPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", ConfigChangesPath, err)
	}
	slices.Sort(names)
	return names, ch, nil
}

// ConfigChange reads the notification /config/changes/<name>: the entity
// whose config changed ("topics/orders"), as Kafka's
// ZkNodeChangeNotificationListener reads each new child.
func (c *Client) ConfigChange(name string) (entity string, err error) {
	p := ConfigChangesPath + "/" + name
	data, _, err := c.conn.Get(p)
	if err != nil {
		return "", fmt.Errorf("kafkazk: read %s: %w", p, err)
	}
	return DecodeConfigChange(data)
}

// Topics lists the topics.
func (c *Client) Topics() ([]string, error) {
	names, _, err := c.conn.Children(TopicsPath)
	if err != nil {
		return nil, fmt.Errorf("kafkazk: list %s: %w", TopicsPath, err)
	}
	slices.Sort(names)
	return names, nil
}

// TopicsW is Topics with a watch that fires when a topic is created or
// deleted.
func (c *Client) TopicsW() ([]string, <-chan zk.Event, error) {
	names, _, ch, err := c.conn.ChildrenW(TopicsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", TopicsPath, err)
	}
	slices.Sort(names)
	return names, ch, nil
}

// VersionedAssignment is a topic's assignment and its znode's version.
type VersionedAssignment struct {
	TopicAssignment
	ZkVersion int32
}

// TopicAssignments reads the assignments of topics; a topic that does not
// exist is left out.
func (c *Client) TopicAssignments(topics ...string) (map[string]VersionedAssignment, error) {
	out, _, err := c.topicAssignments(topics, false)
	return out, err
}

// TopicAssignmentsW is TopicAssignments with a data watch on each
// existing topic's znode, which fires when its assignment is rewritten
// (new partitions, a reassignment's steps) or the topic is deleted: the
// controller's PartitionModifications watch.
func (c *Client) TopicAssignmentsW(topics ...string) (map[string]VersionedAssignment, map[string]<-chan zk.Event, error) {
	return c.topicAssignments(topics, true)
}

func (c *Client) topicAssignments(topics []string, watch bool) (map[string]VersionedAssignment, map[string]<-chan zk.Event, error) {
	var mu sync.Mutex
	out := make(map[string]VersionedAssignment, len(topics))
	watches := map[string]<-chan zk.Event{}
	err := parallel(len(topics), func(i int) error {
		var (
			data []byte
			stat *zk.Stat
			ch   <-chan zk.Event
			err  error
		)
		if watch {
			data, stat, ch, err = c.conn.GetW(TopicPath(topics[i]))
		} else {
			data, stat, err = c.conn.Get(TopicPath(topics[i]))
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kafkazk: read %s: %w", TopicPath(topics[i]), err)
		}
		a, err := DecodeTopicAssignment(topics[i], data)
		if err != nil {
			return err
		}
		mu.Lock()
		out[topics[i]] = VersionedAssignment{a, stat.Version}
		if watch {
			watches[topics[i]] = ch
		}
		mu.Unlock()
		return nil
	})
	return out, watches, err
}

// AddPartitions rewrites a topic's assignment with new partitions added,
// as Kafka's AdminZkClient.addPartitions does for CreatePartitions on any
// broker: an admin's write, not the controller's (so not fenced by its
// epoch), which the controller notices through its data watch on the
// topic's znode. It is conditional on the version the caller read, so
// that it never overwrites a change made since (a reassignment's step, a
// concurrent CreatePartitions): zk.ErrBadVersion, wrapped, then.
func (c *Client) AddPartitions(topic string, a TopicAssignment, version int32) error {
	if _, err := c.conn.Set(TopicPath(topic), a.Encode(), version); err != nil {
		return fmt.Errorf("kafkazk: write %s: %w", TopicPath(topic), err)
	}
	return nil
}

// SetTopicAssignment rewrites a topic's assignment (a reassignment's
// steps, new partitions), fenced and conditional on its version.
func (c *Client) SetTopicAssignment(e ControllerEpoch, topic string, a TopicAssignment, version int32) (int32, error) {
	resp, err := c.fenced(e, &zk.SetDataRequest{Path: TopicPath(topic), Data: a.Encode(), Version: version})
	if err != nil {
		return 0, err
	}
	return resp[0].Stat.Version, nil
}

// VersionedState is a partition's state and its znode's version, the
// partition epoch LeaderAndIsr carries as zkVersion.
type VersionedState struct {
	isr.PartitionState
	ZkVersion int32
}

// batchSize is how many partition states go in one multi: a controller
// that moves thousands of leaderships writes them a hundred to a request
// (ten times faster than one each on the workbook's machines:
// BenchmarkZooKeeperStateWrites), falling back to one each for a batch
// that one stale version failed.
const batchSize = 100

// chunks splits partitions into batches of n.
func chunks(tps []commitlog.TopicPartition, n int) [][]commitlog.TopicPartition {
	var out [][]commitlog.TopicPartition
	for len(tps) > n {
		out = append(out, tps[:n])
		tps = tps[n:]
	}
	if len(tps) > 0 {
		out = append(out, tps)
	}
	return out
}

// CreatePartitionStates creates new partitions' state znodes (and the
// znodes above them), fenced by the controller's epoch, in batches. Kafka's
// controller does this when a partition goes from NewPartition to
// OnlinePartition. A state that exists is an error (zk.ErrNodeExists);
// the others are created.
func (c *Client) CreatePartitionStates(e ControllerEpoch, states map[commitlog.TopicPartition]isr.PartitionState) error {
	tps := slices.SortedFunc(maps.Keys(states), commitlog.TopicPartition.Compare)
	topics := map[string]bool{}
	for _, tp := range tps {
		topics[tp.Topic] = true
	}
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		if err := c.fencedCreateIfMissing(e, TopicPartitionsPath(topic)); err != nil {
			return err
		}
	}
	batches := chunks(tps, batchSize/2) // two creates a partition
	return parallel(len(batches), func(i int) error {
		var ops []any
		for _, tp := range batches[i] {
			ops = append(ops, &zk.CreateRequest{Path: TopicPartitionPath(tp), Acl: acl},
				&zk.CreateRequest{Path: PartitionStatePath(tp), Data: states[tp].Encode(), Acl: acl})
		}
		_, err := c.fenced(e, ops...)
		if err == nil || errors.Is(err, ErrControllerMoved) {
			return err
		}
		// Something exists already (an earlier controller got halfway):
		// one by one.
		var errs []error
		for _, tp := range batches[i] {
			if err := c.fencedCreateIfMissing(e, TopicPartitionPath(tp)); err != nil {
				return err
			}
			if _, err := c.fenced(e, &zk.CreateRequest{Path: PartitionStatePath(tp), Data: states[tp].Encode(), Acl: acl}); err != nil {
				if errors.Is(err, ErrControllerMoved) {
					return err
				}
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// fencedCreateIfMissing creates an empty persistent znode, fenced; one
// that exists is fine.
func (c *Client) fencedCreateIfMissing(e ControllerEpoch, p string) error {
	_, err := c.fenced(e, &zk.CreateRequest{Path: p, Acl: acl})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

// UpdatePartitionStates writes partition states as the controller
// (leader elections, ISR changes for dead brokers), fenced and conditional
// on the version given, a hundred to a multi. It returns the new versions
// of those written and the error of each that was not (zk.ErrBadVersion:
// the leader changed the ISR since; re-read and decide again). A fenced
// refusal fails the whole call with ErrControllerMoved.
func (c *Client) UpdatePartitionStates(e ControllerEpoch, states map[commitlog.TopicPartition]VersionedState) (map[commitlog.TopicPartition]int32, map[commitlog.TopicPartition]error, error) {
	batches := chunks(slices.SortedFunc(maps.Keys(states), commitlog.TopicPartition.Compare), batchSize)
	var mu sync.Mutex
	written := make(map[commitlog.TopicPartition]int32, len(states))
	failed := map[commitlog.TopicPartition]error{}
	set := func(tp commitlog.TopicPartition) *zk.SetDataRequest {
		s := states[tp]
		return &zk.SetDataRequest{Path: PartitionStatePath(tp), Data: s.Encode(), Version: s.ZkVersion}
	}
	err := parallel(len(batches), func(i int) error {
		ops := make([]any, len(batches[i]))
		for j, tp := range batches[i] {
			ops[j] = set(tp)
		}
		resp, err := c.fenced(e, ops...)
		if errors.Is(err, ErrControllerMoved) {
			return err
		}
		if err == nil {
			mu.Lock()
			for j, tp := range batches[i] {
				written[tp] = resp[j].Stat.Version
			}
			mu.Unlock()
			return nil
		}
		// One state moved under the controller: one by one, to learn which.
		for _, tp := range batches[i] {
			resp, err := c.fenced(e, set(tp))
			mu.Lock()
			switch {
			case errors.Is(err, ErrControllerMoved):
				mu.Unlock()
				return err
			case err != nil:
				failed[tp] = err
			default:
				written[tp] = resp[0].Stat.Version
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return written, failed, nil
}

// PartitionStates reads partitions' states; one without a state znode is
// left out.
func (c *Client) PartitionStates(tps ...commitlog.TopicPartition) (map[commitlog.TopicPartition]VersionedState, error) {
	var mu sync.Mutex
	out := make(map[commitlog.TopicPartition]VersionedState, len(tps))
	err := parallel(len(tps), func(i int) error {
		s, v, err := c.PartitionState(tps[i])
		if errors.Is(err, isr.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		mu.Lock()
		out[tps[i]] = VersionedState{s, v}
		mu.Unlock()
		return nil
	})
	return out, err
}

// The three methods of stage 04's isr.StateStore: a leader's ISR changes,
// written to ZooKeeper as Kafka 2.x leaders wrote them (before KIP-497's
// AlterIsr moved the write to the controller).
var _ isr.StateStore = (*Client)(nil)

// UpdatePartitionState writes a leader's new ISR if the state znode is
// still at expectedVersion: not fenced by the controller's epoch (the
// leader is not the controller), but by the znode's own version, which
// the controller bumps whenever it decides.
func (c *Client) UpdatePartitionState(tp commitlog.TopicPartition, s isr.PartitionState, expectedVersion int32) (int32, error) {
	stat, err := c.conn.Set(PartitionStatePath(tp), s.Encode(), expectedVersion)
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		return 0, fmt.Errorf("%w: %s at version %d", isr.ErrBadVersion, PartitionStatePath(tp), expectedVersion)
	case errors.Is(err, zk.ErrNoNode):
		return 0, fmt.Errorf("%w: %s", isr.ErrNoNode, PartitionStatePath(tp))
	case err != nil:
		return 0, fmt.Errorf("kafkazk: write %s: %w", PartitionStatePath(tp), err)
	}
	return stat.Version, nil
}

// PartitionState reads a partition's state and its version.
func (c *Client) PartitionState(tp commitlog.TopicPartition) (isr.PartitionState, int32, error) {
	data, stat, err := c.conn.Get(PartitionStatePath(tp))
	if errors.Is(err, zk.ErrNoNode) {
		return isr.PartitionState{}, 0, fmt.Errorf("%w: %s", isr.ErrNoNode, PartitionStatePath(tp))
	}
	if err != nil {
		return isr.PartitionState{}, 0, fmt.Errorf("kafkazk: read %s: %w", PartitionStatePath(tp), err)
	}
	s, err := isr.DecodePartitionState(data)
	return s, stat.Version, err
}

// NotifyIsrChange writes a sequential /isr_change_notification/isr_change_
// znode naming tps, for the controller to read.
func (c *Client) NotifyIsrChange(tps []commitlog.TopicPartition) error {
	if _, err := c.conn.Create(isrChangePrefix, isr.EncodeIsrChange(tps), zk.FlagSequence, acl); err != nil {
		return fmt.Errorf("kafkazk: notify an ISR change: %w", err)
	}
	return nil
}

// IsrChangeNotificationsW lists the pending ISR change notifications, in
// order, with a watch for the next.
func (c *Client) IsrChangeNotificationsW() ([]string, <-chan zk.Event, error) {
	names, _, ch, err := c.conn.ChildrenW(IsrChangeNotificationPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", IsrChangeNotificationPath, err)
	}
	slices.Sort(names)
	return names, ch, nil
}

// ConsumeIsrChanges reads the named notifications (pipelined) and deletes
// them (fenced, a hundred to a multi), returning the partitions they name,
// each once.
func (c *Client) ConsumeIsrChanges(e ControllerEpoch, names []string) ([]commitlog.TopicPartition, error) {
	found := make([][]commitlog.TopicPartition, len(names))
	err := parallel(len(names), func(i int) error {
		p := path.Join(IsrChangeNotificationPath, names[i])
		data, _, err := c.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kafkazk: read %s: %w", p, err)
		}
		found[i], _ = isr.DecodeIsrChange(data) // a notification that does not decode names nothing
		return nil
	})
	if err != nil {
		return nil, err
	}
	for len(names) > 0 {
		n := min(len(names), batchSize)
		ops := make([]any, n)
		for i, name := range names[:n] {
			ops[i] = &zk.DeleteRequest{Path: path.Join(IsrChangeNotificationPath, name), Version: -1}
		}
		if _, err := c.fenced(e, ops...); err != nil {
			if errors.Is(err, ErrControllerMoved) {
				return nil, err
			}
			for _, op := range ops { // one was gone already: one by one
				if _, err := c.fenced(e, op); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return nil, err
				}
			}
		}
		names = names[n:]
	}
	seen := map[commitlog.TopicPartition]bool{}
	var out []commitlog.TopicPartition
	for _, tps := range found {
		for _, tp := range tps {
			if !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	return out, nil
}

// TopicQueuedForDeletion reports whether /admin/delete_topics/<topic>
// exists: the topic is being deleted.
func (c *Client) TopicQueuedForDeletion(topic string) (bool, error) {
	ok, _, err := c.conn.Exists(DeleteTopicPath(topic))
	if err != nil {
		return false, fmt.Errorf("kafkazk: exists %s: %w", DeleteTopicPath(topic), err)
	}
	return ok, nil
}

// MarkTopicForDeletion asks the controller to delete a topic
// (/admin/delete_topics/<topic>, empty, as Kafka's AdminZkClient writes it).
func (c *Client) MarkTopicForDeletion(topic string) error {
	_, err := c.conn.Create(DeleteTopicPath(topic), nil, 0, acl)
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("kafkazk: create %s: %w", DeleteTopicPath(topic), err)
	}
	return nil
}

// TopicsToDeleteW lists the topics marked for deletion, with a watch.
func (c *Client) TopicsToDeleteW() ([]string, <-chan zk.Event, error) {
	names, _, ch, err := c.conn.ChildrenW(DeleteTopicsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", DeleteTopicsPath, err)
	}
	slices.Sort(names)
	return names, ch, nil
}

// DeleteTopicZNodes removes a deleted topic's znodes, fenced: its
// partitions' states, its assignment, its config and its deletion mark,
// children before parents (Kafka's deleteTopicZNode and friends).
func (c *Client) DeleteTopicZNodes(e ControllerEpoch, topic string) error {
	for _, p := range []string{TopicPath(topic), ConfigTopicPath(topic), DeleteTopicPath(topic)} {
		if err := c.deleteRecursive(e, p); err != nil {
			return err
		}
	}
	return nil
}

// deleteRecursive deletes a znode and everything under it, fenced.
func (c *Client) deleteRecursive(e ControllerEpoch, p string) error {
	children, _, err := c.conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kafkazk: list %s: %w", p, err)
	}
	for _, child := range children {
		if err := c.deleteRecursive(e, p+"/"+child); err != nil {
			return err
		}
	}
	if _, err := c.fenced(e, &zk.DeleteRequest{Path: p, Version: -1}); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}

// ProducerIDBlock is /latest_producer_id_block as stage 04's producer id
// allocator reads and writes it (producer.Node), with conditional writes.
func (c *Client) ProducerIDBlock() producer.Node { return idBlockNode{c} }

type idBlockNode struct{ c *Client }

func (n idBlockNode) Get() ([]byte, int32, bool, error) {
	data, stat, err := n.c.conn.Get(ProducerIDBlockPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("kafkazk: read %s: %w", ProducerIDBlockPath, err)
	}
	return data, stat.Version, true, nil
}

func (n idBlockNode) Create(data []byte) error {
	_, err := n.c.conn.Create(ProducerIDBlockPath, data, 0, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("%w: %s was created meanwhile", producer.ErrConflict, ProducerIDBlockPath)
	}
	return err
}

func (n idBlockNode) Set(data []byte, version int32) error {
	_, err := n.c.conn.Set(ProducerIDBlockPath, data, version)
	if errors.Is(err, zk.ErrBadVersion) {
		return fmt.Errorf("%w: %s moved past version %d", producer.ErrConflict, ProducerIDBlockPath, version)
	}
	return err
}

// ReassignmentsW reads /admin/reassign_partitions (the reassignment tool's
// request before KIP-455's AlterPartitionReassignments; none: nil) and
// watches it for creation or deletion.
func (c *Client) ReassignmentsW() ([]Reassignment, <-chan zk.Event, error) {
	exists, _, ch, err := c.conn.ExistsW(ReassignPartitionsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: watch %s: %w", ReassignPartitionsPath, err)
	}
	if !exists {
		return nil, ch, nil
	}
	data, _, err := c.conn.Get(ReassignPartitionsPath)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, ch, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafkazk: read %s: %w", ReassignPartitionsPath, err)
	}
	rs, err := DecodeReassignments(data)
	return rs, ch, err
}

// RequestReassignments writes /admin/reassign_partitions, as Kafka's
// kafka-reassign-partitions.sh did before KIP-455; ErrNodeExists while a
// previous request is in progress.
func (c *Client) RequestReassignments(rs []Reassignment) error {
	if _, err := c.conn.Create(ReassignPartitionsPath, EncodeReassignments(rs), 0, acl); err != nil {
		return fmt.Errorf("kafkazk: create %s: %w", ReassignPartitionsPath, err)
	}
	return nil
}

// DeleteReassignments removes /admin/reassign_partitions once every move
// it asked for is complete, fenced.
func (c *Client) DeleteReassignments(e ControllerEpoch) error {
	if _, err := c.fenced(e, &zk.DeleteRequest{Path: ReassignPartitionsPath, Version: -1}); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return nil
}
