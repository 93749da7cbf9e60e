package server

import (
	"errors"
	"math"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// producerStates holds each partition's producer state (package producer):
// a leader updates it as it appends, a follower as it replicates, and a
// partition's state is first built by reading its log, so that it is the
// same on every replica and survives a restart.
type producerStates struct {
	mu     sync.Mutex
	states map[commitlog.TopicPartition]*producer.State // Protected by mu.
}

// get returns p's state and whether this call built it from the log
// (which then already holds anything just appended).
func (ps *producerStates) get(p *replica.Partition) (*producer.State, bool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if st, ok := ps.states[p.TopicPartition]; ok {
		return st, false, nil
	}
	st := producer.NewState()
	if err := rebuild(st, p.Log); err != nil {
		return nil, false, err
	}
	if ps.states == nil {
		ps.states = map[commitlog.TopicPartition]*producer.State{}
	}
	ps.states[p.TopicPartition] = st
	return st, true, nil
}

// ProducerState returns a partition's producer state, building it from the
// log on first use (and reporting whether this call did).
func (s *Server) ProducerState(p *replica.Partition) (*producer.State, bool, error) {
	return s.producers.get(p)
}

// batchOf is what the producer state keeps of a batch.
func batchOf(h *record.BatchHeader) producer.Batch {
	last := int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1)) // sequences wrap to 0
	return producer.Batch{FirstSeq: h.BaseSequence, LastSeq: last, FirstOffset: h.BaseOffset,
		LastOffset: h.LastOffset(), Timestamp: h.MaxTimestamp}
}

// observe records the idempotent batches among whole batches.
func observe(st *producer.State, batches []byte) {
	for len(batches) > 0 {
		h, err := record.ReadHeader(batches)
		if err != nil || h.Size() > len(batches) {
			return
		}
		if h.ProducerID >= 0 {
			st.Append(h.ProducerID, h.ProducerEpoch, batchOf(&h))
		}
		batches = batches[h.Size():]
	}
}

// rebuild reads every batch of the log into st. Kafka starts from the
// latest producer snapshot; this stage reads the whole log (snapshots:
// part 2's next step).
func rebuild(st *producer.State, l *commitlog.Log) error {
	const chunk = 1 << 20
	for offset := l.StartOffset(); offset < l.EndOffset(); {
		region, err := l.Read(offset, chunk)
		if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
			return nil // retention moved the start meanwhile; what is left was read
		}
		if err != nil {
			return err
		}
		data, err := region.Bytes()
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return nil
		}
		_, size, err := record.PeekSize(data)
		if err != nil {
			return err
		}
		if size > len(data) { // one batch larger than the chunk
			if region, err = l.Read(offset, size); err != nil {
				return err
			}
			if data, err = region.Bytes(); err != nil {
				return err
			}
		}
		next := offset
		for b := data; len(b) > 0; {
			h, err := record.ReadHeader(b)
			if err != nil || h.Size() > len(b) {
				break
			}
			if h.ProducerID >= 0 {
				st.Append(h.ProducerID, h.ProducerEpoch, batchOf(&h))
			}
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
		if next == offset {
			return nil // nothing whole to read
		}
		offset = next
	}
	return nil
}
