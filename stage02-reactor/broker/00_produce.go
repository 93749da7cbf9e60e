package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Produce (key 0), v3-v9. v3 is the first version that carries magic-2
// batches, the only format this broker stores. v5 adds the log start offset
// to the response, v8 per-record errors and an error message, v9 is
// flexible. Newer versions carry transaction and leader-hint fields this
// broker does not use.
//
// §1.4: acks=0 gets no response at all (on an error the connection is
// closed, the only way to tell the client); acks=1 is answered once the
// leader has appended; with one replica acks=all (-1) is the same as
// acks=1 (stage 04 makes it wait for the ISR).
var produceAPI = API{Key: 0, MinVersion: 3, MaxVersion: 9, Handle: handleProduce}

func handleProduce(r *Request) {
	req := r.Body.(*kmsg.ProduceRequest)
	b := r.Broker
	resp := kmsg.NewPtrProduceResponse()
	failed := false
	validAcks := req.Acks == 0 || req.Acks == 1 || req.Acks == -1

	for _, rt := range req.Topics {
		st := kmsg.ProduceResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.ProduceResponseTopicPartition{Partition: rp.Partition, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
			if !validAcks {
				sp.ErrorCode = kerrInvalidRequiredAcks
			} else {
				b.producePartition(rt.Topic, rp, &sp)
			}
			failed = failed || sp.ErrorCode != 0
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}

	if req.Acks == 0 {
		if failed {
			r.CloseConnection()
		} else {
			r.NoResponse()
		}
		return
	}
	r.Respond(resp)
}

// producePartition validates and appends one partition's batch.
func (b *Broker) producePartition(topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) {
	p, ok := b.store.Partition(topic, rp.Partition)
	if !ok {
		sp.ErrorCode = kerrUnknownTopicOrPartition
		return
	}
	if code, msg := ValidateProducedBatch(rp.Records, b.cfg.MessageMaxBytes); code != 0 {
		sp.ErrorCode, sp.ErrorMessage = code, &msg
		b.logger.Debug("refused produce batch", "partition", p.TopicPartition, "err", msg)
		return
	}
	first, _, err := p.Log.AppendAsLeader(rp.Records, leaderEpoch) // stamped, as a leader does
	if err != nil {
		sp.ErrorCode = AppendErrorCode(err)
		msg := err.Error()
		sp.ErrorMessage = &msg
		b.logger.Error("append failed", "partition", p.TopicPartition, "err", err)
		return
	}
	p.Appended.Notify()
	sp.BaseOffset = first
	sp.LogStartOffset = p.Log.StartOffset()
}

// ValidateProducedBatch checks a producer's records as Kafka's
// LogValidator does before anything is appended: exactly one batch, magic
// 2, offsets starting at 0 and a record count that agrees with them, no
// control or transactional batch, and at most maxBytes. For an uncompressed
// batch every record is decoded and its offset delta checked; compressed
// records are checked once stage 06 has the codecs. The CRC is left to
// Log.Append, which checks it before writing anything (and for followers'
// appends too), so a produce request computes it once. It returns a Kafka
// error code and a message, or 0.
func ValidateProducedBatch(records []byte, maxBytes int32) (code int16, msg string) {
	if len(records) > int(maxBytes) {
		return kerrMessageTooLarge, fmt.Sprintf("batch of %d bytes is larger than message.max.bytes (%d)", len(records), maxBytes)
	}
	h, err := record.ReadHeader(records)
	switch {
	case errors.Is(err, record.ErrBadMagic):
		return kerrInvalidRecord, "produce requests from v3 on must hold magic 2 batches: " + err.Error()
	case err != nil:
		return kerrCorruptMessage, err.Error()
	case h.Size() > len(records):
		return kerrCorruptMessage, fmt.Sprintf("batch length says %d bytes, %d present", h.Size(), len(records))
	case h.Size() != len(records):
		return kerrInvalidRecord, fmt.Sprintf("produce requests must hold exactly one batch; %d bytes follow it", len(records)-h.Size())
	case h.BaseOffset != 0:
		return kerrInvalidRecord, fmt.Sprintf("a producer's batch starts at offset 0, not %d", h.BaseOffset)
	case h.NumRecords <= 0 || h.NumRecords != h.LastOffsetDelta+1:
		return kerrInvalidRecord, fmt.Sprintf("inconsistent batch: %d records, last offset delta %d", h.NumRecords, h.LastOffsetDelta)
	case h.Attributes.Control():
		return kerrInvalidRecord, "producers cannot send control batches"
	case h.Attributes.Transactional():
		return kerrInvalidRecord, "transactional batches are not supported"
	}
	it, err := record.NewIterator(records)
	if errors.Is(err, record.ErrCompressed) {
		return 0, ""
	}
	if err != nil {
		return kerrCorruptMessage, err.Error()
	}
	for i := int32(0); it.Next(); i++ {
		if d := it.Record().OffsetDelta; d != i {
			return kerrInvalidRecord, fmt.Sprintf("record %d has offset delta %d", i, d)
		}
	}
	if err := it.Err(); err != nil {
		// Undecodable records in a batch whose length and count agree:
		// damage, which the CRC would name; Kafka reports it as corrupt.
		return kerrCorruptMessage, err.Error()
	}
	return 0, ""
}

// AppendErrorCode maps an append failure to Kafka's error code.
func AppendErrorCode(err error) int16 {
	switch {
	case record.IsCorrupt(err):
		return kerrCorruptMessage
	case errors.Is(err, commitlog.ErrBatchTooLarge):
		return kerrMessageTooLarge
	case errors.Is(err, commitlog.ErrClosed):
		return kerrUnknownTopicOrPartition // the partition was deleted meanwhile
	}
	return kerrKafkaStorageError
}
