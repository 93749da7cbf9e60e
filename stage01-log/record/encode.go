package record

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// build 01.C: write a record batch: records, header, CRC
// tests: TestGoldenBatchBytes, TestPutHeaderBuildsABatchInPlace, TestAppendBatchRefusesWhatItCannotEncode, TestLastOffsetDeltaOverrideAndEmptyBatch, TestEncodingMatchesKmsg

// Batch is a batch to encode: the header fields a producer chooses, and the
// records. AppendBatch derives the rest (length, counts, max timestamp, CRC).
type Batch struct {
	BaseOffset           int64      // usually 0 from a producer; the log assigns the real one
	PartitionLeaderEpoch int32      // NoPartitionLeaderEpoch from a producer
	Attributes           Attributes // the codec bits choose the compression of the records
	FirstTimestamp       int64      // ms since the epoch; records carry deltas from it
	ProducerID           int64      // NoProducerID unless idempotent
	ProducerEpoch        int16      // NoProducerEpoch unless idempotent
	BaseSequence         int32      // NoSequence unless idempotent
	Records              []Record   // at least one; OffsetDelta is normally the index
	// LastOffsetDelta, when larger than every record's OffsetDelta, is
	// written instead of the largest one: a batch the log cleaner rewrote
	// keeps its original last offset (Kafka's overrideLastOffset), so that
	// the producer's last sequence number stays where it was.
	LastOffsetDelta int32
}

// NewBatch returns a batch with the producer defaults: no leader epoch, no
// idempotence, CreateTime timestamps starting at firstTimestamp.
func NewBatch(firstTimestamp int64, records ...Record) *Batch {
	return &Batch{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		FirstTimestamp:       firstTimestamp,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
		Records:              records,
	}
}

// AppendBatch appends the encoding of b to dst. lastOffsetDelta is the
// largest OffsetDelta, recordsCount the number of records, maxTimestamp the
// largest record timestamp, and the CRC covers the result as Validate checks.
// When the attributes name a codec, the records are compressed with it.
func AppendBatch(dst []byte, b *Batch) ([]byte, error) {
	if len(b.Records) == 0 {
		return dst, fmt.Errorf("%w: no records", ErrInvalidArgument)
	}
	codec := b.Attributes.Codec()
	if !codec.Known() {
		return dst, fmt.Errorf("%w: %w: %d", ErrInvalidArgument, ErrUnknownCodec, int8(codec))
	}
	size := HeaderSize
	lastOffsetDelta := int32(0)
	maxTimestamp := b.FirstTimestamp
	for i := range b.Records {
		r := &b.Records[i]
		size += r.EncodedSize()
		lastOffsetDelta = max(lastOffsetDelta, r.OffsetDelta)
		maxTimestamp = max(maxTimestamp, b.FirstTimestamp+r.TimestampDelta)
	}
	lastOffsetDelta = max(lastOffsetDelta, b.LastOffsetDelta)

	start := len(dst)
	grow := size // uncompressed: the exact size
	if codec != CodecNone {
		grow = HeaderSize // the compressed size is known only after compressing
	}
	dst = slices.Grow(dst, grow)[:start+HeaderSize] // the header's place, written last
	if codec == CodecNone {
		for i := range b.Records {
			dst = b.Records[i].AppendTo(dst)
		}
	} else {
		plain := make([]byte, 0, size-HeaderSize)
		for i := range b.Records {
			plain = b.Records[i].AppendTo(plain)
		}
		var err error
		if dst, err = AppendCompressed(dst, plain, codec); err != nil {
			return dst[:start], err
		}
	}
	PutHeader(dst[start:], &BatchHeader{
		BaseOffset:           b.BaseOffset,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch,
		Attributes:           b.Attributes,
		LastOffsetDelta:      lastOffsetDelta,
		FirstTimestamp:       b.FirstTimestamp,
		MaxTimestamp:         maxTimestamp,
		ProducerID:           b.ProducerID,
		ProducerEpoch:        b.ProducerEpoch,
		BaseSequence:         b.BaseSequence,
		NumRecords:           int32(len(b.Records)),
	})
	return dst, nil
}

// PutHeader writes the header of the batch that batch holds, for an encoder
// that builds a batch in place: it reserves HeaderSize bytes, appends the
// records after them (compressed, if h's attributes name a codec) and only
// then knows what the header says. batch is the whole batch, header
// included. h's Length, Magic and CRC are ignored: PutHeader derives them
// from batch. It does not check that NumRecords or LastOffsetDelta match
// the records.
//
// A producer's accumulator (stage 06) appends each record to its batch's
// buffer as the record arrives and calls PutHeader when the batch is
// closed; AppendBatch does the same in one call.
func PutHeader(batch []byte, h *BatchHeader) {
	// exercise 01.2: write a batch's header and its CRC
	// hint: each field goes big-endian at the position batch.go names for it; the CRC covers what you write before it, so it comes last
	// tests: TestGoldenBatchBytes, TestPutHeaderBuildsABatchInPlace, TestOffsetAndEpochStampingKeepCRCValid
	be := binary.BigEndian
	be.PutUint64(batch[baseOffsetPos:], uint64(h.BaseOffset))
	be.PutUint32(batch[lengthPos:], uint32(len(batch)-LogOverhead))
	be.PutUint32(batch[partitionLeaderEpochPos:], uint32(h.PartitionLeaderEpoch))
	batch[magicPos] = Magic
	be.PutUint16(batch[attributesPos:], uint16(h.Attributes))
	be.PutUint32(batch[lastOffsetDeltaPos:], uint32(h.LastOffsetDelta))
	be.PutUint64(batch[firstTimestampPos:], uint64(h.FirstTimestamp))
	be.PutUint64(batch[maxTimestampPos:], uint64(h.MaxTimestamp))
	be.PutUint64(batch[producerIDPos:], uint64(h.ProducerID))
	be.PutUint16(batch[producerEpochPos:], uint16(h.ProducerEpoch))
	be.PutUint32(batch[baseSequencePos:], uint32(h.BaseSequence))
	be.PutUint32(batch[recordsCountPos:], uint32(h.NumRecords))
	be.PutUint32(batch[crcPos:], Checksum(batch))
	// end exercise
}

// AppendEmptyBatch appends a batch header with no records, as Kafka's
// DefaultRecordBatch.writeEmptyHeader does for the log cleaner: it keeps an
// idempotent producer's last batch after every record in it was cleaned
// away, so that the producer's last sequence and epoch survive in the log.
// It keeps h's offsets (baseOffset, lastOffsetDelta), leader epoch,
// producer fields, timestamp type and transactional and control bits;
// the codec is none, firstTimestamp is -1 (Kafka's NO_TIMESTAMP) and
// maxTimestamp is h's.
func AppendEmptyBatch(dst []byte, h *BatchHeader) []byte {
	start := len(dst)
	dst = slices.Grow(dst, HeaderSize)[:start+HeaderSize]
	empty := *h
	empty.Attributes = h.Attributes.WithCodec(CodecNone)
	empty.FirstTimestamp = -1
	empty.NumRecords = 0
	PutHeader(dst[start:], &empty)
	return dst
}

// end build
