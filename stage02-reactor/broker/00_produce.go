package broker

import (
	"errors"
	"fmt"
	"time"

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
// acks=1 (stage 03 makes it wait for the high watermark).
//
// The handler holds what every stage shares: the acks check, the
// response's skeleton and the answer as acks asks. The appends, and any
// wait before the answer, belong to an Appender.
var produceAPI = ProduceAPI(nil)

// Appender appends a produce request's batches and says when the request
// may be answered: Kafka's ReplicaManager.appendRecords, which takes the
// timeout, the required acks, the batches by partition and a response
// callback. This stage's single broker appends to its store (StoreAppender)
// and is done at once; stage 03 appends as each partition's leader and, for
// acks=-1, waits for the high watermark; stage 04 parks that wait in a
// purgatory (DelayedProduce) and checks min.insync.replicas.
type Appender interface {
	// AppendRecords appends each partition's batch (parts[i].Request),
	// fills its response entry (parts[i].Response: error code and
	// message, base offset, log start offset), and calls done exactly
	// once, when the request may be answered as acks asks. acks is 0, 1
	// or -1 (the handler refuses the others without calling it).
	//
	// With acks 0 and 1, done is called at once, before AppendRecords
	// returns. With acks=-1 it may be called later, from another
	// goroutine, when the batches are committed, when timeout has passed
	// (REQUEST_TIMED_OUT) or at shutdown (r.Broker.ShuttingDown);
	// AppendRecords must not block for that wait, since it runs on a
	// RequestHandlerPool goroutine (wait with Broker.Delay or in a
	// purgatory). done must be called even if the producer's connection
	// closed (r.Done): the network layer drops the answer.
	//
	// The batches are appended before AppendRecords returns: only the
	// wait may outlive it (the request's bytes are released to the memory
	// pool, queued.max.request.bytes, when the handler returns). The
	// Response entries are the appender's until it calls done; after
	// done the handler encodes them, and the appender must not touch
	// them.
	AppendRecords(r *Request, acks int16, timeout time.Duration, parts []ProducePartition, done func())
}

// ProducePartition is one partition of a produce request: its batch and
// its entry in the response.
type ProducePartition struct {
	Topic    string
	Request  *kmsg.ProduceRequestTopicPartition  // the batch: Partition, Records
	Response *kmsg.ProduceResponseTopicPartition // pre-filled: BaseOffset, LogAppendTime, LogStartOffset -1
}

// ProduceAPI is the Produce handler appending with a; nil means the
// broker's own store (StoreAppender).
func ProduceAPI(a Appender) API {
	return API{Key: 0, MinVersion: 3, MaxVersion: 9, AdvertiseV0: true,
		Handle: func(r *Request) {
			app := a
			if app == nil {
				app = StoreAppender{r.Broker}
			}
			handleProduce(r, app)
		}}
}

// build 02.G: the Produce handler: validate each batch as Kafka's LogValidator does, append, answer per partition
// tests: TestProduceValidationFollowsKafkasLogValidator, TestProduceErrorsAreKafkaCodes, TestMaxTimestampOffsetIsTheNewestRecordWhateverTheProducerWrote, TestCorruptProduceBatchIsRefusedAndNothingAppended, TestFranzGoCompressedBatchesAreValidatedAndStored

func handleProduce(r *Request, a Appender) {
	req := r.Body.(*kmsg.ProduceRequest)
	var refused int16 // as Kafka: an invalid acks refuses every partition, and nothing is appended
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		refused = kerrInvalidRequiredAcks
	}
	// The response's skeleton, and the parts pointing into it: its slices
	// have their final length, so the pointers stay valid while the
	// appender fills the entries.
	resp := kmsg.NewPtrProduceResponse()
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	var parts []ProducePartition
	for i := range req.Topics {
		rt, st := &req.Topics[i], &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp, sp := &rt.Partitions[j], &st.Partitions[j]
			*sp = kmsg.ProduceResponseTopicPartition{Partition: rp.Partition, ErrorCode: refused, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
			parts = append(parts, ProducePartition{Topic: rt.Topic, Request: rp, Response: sp})
		}
	}
	if refused != 0 {
		r.Respond(resp) // acks is not 0: the client waits for this answer
		return
	}
	acks := req.Acks
	a.AppendRecords(r, acks, time.Duration(req.TimeoutMillis)*time.Millisecond, parts, func() {
		for _, p := range parts {
			if appended(p.Response.ErrorCode) { // BytesInPerSec, MessagesInPerSec
				r.Broker.counters.countIn(p.Topic, p.Request.Records)
			}
		}
		// The batches (slices of the request's bytes) are in the log and
		// counted, and the response holds none of them: the frame's
		// buffer may take the connection's next request.
		defer r.recycle()
		if acks != 0 {
			r.Respond(resp)
			return
		}
		for _, p := range parts {
			if p.Response.ErrorCode != 0 {
				r.CloseConnection()
				return
			}
		}
		r.NoResponse()
	})
}

