package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Byte positions of the header fields, as Kafka's DefaultRecordBatch names
// them. Exported helpers below edit a batch in place through them.
const (
	baseOffsetPos           = 0
	lengthPos               = 8
	partitionLeaderEpochPos = 12
	magicPos                = 16
	crcPos                  = 17
	attributesPos           = 21
	lastOffsetDeltaPos      = 23
	firstTimestampPos       = 27
	maxTimestampPos         = 35
	producerIDPos           = 43
	producerEpochPos        = 51
	baseSequencePos         = 53
	recordsCountPos         = 57
)

const (
	// HeaderSize is the size of a batch header; the records follow it.
	HeaderSize = 61
	// LogOverhead is the size of the baseOffset and length fields, the part
	// of a batch that its length does not count (Kafka's LOG_OVERHEAD).
	LogOverhead = 12
	// Magic is the only batch format version this package speaks.
	Magic = 2
	// NoPartitionLeaderEpoch is what producers put in partitionLeaderEpoch;
	// the leader overwrites it with its epoch (stage 03).
	NoPartitionLeaderEpoch = -1
	// NoProducerID, NoProducerEpoch and NoSequence mark a batch from a
	// producer that is not idempotent.
	NoProducerID    = -1
	NoProducerEpoch = -1
	NoSequence      = -1
)

// Errors returned for bad input. They are wrapped with context; test for
// them with errors.Is.
var (
	ErrTooShort        = errors.New("record: batch too short")
	ErrBadMagic        = errors.New("record: unsupported magic")
	ErrLengthMismatch  = errors.New("record: batch length mismatch")
	ErrCRCMismatch     = errors.New("record: crc mismatch")
	ErrInvalidRecord   = errors.New("record: invalid record")
	ErrInvalidArgument = errors.New("record: invalid batch to encode")
)

