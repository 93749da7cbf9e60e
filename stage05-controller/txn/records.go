package txn

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// Topic is the internal topic holding transactional ids' state.
const Topic = "__transaction_state"

// PartitionFor is the partition of __transaction_state that holds a
// transactional id: the group coordinator's formula (Java's hashCode).
func PartitionFor(transactionalID string, partitions int32) int32 {
	return group.PartitionFor(transactionalID, partitions)
}

// State is a transaction's state, with Kafka's numbers (the value
// record's TransactionStatus) and names (DescribeTransactions).
type State int8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6 // only pending: the id is being removed
	PrepareEpochFence State = 7 // only pending, in Kafka; unused here
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// ParseState reads a state's name.
func ParseState(name string) (State, bool) {
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// validPrevious are the states each state may follow (Kafka's
// TransactionState.validPreviousStates).
var validPrevious = map[State][]State{
	Empty:          {Empty, CompleteCommit, CompleteAbort},
	Ongoing:        {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:  {Ongoing},
	PrepareAbort:   {Ongoing, PrepareEpochFence},
	CompleteCommit: {PrepareCommit},
	CompleteAbort:  {PrepareAbort},
	Dead:           {Empty, CompleteAbort, CompleteCommit},
}

// canFollow reports whether next may follow s.
func (s State) canFollow(prev State) bool { return slices.Contains(validPrevious[s], prev) }

// complete is where a prepared state ends, and the marker it writes.
func (s State) complete() (State, bool) {
	switch s {
	case PrepareCommit:
		return CompleteCommit, true
	case PrepareAbort:
		return CompleteAbort, false
	}
	return s, false
}

// Metadata is one transactional id's state, as its record holds it.
type Metadata struct {
	ID         string
	ProducerID int64
	Epoch      int16
	// LastProducerID and LastEpoch are kept in memory only (as in Kafka
	// 3.x): the id and epoch before the last InitProducerId, so that a
	// retry of an InitProducerId that succeeded is answered the same.
	LastProducerID int64
	LastEpoch      int16
	Timeout        time.Duration
	State          State
	Partitions     []commitlog.TopicPartition // sorted; none unless Ongoing or Prepare*
	Start          int64                      // ms: when the transaction began, -1 when none
	Updated        int64                      // ms: the last change
}

// The records of __transaction_state, with Kafka's schemas:
//
//	key TransactionLogKey v0 {transactional id}
//	    -> TransactionLogValue v0 {producer id, producer epoch, timeout,
//	       status, partitions by topic (null when none), last update
//	       time, start time}
//
// A null value (a tombstone) removes the id (transactional.id.expiration.ms).
const (
	keyVersion   = 0
	valueVersion = 0
)

func recordKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

func recordValue(m *Metadata) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch = valueVersion, m.ProducerID, m.Epoch
	v.TimeoutMillis, v.State = int32(m.Timeout.Milliseconds()), kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp, v.StartTimestamp = m.Updated, m.Start
	for _, tp := range m.Partitions {
		if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
			v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
		}
		t := &v.Topics[len(v.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	return v.AppendTo(nil)
}

// recordBatch is one record (value nil: a tombstone) in a batch, as the
// coordinator appends it: uncompressed, not idempotent, CreateTime now.
func recordBatch(key, value []byte, now time.Time) []byte {
	b, err := record.AppendBatch(nil, record.NewBatch(now.UnixMilli(), record.Record{Key: key, Value: value}))
	if err != nil {
		panic(err) // one uncompressed record: cannot fail
	}
	return b
}

// decode reads one record: the id and its state, or nil for a
// tombstone. A key of another version is an error (skipped by loading,
// as Kafka skips it).
func decode(key, value []byte) (string, *Metadata, error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, fmt.Errorf("transaction log key: %w", err)
	}
	if k.Version != keyVersion {
		return "", nil, fmt.Errorf("transaction log key version %d", k.Version)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return "", nil, fmt.Errorf("transaction log value of %q: %w", k.TransactionalID, err)
	}
	m := &Metadata{ID: k.TransactionalID, ProducerID: v.ProducerID, Epoch: v.ProducerEpoch, LastProducerID: -1, LastEpoch: -1,
		Timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, State: State(v.State), Start: v.StartTimestamp, Updated: v.LastUpdateTimestamp}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			m.Partitions = append(m.Partitions, commitlog.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	sortPartitions(m.Partitions)
	return m.ID, m, nil
}

func sortPartitions(ps []commitlog.TopicPartition) {
	slices.SortFunc(ps, func(a, b commitlog.TopicPartition) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
}
