package controller

import (
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// clusterState is what the active controller knows of the cluster (Kafka's
// ControllerContext): loaded from ZooKeeper when it is elected, kept up to
// date by its own decisions and the watches. Event goroutine only.
type clusterState struct {
	epoch kafkazk.ControllerEpoch

	live   map[int32]kafkazk.RegisteredBroker                  // registered brokers, by id
	topics map[string]kafkazk.VersionedAssignment              // by topic
	states map[commitlog.TopicPartition]kafkazk.VersionedState // the partition state znodes, as last read or written

	unclean map[string]bool // topics' unclean.leader.election.enable overrides
	// Topic deletion (deletion.go), Kafka's ControllerContext sets of the
	// same names: deleting is topicsToBeDeleted (marked in
	// /admin/delete_topics, until the znodes are gone), deletionStarted
	// topicsWithDeletionStarted (their partitions left the partition
	// state machine), ineligible topicsIneligibleForDeletion (a replica
	// could not be deleted now: its broker is down, or it refused; resumed
	// when the broker starts or a retry is due).
	deleting        map[string]bool
	deletionStarted map[string]bool
	ineligible      map[string]bool

	shuttingDown  map[int32]bool                            // brokers in a controlled shutdown: never elected
	reassignments map[commitlog.TopicPartition]reassignment // moves in progress
	legacy        map[commitlog.TopicPartition]bool         // those asked for in /admin/reassign_partitions
	machines      *machines                                 // the partition and replica state machines
}

func newClusterState(epoch kafkazk.ControllerEpoch, logger *slog.Logger) *clusterState {
	return &clusterState{epoch: epoch, machines: newMachines(logger), live: map[int32]kafkazk.RegisteredBroker{},
		topics: map[string]kafkazk.VersionedAssignment{}, states: map[commitlog.TopicPartition]kafkazk.VersionedState{},
		unclean: map[string]bool{}, deleting: map[string]bool{}, deletionStarted: map[string]bool{}, ineligible: map[string]bool{},
		shuttingDown: map[int32]bool{}, reassignments: map[commitlog.TopicPartition]reassignment{},
		legacy: map[commitlog.TopicPartition]bool{}}
}

// isLive reports whether a broker is registered and not shutting down:
// one that may lead or be in an ISR the controller writes.
func (cs *clusterState) isLive(id int32) bool {
	_, ok := cs.live[id]
	return ok && !cs.shuttingDown[id]
}

// reassigning reports whether a partition is being moved.
func (cs *clusterState) reassigning(tp commitlog.TopicPartition) bool {
	_, ok := cs.reassignments[tp]
	return ok
}

// replicas returns a partition's assigned replicas, in preference order.
func (cs *clusterState) replicas(tp commitlog.TopicPartition) []int32 {
	return cs.topics[tp.Topic].Replicas[tp.Partition]
}

// partitions lists every partition of every topic, in order.
func (cs *clusterState) partitions() []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, topic := range slices.Sorted(maps.Keys(cs.topics)) {
		for _, p := range slices.Sorted(maps.Keys(cs.topics[topic].Replicas)) {
			out = append(out, commitlog.TopicPartition{Topic: topic, Partition: p})
		}
	}
	return out
}

// partitionsOn lists the partitions with a replica on broker id.
func (cs *clusterState) partitionsOn(id int32) []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, tp := range cs.partitions() {
		if slices.Contains(cs.replicas(tp), id) {
			out = append(out, tp)
		}
	}
	return out
}

// liveIDs lists the registered brokers, in order (those shutting down
// included: they still serve until they exit).
func (cs *clusterState) liveIDs() []int32 { return slices.Sorted(maps.Keys(cs.live)) }

// endpoint returns a broker's endpoint on the inter-broker listener
// (Options.InterBrokerListener): where the controller and the other
// brokers reach it, as Kafka's controller uses
// broker.node(interBrokerListenerName). Without that listener (or with no
// listener name set) it falls back to the PLAINTEXT endpoint, then to the
// first one.
func (c *Controller) endpoint(b kafkazk.RegisteredBroker) (kafkazk.Endpoint, bool) {
	return interBrokerEndpoint(b.Endpoints, c.opts.InterBrokerListener)
}

// interBrokerEndpoint picks the endpoint of listener, as endpoint says.
func interBrokerEndpoint(endpoints []kafkazk.Endpoint, listener string) (kafkazk.Endpoint, bool) {
	for _, e := range endpoints {
		if listener != "" && e.Listener == listener {
			return e, true
		}
	}
	for _, e := range endpoints {
		if e.SecurityProtocol == "PLAINTEXT" {
			return e, true
		}
	}
	if len(endpoints) > 0 {
		return endpoints[0], true
	}
	return kafkazk.Endpoint{}, false
}

// InterBrokerAddr is host:port of a registered broker's endpoint on
// listener (see endpoint): where a broker sends the controller its
// ControlledShutdown.
func InterBrokerAddr(endpoints []kafkazk.Endpoint, listener string) (string, bool) {
	e, ok := interBrokerEndpoint(endpoints, listener)
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)), ok
}

// addr is host:port of a broker's endpoint.
func (c *Controller) addr(b kafkazk.RegisteredBroker) string {
	e, _ := c.endpoint(b)
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}