// IsCorrupt reports whether err means the bytes are not a valid batch: the
// errors a log's recovery treats as the end of its valid data. The codecs'
// errors are not among them: recovery checks the CRC, which covers the
// compressed bytes, and never decompresses.
func IsCorrupt(err error) bool {
	return errors.Is(err, ErrTooShort) || errors.Is(err, ErrBadMagic) ||
		errors.Is(err, ErrLengthMismatch) || errors.Is(err, ErrCRCMismatch) ||
		errors.Is(err, ErrInvalidRecord)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the decoded 61-byte header of a batch.
type BatchHeader struct {
	BaseOffset           int64      // offset of the first record
	Length               int32      // bytes after this field: the batch is Length+LogOverhead bytes
	PartitionLeaderEpoch int32      // epoch of the leader that appended it (stage 03)
	Magic                int8       // format version, always 2 here
	CRC                  uint32     // CRC-32C of bytes 21..end
	Attributes           Attributes // codec, timestamp type, transactional, control
	LastOffsetDelta      int32      // last record's offset minus BaseOffset
	FirstTimestamp       int64      // timestamp of the first record, ms since the epoch
	MaxTimestamp         int64      // largest record timestamp, ms since the epoch
	ProducerID           int64      // idempotent producer id, or NoProducerID
	ProducerEpoch        int16      // idempotent producer epoch, or NoProducerEpoch
	BaseSequence         int32      // sequence number of the first record, or NoSequence
	NumRecords           int32      // number of records (Kafka's recordsCount)
}

// LastOffset is the offset of the batch's last record.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch's last record.
func (h *BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Size is the number of bytes the whole batch occupies.
func (h *BatchHeader) Size() int { return int(h.Length) + LogOverhead }

// build 01.D: read a batch's header: its size, its fields, its CRC
// tests: TestPeekSize, TestBadInputGivesTypedErrors, TestOffsetAndEpochStampingKeepCRCValid, TestKmsgDecodesOurBatches

// PeekSize reads a batch's baseOffset and total size from its first 12
// bytes, the way a log scans batch by batch. It checks nothing else.
func PeekSize(b []byte) (baseOffset int64, size int, err error) {
	if len(b) < LogOverhead {
		return 0, 0, fmt.Errorf("%w: %d bytes, need %d for offset and length", ErrTooShort, len(b), LogOverhead)
	}
	length := int32(binary.BigEndian.Uint32(b[lengthPos:]))
	if length < HeaderSize-LogOverhead {
		return 0, 0, fmt.Errorf("%w: length field %d is below the minimum %d", ErrLengthMismatch, length, HeaderSize-LogOverhead)
	}
	return int64(binary.BigEndian.Uint64(b[baseOffsetPos:])), int(length) + LogOverhead, nil
}

// ReadHeader decodes the header at the front of b. It checks the magic and
// the length fields but not the CRC; use Validate for that.
func ReadHeader(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, a header needs %d", ErrTooShort, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h.Magic = int8(b[magicPos])
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: %d (only magic %d is supported)", ErrBadMagic, h.Magic, Magic)
	}
	h.BaseOffset = int64(be.Uint64(b[baseOffsetPos:]))
	h.Length = int32(be.Uint32(b[lengthPos:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[partitionLeaderEpochPos:]))
	h.CRC = be.Uint32(b[crcPos:])
	h.Attributes = Attributes(be.Uint16(b[attributesPos:]))
	h.LastOffsetDelta = int32(be.Uint32(b[lastOffsetDeltaPos:]))
	h.FirstTimestamp = int64(be.Uint64(b[firstTimestampPos:]))
	h.MaxTimestamp = int64(be.Uint64(b[maxTimestampPos:]))
	h.ProducerID = int64(be.Uint64(b[producerIDPos:]))
	h.ProducerEpoch = int16(be.Uint16(b[producerEpochPos:]))
	h.BaseSequence = int32(be.Uint32(b[baseSequencePos:]))
	h.NumRecords = int32(be.Uint32(b[recordsCountPos:]))
	if h.Length < HeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: length field %d is below the minimum %d", ErrLengthMismatch, h.Length, HeaderSize-LogOverhead)
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d, recordsCount %d", ErrInvalidRecord, h.LastOffsetDelta, h.NumRecords)
	}
	return h, nil
}

// Validate decodes the header of the batch at the front of b and checks that
// b holds the whole batch and that its CRC matches. Bytes after the batch
// are ignored; the batch is b[:h.Size()].
func Validate(b []byte) (BatchHeader, error) {
	h, err := ReadHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() > len(b) {
		return h, fmt.Errorf("%w: length field says %d bytes, only %d present", ErrLengthMismatch, h.Size(), len(b))
	}
	if crc := Checksum(b[:h.Size()]); crc != h.CRC {
		return h, fmt.Errorf("%w: stored %d, computed %d", ErrCRCMismatch, h.CRC, crc)
	}
	return h, nil
}

// Checksum computes the CRC-32C of a whole batch, over bytes 21 to its end.
func Checksum(batch []byte) uint32 {
	return crc32.Checksum(batch[attributesPos:], castagnoli)
}

// SetBaseOffset overwrites a batch's baseOffset in place; the CRC stays valid.
func SetBaseOffset(batch []byte, offset int64) {
	binary.BigEndian.PutUint64(batch[baseOffsetPos:], uint64(offset))
}

// SetPartitionLeaderEpoch stamps a batch with a leader epoch in place; the
// CRC stays valid (stage 03's leaders do this on every append).
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[partitionLeaderEpochPos:], uint32(epoch))
}

// end build

// Attributes are a batch's attribute bits.
type Attributes int16

// Compression codecs, in the low three attribute bits.
type Codec int8

const (
	CodecNone Codec = iota
	CodecGzip
	CodecSnappy
	CodecLZ4
	CodecZstd
)

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String returns the codec's name as Kafka's tools print it.
func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

const (
	codecMask         Attributes = 0x07
	timestampTypeFlag Attributes = 0x08 // set: LogAppendTime; clear: CreateTime
	transactionalFlag Attributes = 0x10
	controlFlag       Attributes = 0x20
)

// Codec is the compression codec of the batch's records.
func (a Attributes) Codec() Codec { return Codec(a & codecMask) }

// LogAppendTime reports whether timestamps were set by the broker on append
// rather than by the producer (CreateTime).
func (a Attributes) LogAppendTime() bool { return a&timestampTypeFlag != 0 }

// Transactional reports whether the batch is part of a transaction.
func (a Attributes) Transactional() bool { return a&transactionalFlag != 0 }

// Control reports whether the batch holds a control record (a transaction
// marker) rather than user data.
func (a Attributes) Control() bool { return a&controlFlag != 0 }

// TimestampType names the batch's timestamp type as Kafka's tools print it.
func (a Attributes) TimestampType() string {
	if a.LogAppendTime() {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// WithCodec returns a with its codec bits set to c.
func (a Attributes) WithCodec(c Codec) Attributes { return a&^codecMask | Attributes(c)&codecMask }
