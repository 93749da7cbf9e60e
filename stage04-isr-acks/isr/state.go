package isr

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// PartitionState is what Kafka keeps in a partition's state znode,
// /brokers/topics/<topic>/partitions/<partition>/state: the leader, its
// epoch, the ISR, and the epoch of the controller that last chose the
// leader. The znode's version (not part of the JSON) is the partition
// epoch that LeaderAndIsr carries as zkVersion; every write bumps it.
//
// The fields are in the order Kafka 2.x writes them, so the JSON reads as
// `zookeeper-shell get` shows it on a real cluster:
//
//	{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,1,2]}
type PartitionState struct {
	ControllerEpoch int32   `json:"controller_epoch"`
	Leader          int32   `json:"leader"` // -1: no leader
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

// stateVersion is the only version of the state znode's JSON Kafka writes.
const stateVersion = 1

// Encode returns the znode's JSON.
func (s PartitionState) Encode() []byte {
	s.Version = stateVersion
	if s.ISR == nil {
		s.ISR = []int32{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // ints and a slice of ints always encode
	}
	return b
}

// DecodePartitionState reads a state znode's JSON.
func DecodePartitionState(b []byte) (PartitionState, error) {
	var s PartitionState
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("isr: partition state %q: %w", b, err)
	}
	if s.Version != stateVersion {
		return s, fmt.Errorf("isr: partition state version %d, want %d", s.Version, stateVersion)
	}
	return s, nil
}

// Equal reports whether two states say the same.
func (s PartitionState) Equal(o PartitionState) bool {
	return s.ControllerEpoch == o.ControllerEpoch && s.Leader == o.Leader &&
		s.LeaderEpoch == o.LeaderEpoch && slices.Equal(s.ISR, o.ISR)
}

// StatePath is the state znode's path.
func StatePath(tp commitlog.TopicPartition) string {
	return "/brokers/topics/" + tp.Topic + "/partitions/" + strconv.Itoa(int(tp.Partition)) + "/state"
}

// IsrChangeNotificationPath holds one sequential znode per batch of ISR
// changes, named isr_change_<10-digit sequence>; the controller reads and
// deletes them, and tells every broker the new ISRs with UpdateMetadata.
const (
	IsrChangeNotificationPath   = "/isr_change_notification"
	IsrChangeNotificationPrefix = IsrChangeNotificationPath + "/isr_change_"
)

// IsrChangeNotification is the JSON of one notification znode:
//
//	{"version":1,"partitions":[{"topic":"orders","partition":0}]}
type IsrChangeNotification struct {
	Version    int              `json:"version"`
	Partitions []NotifiedChange `json:"partitions"`
}

// NotifiedChange names one partition in a notification.
type NotifiedChange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// EncodeIsrChange returns a notification's JSON.
func EncodeIsrChange(tps []commitlog.TopicPartition) []byte {
	n := IsrChangeNotification{Version: 1, Partitions: make([]NotifiedChange, 0, len(tps))}
	for _, tp := range tps {
		n.Partitions = append(n.Partitions, NotifiedChange{Topic: tp.Topic, Partition: tp.Partition})
	}
	b, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeIsrChange reads a notification's JSON.
func DecodeIsrChange(b []byte) ([]commitlog.TopicPartition, error) {
	var n IsrChangeNotification
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("isr: change notification %q: %w", b, err)
	}
	out := make([]commitlog.TopicPartition, 0, len(n.Partitions))
	for _, p := range n.Partitions {
		out = append(out, commitlog.TopicPartition{Topic: p.Topic, Partition: p.Partition})
	}
	return out, nil
}

// Errors of a StateStore.
var (
	// ErrBadVersion: a conditional write found another version than the
	// one it expected: someone (the controller) wrote the state since the
	// writer read it. ZooKeeper's BADVERSION.
	ErrBadVersion = errors.New("isr: the partition state has changed since it was read (bad version)")
	// ErrNoNode: the state does not exist (ZooKeeper's NONODE).
	ErrNoNode = errors.New("isr: no such partition state")
)

// StateStore is where a leader records the ISR changes it makes: ZooKeeper
// from stage 05 (Kafka's KafkaZkClient), an in-process MemoryStore in this
// stage. Its methods may block on the network: the Manager calls them
// from its own goroutines (the writer, the notifier) with no lock held,
// never from a request handler.
type StateStore interface {
	// UpdatePartitionState writes tp's state if its version is still
	// expectedVersion, and returns the new version; ErrBadVersion if the
	// version moved (the leader must then stop changing the ISR and wait
	// for the controller's LeaderAndIsr).
	UpdatePartitionState(tp commitlog.TopicPartition, s PartitionState, expectedVersion int32) (newVersion int32, err error)
	// PartitionState reads tp's state and its version: after a write
	// refused for its version, the leader looks at what is there.
	PartitionState(tp commitlog.TopicPartition) (PartitionState, int32, error)
	// NotifyIsrChange records that the ISRs of tps changed, so that the
	// controller tells every broker (clients read the ISR in Metadata).
	NotifyIsrChange(tps []commitlog.TopicPartition) error
}
