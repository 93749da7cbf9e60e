package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Produce (key 0), v3-v9. v3 is the first version that carries magic-2
// batches, the only format this broker stores. v5 adds the log start offset
// to the response, v8 per-record errors and an error message, v9 is
// flexible. Newer versions carry transaction and leader-hint fields this
// broker does not use.
//
// ApiVersions advertises Produce from v0 nevertheless, the one place where
// it says more than the broker serves. librdkafka (kcat) decides whether it
// may compress from the advertised minimum: against a broker advertising
// v3 it sends gzip, snappy and lz4 batches uncompressed. Kafka 4.0, which
// also stores only magic 2, met this and does the same (KAFKA-18659): v0-v2
// are advertised and refused (the connection closes). No client picks them,
// since each uses the highest version both sides know.
//
// §1.4: acks=0 gets no response at all (on an error the connection is
// closed, the only way to tell the client); acks=1 is answered once the
// leader has appended; with one replica acks=all (-1) is the same as
// acks=1 (stage 04 makes it wait for the ISR).
var produceAPI = ProduceAPI(handleProduce)

// ProduceAPI is the Produce API with its versions and handle: stage 03
// registers its replicated handler through it.
func ProduceAPI(handle func(r *Request)) API {
	return API{Key: 0, MinVersion: 3, MaxVersion: 9, AdvertiseV0: true, Handle: handle}
}

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
	p, code := b.store.Lookup(topic, rp.Partition)
	if code != 0 {
		sp.ErrorCode = code
		return
	}
	if code, msg := b.ValidateProducedBatch(rp.Records); code != 0 {
		sp.ErrorCode, sp.ErrorMessage = code, &msg
		return
	}
	first, _, err := p.Log.AppendAsLeader(rp.Records, leaderEpoch) // stamped, as a leader does
	if err != nil {
		sp.ErrorCode = b.AppendFailed(p.TopicPartition, err)
		msg := err.Error()
		sp.ErrorMessage = &msg
		return
	}
	p.Appended.Notify()
	sp.BaseOffset = first
	sp.LogStartOffset = p.Log.StartOffset()
}

// decompressionFactor bounds how far a produced batch may inflate: its
// records, decompressed, may take at most this many times message.max.bytes.
// Clients build batches of about message.max.bytes before compressing
// (franz-go, librdkafka, Sarama); Java's producer sizes them by estimated
// compressed size, which for very compressible data can be a few times
// more. Past the bound the batch is refused with MESSAGE_TOO_LARGE (a Java
// producer then splits it) rather than spending memory on it.
const decompressionFactor = 32

// ValidateProducedBatch checks a producer's records as Kafka's LogValidator
// does before anything is appended: exactly one batch, magic 2, offsets
// starting at 0 and a record count that agrees with them, no control or
// transactional batch, at most message.max.bytes, and records that decode,
// compressed batches included (decompressed within decompressionFactor
// times message.max.bytes), with offset deltas 0, 1, 2, .... The CRC is left
// to Log.Append, which checks it before writing anything (and for
// followers' appends too), so a produce request computes it once. It
// returns a Kafka error code and a message, or 0, and counts what it
// refuses in the broker's Counters.
func (b *Broker) ValidateProducedBatch(records []byte) (code int16, msg string) {
	code, msg = validateBatch(records, b.cfg.MessageMaxBytes)
	if code == 0 {
		return 0, ""
	}
	// Kafka checks the CRC before anything else, so a batch damaged on its
	// way (a flipped bit in the record count, say) is CORRUPT_MESSAGE,
	// which producers retry, not INVALID_RECORD, which they do not. Here
	// the CRC costs a pass only when the batch is refused anyway.
	if _, err := record.Validate(records); errors.Is(err, record.ErrCRCMismatch) {
		code, msg = kerrCorruptMessage, err.Error()
		b.counters.InvalidMessageCRCRecords.Add(1)
	} else if code == kerrInvalidRecord {
		b.counters.InvalidOffsetOrSequenceRecords.Add(1)
	}
	b.counters.FailedProduceRequests.Add(1)
	b.logger.Debug("refused a produced batch", "code", code, "err", msg)
	return code, msg
}

func validateBatch(records []byte, maxBytes int32) (code int16, msg string) {
	if len(records) > int(maxBytes) {
		return kerrMessageTooLarge, fmt.Sprintf("batch of %d bytes is larger than message.max.bytes (%d)", len(records), maxBytes)
	}
	h, err := record.ReadHeader(records)
	switch {
	case errors.Is(err, record.ErrBadMagic):
		return kerrInvalidRecord, "produce requests from v3 on must hold magic 2 batches: " + err.Error()
	case errors.Is(err, record.ErrInvalidRecord):
		return kerrInvalidRecord, err.Error() // a negative count or offset delta
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
	r := record.GetReader(int(maxBytes) * decompressionFactor)
	defer record.PutReader(r)
	it, err := r.Records(records)
	switch {
	case errors.Is(err, record.ErrTooLarge):
		return kerrMessageTooLarge, fmt.Sprintf("%v (%d times message.max.bytes)", err, decompressionFactor)
	case errors.Is(err, record.ErrInvalidRecord):
		return kerrInvalidRecord, err.Error()
	case err != nil: // an unknown codec, or bytes the codec cannot decode
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

// AppendFailed accounts for a failed append and returns Kafka's error code
// for it. A batch whose CRC does not match is the client's fault (or its
// network's): it is counted (Kafka's InvalidMessageCrcRecordsPerSec) and
// logged at Debug, since a client could otherwise flood the log. Anything
// else is the broker's own failure and is logged as an error.
func (b *Broker) AppendFailed(tp commitlog.TopicPartition, err error) int16 {
	code := store.AppendErrorCode(err)
	b.counters.FailedProduceRequests.Add(1)
	switch {
	case errors.Is(err, record.ErrCRCMismatch):
		b.counters.InvalidMessageCRCRecords.Add(1)
		b.logger.Debug("refused a batch with a bad CRC", "partition", tp, "err", err)
	case code == kerrCorruptMessage, code == kerrMessageTooLarge:
		b.logger.Debug("refused a produced batch", "partition", tp, "err", err)
	default:
		b.logger.Error("append failed", "partition", tp, "err", err)
	}
	return code
}