// StoreAppender appends to a single broker's store: every partition is led
// here at epoch 0 and has one replica, so it answers every acks, -1
// included, as soon as the batches are appended.
type StoreAppender struct{ Broker *Broker }

// AppendRecords validates and appends each partition's batch, then calls
// done.
func (a StoreAppender) AppendRecords(_ *Request, _ int16, _ time.Duration, parts []ProducePartition, done func()) {
	for _, p := range parts {
		a.Broker.appendPartition(p.Topic, p.Request, p.Response)
	}
	done()
}

// appendPartition validates and appends one partition's batch.
func (b *Broker) appendPartition(topic string, rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) {
	p, code := b.store.Lookup(topic, rp.Partition)
	if code != 0 {
		sp.ErrorCode = code
		return
	}
	if code, msg := b.ValidateProducedBatch(rp.Records, p.Log.Config().CleanupPolicy.Compact()); code != 0 {
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

// DecompressionFactor bounds how far a produced batch may inflate: its
// records, decompressed, may take at most this many times message.max.bytes.
// Clients build batches of about message.max.bytes before compressing
// (franz-go, librdkafka, Sarama); Java's producer sizes them by estimated
// compressed size, which for very compressible data can be a few times
// more. Past the bound the batch is refused with MESSAGE_TOO_LARGE (a Java
// producer then splits it) rather than spending memory on it.
const DecompressionFactor = 32

// ValidateProducedBatch checks a producer's records as Kafka's LogValidator
// does before anything is appended: exactly one batch, magic 2, offsets
// starting at 0 and a record count that agrees with them, no control or
// transactional batch, at most message.max.bytes, and records that decode,
// compressed batches included (decompressed within DecompressionFactor
// times message.max.bytes), with offset deltas 0, 1, 2, ..., and for a
// compacted log (cleanup.policy=compact) a key on every record: the log
// cleaner keeps the latest record per key, and a record without one could
// only be dropped. The CRC is left to Log.Append, which checks it before
// writing anything (and for followers' appends too), so a produce request
// computes it once. It returns a Kafka error code and a message, or 0, and
// counts what it refuses in the broker's Counters.
//
// A batch it accepts leaves with the largest timestamp of its records as
// its header's max timestamp, as Kafka's LogValidator writes it
// (setMaxTimestamp, the CRC computed again): the producer's own figure is
// not trusted. What reads timestamps batch by batch (the time index,
// ListOffsets by time and MAX_TIMESTAMP, retention.ms, segment.ms) reads
// the header, so a client writing too small a max would make MAX_TIMESTAMP
// answer an older record than the newest, and too large a one make it
// answer none. The common case costs nothing more (the records are
// decoded anyway); a header that is wrong costs a CRC check before it is
// rewritten, so that a damaged batch is not made whole.
func (b *Broker) ValidateProducedBatch(records []byte, compacted bool) (code int16, msg string) {
	code, msg, h, maxTimestamp := validateBatch(records, b.cfg.MessageMaxBytes, compacted, b.txnBatches.Load())
	if code == 0 {
		err := stampMaxTimestamp(records, &h, maxTimestamp)
		if err == nil {
			return 0, ""
		}
		code, msg = kerrCorruptMessage, err.Error() // a bad CRC: counted below
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

// validateBatch checks a produced batch (see ValidateProducedBatch) and
// returns, for one it accepts, its header and the largest timestamp of its
// records: what Kafka's LogValidator writes as the batch's max timestamp.
// A LogAppendTime batch's records carry its header's max, which is
// returned as it is. The header is read once, here, and the records are
// iterated from it (Reader.RecordsOf); the log reads it again when it
// appends, with the CRC, as Kafka's UnifiedLog.analyzeAndValidateRecords
// does after its LogValidator.
func validateBatch(records []byte, maxBytes int32, requireKeys, transactions bool) (code int16, msg string, h record.BatchHeader, maxTimestamp int64) {
	if len(records) > int(maxBytes) {
		return kerrMessageTooLarge, fmt.Sprintf("batch of %d bytes is larger than message.max.bytes (%d)", len(records), maxBytes), h, 0
	}
	var err error
	h, err = record.ReadHeader(records)
	switch {
	case errors.Is(err, record.ErrBadMagic):
		return kerrInvalidRecord, "produce requests from v3 on must hold magic 2 batches: " + err.Error(), h, 0
	case errors.Is(err, record.ErrInvalidRecord):
		return kerrInvalidRecord, err.Error(), h, 0 // a negative count or offset delta
	case err != nil:
		return kerrCorruptMessage, err.Error(), h, 0
	case h.Size() > len(records):
		return kerrCorruptMessage, fmt.Sprintf("batch length says %d bytes, %d present", h.Size(), len(records)), h, 0
	case h.Size() != len(records):
		return kerrInvalidRecord, fmt.Sprintf("produce requests must hold exactly one batch; %d bytes follow it", len(records)-h.Size()), h, 0
	case h.BaseOffset != 0:
		return kerrInvalidRecord, fmt.Sprintf("a producer's batch starts at offset 0, not %d", h.BaseOffset), h, 0
	case h.NumRecords <= 0 || h.NumRecords != h.LastOffsetDelta+1:
		return kerrInvalidRecord, fmt.Sprintf("inconsistent batch: %d records, last offset delta %d", h.NumRecords, h.LastOffsetDelta), h, 0
	case h.Attributes.Control():
		return kerrInvalidRecord, "producers cannot send control batches", h, 0
	case h.Attributes.Transactional() && !transactions:
		return kerrInvalidRecord, "transactional batches are not supported", h, 0
	case h.Attributes.Transactional() && h.ProducerID < 0:
		return kerrInvalidRecord, "a transactional batch needs a producer id", h, 0
	}
	r := record.GetReader(int(maxBytes) * DecompressionFactor)
	defer record.PutReader(r)
	it, err := r.RecordsOf(&h, records)
	switch {
	case errors.Is(err, record.ErrTooLarge):
		return kerrMessageTooLarge, fmt.Sprintf("%v (%d times message.max.bytes)", err, DecompressionFactor), h, 0
	case errors.Is(err, record.ErrInvalidRecord):
		return kerrInvalidRecord, err.Error(), h, 0
	case err != nil: // an unknown codec, or bytes the codec cannot decode
		return kerrCorruptMessage, err.Error(), h, 0
	}
	maxTimestamp = -1 // Kafka's NO_TIMESTAMP, which any record's timestamp beats
	if h.Attributes.LogAppendTime() {
		maxTimestamp = h.MaxTimestamp // what its records carry when read
	}
	for i := int32(0); it.Next(); i++ {
		if d := it.Record().OffsetDelta; d != i {
			return kerrInvalidRecord, fmt.Sprintf("record %d has offset delta %d", i, d), h, 0
		}
		if requireKeys && it.Record().Key == nil {
			return kerrInvalidRecord, fmt.Sprintf("record %d has no key: a compacted topic (cleanup.policy=compact) cannot accept a record without one", i), h, 0
		}
		if !h.Attributes.LogAppendTime() {
			maxTimestamp = max(maxTimestamp, h.FirstTimestamp+it.Record().TimestampDelta)
		}
	}
	if err := it.Err(); err != nil {
		// Undecodable records in a batch whose length and count agree:
		// damage, which the CRC would name; Kafka reports it as corrupt.
		return kerrCorruptMessage, err.Error(), h, 0
	}
	return 0, "", h, maxTimestamp
}

// stampMaxTimestamp writes maxTimestamp into the header h of the one valid
// batch that records holds, with a new CRC, if the header says otherwise.
// The CRC is checked first: a damaged batch keeps its damage, and its
// error (record.ErrCRCMismatch) is returned.
func stampMaxTimestamp(records []byte, h *record.BatchHeader, maxTimestamp int64) error {
	if h.MaxTimestamp == maxTimestamp {
		return nil
	}
	if crc := record.Checksum(records[:h.Size()]); crc != h.CRC {
		return fmt.Errorf("%w: stored %d, computed %d", record.ErrCRCMismatch, h.CRC, crc)
	}
	stamped := *h
	stamped.MaxTimestamp = maxTimestamp
	record.PutHeader(records[:h.Size()], &stamped)
	return nil
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
	case code == kerrCorruptMessage, code == kerrMessageTooLarge, code == kerrRecordListTooLarge:
		b.logger.Debug("refused a produced batch", "partition", tp, "err", err)
	default:
		b.logger.Error("append failed", "partition", tp, "err", err)
	}
	return code
}

// end build
