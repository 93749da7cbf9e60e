package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
)

// ErrResponseTooLarge: a response would not fit the protocol's 4-byte size
// prefix (2 GiB).
var ErrResponseTooLarge = errors.New("protocol: response larger than 2 GiB")

// Fetch versions FetchResponseSends can encode: Kafka 3.9's (v17), below
// kmsg's limit. From v13 topics are named by their id (KIP-516), v16 adds
// the tagged NodeEndpoints, which we leave out (a client learns a new
// leader from Metadata instead).
const (
	FetchMinVersion = 4
	FetchMaxVersion = 17
)

// FetchResponse is a fetch response whose records are network sends
// (usually file regions of the log) rather than bytes in the message.
type FetchResponse struct {
	ThrottleMillis int32
	ErrorCode      int16 // v7+: a whole-request error (fetch sessions)
	SessionID      int32 // v7+: 0 means no fetch session
	Topics         []FetchTopic
}

// FetchTopic is one topic of a fetch response.
type FetchTopic struct {
	Topic      string   // up to v12
	TopicID    [16]byte // v13+
	Partitions []FetchPartition
}

// FetchPartition is one partition of a fetch response.
type FetchPartition struct {
	Partition            int32
	ErrorCode            int16
	HighWatermark        int64
	LastStableOffset     int64 // v4+
	LogStartOffset       int64 // v5+
	PreferredReadReplica int32 // v11+; -1 for none
	// AbortedTransactions (v4+): for a read_committed fetch, the aborted
	// transactions among the records returned, whose records the consumer
	// drops; nil (sent as an empty list) for other fetches.
	AbortedTransactions []AbortedTxn
	// Records are the record batches: a file region of the log, or bytes.
	// A zero Send means no records (sent as an empty, not null, set).
	Records network.Send
}

// AbortedTxn is an aborted transaction as a fetch response lists it: the
// producer, and the first offset of its records to drop (up to its ABORT
// marker).
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
}

// build 02.F: a fetch response as sends: encoded bytes with the log's file regions between them, for sendfile
// tests: TestFetchResponseSendsDecodeWithKmsgAtEveryVersion, TestFetchResponseOver2GiBIsRefused, TestFetchResponseSendsKeepsRegionsAsRegions

// FetchResponseSends encodes a whole fetch response (size prefix and
// header included) at version h.APIVersion as a list of sends: encoded bytes
// with each partition's records in between, so that the records can go from
// the log file to the socket without being copied into the response. This is
// Kafka's FetchResponse.toSend and its MultiRecordsSend. Kafka's fetch
// format puts the records last in each partition, so each partition adds at
// most one region and one more run of bytes.
//
// A response over 2 GiB cannot be framed: it is ErrResponseTooLarge, and
// the caller's budgets (fetch.max.bytes) should have kept it from arising.
func FetchResponseSends(h Header, r *FetchResponse) ([]network.Send, error) {
	v := h.APIVersion
	flexible := v >= 12
	e := sendEncoder{flexible: flexible}
	e.buf = append(e.buf, 0, 0, 0, 0) // size, filled in at the end
	e.buf = AppendResponseHeader(e.buf, Header{CorrelationID: h.CorrelationID, Flexible: flexible, APIKey: h.APIKey})
	e.int32(r.ThrottleMillis)
	if v >= 7 {
		e.int16(r.ErrorCode)
		e.int32(r.SessionID)
	}
	e.arrayLen(len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		if v >= 13 {
			e.buf = append(e.buf, t.TopicID[:]...)
		} else {
			e.string(t.Topic)
		}
		e.arrayLen(len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			e.int32(p.Partition)
			e.int16(p.ErrorCode)
			e.int64(p.HighWatermark)
			e.int64(p.LastStableOffset)
			if v >= 5 {
				e.int64(p.LogStartOffset)
			}
			e.arrayLen(len(p.AbortedTransactions))
			for _, a := range p.AbortedTransactions {
				e.int64(a.ProducerID)
				e.int64(a.FirstOffset)
				e.tags()
			}
			if v >= 11 {
				e.int32(p.PreferredReadReplica)
			}
			e.records(p.Records)
			e.tags()
		}
		e.tags()
	}
	e.tags()
	return e.finish()
}

// sendEncoder appends Kafka's primitive types to a run of bytes, and cuts
// the run to insert a send for a records field.
type sendEncoder struct {
	flexible bool
	buf      []byte         // the current run of bytes
	sends    []network.Send // finished runs and records, in order
	size     int64          // bytes in sends
}

func (e *sendEncoder) int16(v int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *sendEncoder) int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *sendEncoder) int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

// arrayLen writes an array length: int32, or uvarint n+1 when compact.
func (e *sendEncoder) arrayLen(n int) {
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(n)+1)
	} else {
		e.int32(int32(n))
	}
}

func (e *sendEncoder) string(s string) {
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(len(s))+1)
	} else {
		e.int16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

// tags writes an empty tagged-field section in flexible versions.
func (e *sendEncoder) tags() {
	if e.flexible {
		e.buf = append(e.buf, 0)
	}
}

// records writes a records field's length, then the records as their own
// send, and starts a new run of bytes after them.
func (e *sendEncoder) records(s network.Send) {
	n := int64(len(s.Bytes))
	if s.File != nil {
		n = s.Len
	}
	if e.flexible {
		e.buf = binary.AppendUvarint(e.buf, uint64(n)+1)
	} else {
		e.int32(int32(n))
	}
	if n == 0 {
		return
	}
	e.cut()
	e.sends = append(e.sends, s)
	e.size += n
}

// cut ends the current run of bytes.
func (e *sendEncoder) cut() {
	if len(e.buf) > 0 {
		e.sends = append(e.sends, network.BytesSend(e.buf))
		e.size += int64(len(e.buf))
		e.buf = nil
	}
}

// finish ends the last run and fills in the size prefix.
func (e *sendEncoder) finish() ([]network.Send, error) {
	e.cut()
	if e.size-4 > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes", ErrResponseTooLarge, e.size-4)
	}
	binary.BigEndian.PutUint32(e.sends[0].Bytes, uint32(e.size-4))
	return e.sends, nil
}

// end build
