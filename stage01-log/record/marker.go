package record

import (
	"encoding/binary"
	"fmt"
)

// Transaction markers (KIP-98). When a transaction ends, its coordinator
// has every partition the transaction wrote to append a control batch: one
// record whose key says COMMIT or ABORT and whose value is an
// EndTransactionMarker. A reader that sees it knows that the producer's
// records since its previous marker are committed (readers go on) or
// aborted (read_committed readers skip them). The batch carries the
// producer's id and epoch, no sequence, and both the transactional and the
// control attribute bits:
//
//	control record key    version int16 (0), type int16 (0 ABORT, 1 COMMIT)
//	control record value  version int16 (0), coordinatorEpoch int32
//
// Kafka: ControlRecordType, EndTransactionMarker, MemoryRecords.withEndTransactionMarker.

// ControlType is a control record's type, from its key.
type ControlType int16

// Kafka's control record types.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("control(%d)", int16(t))
}

// Marker is a transaction marker: what a partition is told at the end of a
// producer's transaction.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool  // COMMIT; false: ABORT
	CoordinatorEpoch int32 // the epoch of the coordinator that wrote it (fences an old coordinator)
}

// Type is the marker's control record type.
func (m Marker) Type() ControlType {
	if m.Commit {
		return ControlCommit
	}
	return ControlAbort
}

// ControlAttributes are a marker batch's attributes: transactional and
// control, no compression, CreateTime.
const ControlAttributes = transactionalFlag | controlFlag

// TransactionalFlag is the attribute bit of a batch written in a
// transaction (bit 4), to OR into a batch's attributes.
const TransactionalFlag = transactionalFlag

// AppendMarker appends a marker batch at offset 0, stamped at timestamp
// (ms), with no partition leader epoch: the leader sets the offset and
// its epoch when it appends it, as for a producer's batch.
func AppendMarker(dst []byte, m Marker, timestamp int64) []byte {
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(m.Type()))
	value := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	value = binary.BigEndian.AppendUint32(value, uint32(m.CoordinatorEpoch))
	b := &Batch{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		Attributes:           ControlAttributes,
		FirstTimestamp:       timestamp,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         NoSequence,
		Records:              []Record{{Key: key, Value: value}},
	}
	out, err := AppendBatch(dst, b)
	if err != nil {
		panic(err) // one uncompressed record: cannot fail
	}
	return out
}

// ReadMarker decodes a control batch's marker. h is the batch's header,
// batch the whole batch. A control batch whose key is not version 0 of a
// known type, or whose value is short, is ErrInvalidRecord: Kafka's
// readers skip control records of unknown types, but a COMMIT or ABORT
// key must carry its value.
func ReadMarker(h *BatchHeader, batch []byte) (Marker, error) {
	if !h.Attributes.Control() {
		return Marker{}, fmt.Errorf("%w: batch at offset %d is not a control batch", ErrInvalidRecord, h.BaseOffset)
	}
	if h.NumRecords != 1 || h.Attributes.Codec() != CodecNone {
		return Marker{}, fmt.Errorf("%w: a marker batch holds one uncompressed record, not %d (%s)", ErrInvalidRecord, h.NumRecords, h.Attributes.Codec())
	}
	it := NewRecordIterator(batch[min(len(batch), HeaderSize):], h.NumRecords)
	if !it.Next() {
		if it.Err() != nil {
			return Marker{}, it.Err()
		}
		return Marker{}, fmt.Errorf("%w: marker batch at offset %d has no record", ErrInvalidRecord, h.BaseOffset)
	}
	r := it.Record()
	if len(r.Key) < 4 || binary.BigEndian.Uint16(r.Key) != 0 {
		return Marker{}, fmt.Errorf("%w: control record key %x is not version 0", ErrInvalidRecord, r.Key)
	}
	t := ControlType(binary.BigEndian.Uint16(r.Key[2:]))
	if t != ControlAbort && t != ControlCommit {
		return Marker{}, fmt.Errorf("%w: control record type %d is not a transaction marker", ErrInvalidRecord, int16(t))
	}
	if len(r.Value) < 6 {
		return Marker{}, fmt.Errorf("%w: end transaction marker value of %d bytes (6 needed)", ErrInvalidRecord, len(r.Value))
	}
	return Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, Commit: t == ControlCommit,
		CoordinatorEpoch: int32(binary.BigEndian.Uint32(r.Value[2:]))}, nil
}
