package record

import (
	"fmt"
	"math"
	"sync"
)

// build 01.B: a record's size and its encoding
// tests: TestGoldenBatchBytes, TestEncodingMatchesKmsg

// Record is one record of a batch. When it comes from an Iterator, Key,
// Value and the headers alias the batch's bytes: they are valid as long as
// those bytes are, and copying them is the caller's choice.
type Record struct {
	Attributes     int8     // unused by Kafka so far; kept as read
	TimestampDelta int64    // timestamp minus the batch's FirstTimestamp, ms
	OffsetDelta    int32    // offset minus the batch's BaseOffset
	Key            []byte   // nil for a null key
	Value          []byte   // nil for a null value (a tombstone)
	Headers        []Header // user metadata, in order
}

// Header is a record header: a string key and an optional value.
type Header struct {
	Key   []byte // never null in Kafka's format; empty is allowed
	Value []byte // nil for a null value
}

// bodySize is the number of bytes of the record after its length varint.
func (r *Record) bodySize() int {
	n := 1 + varintLen(r.TimestampDelta) + varintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		n += varintLen(int64(len(r.Headers[i].Key))) + len(r.Headers[i].Key) + bytesLen(r.Headers[i].Value)
	}
	return n
}

// EncodedSize is the number of bytes r takes inside a batch.
func (r *Record) EncodedSize() int {
	n := r.bodySize()
	return varintLen(int64(n)) + n
}

// AppendTo appends r's encoding to dst.
func (r *Record) AppendTo(dst []byte) []byte {
	dst = appendVarint(dst, int64(r.bodySize()))
	dst = append(dst, byte(r.Attributes))
	dst = appendVarint(dst, r.TimestampDelta)
	dst = appendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = appendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		dst = appendVarint(dst, int64(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendBytes(dst, r.Headers[i].Value)
	}
	return dst
}

// bytesLen is the encoded size of a nullable byte string.
func bytesLen(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int64(len(b))), b...)
}

// end build

// build 01.E: the record iterator: a batch's records, decoded without allocating per record
// tests: TestIteratorDecodesRecords, TestIteratorDoesNotAllocatePerRecord, TestMalformedRecordsAreInvalidRecord, TestWeDecodeKmsgBatches, TestCompressedBatchesRoundTrip

// Iterator walks records without allocating per record: Record returns the
// same *Record each time, refilled.
//
//	it, err := record.NewIterator(batch)
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	err = it.Err()
type Iterator struct {
	data []byte // record bytes not yet decoded
	left int32  // records still expected
	rec  Record // the current record; Headers' backing array is reused
	err  error  // first decoding error; iteration stops there
}

// MinRecordSize is the smallest encoding of a record: seven one-byte
// varints (length, attributes, timestamp delta, offset delta, null key,
// null value, no headers). A batch claiming more records than its bytes can
// hold at this size is refused before anything is decoded.
const MinRecordSize = 7

// DefaultMaxRecordBytes bounds a batch's records once decompressed when the
// caller sets no limit: 64 MiB, 64 times Kafka's default message.max.bytes.
const DefaultMaxRecordBytes = 64 << 20

// NewIterator returns an iterator over the records of the batch at the front
// of b, decompressing them first (into a new buffer, at most
// DefaultMaxRecordBytes) if the batch is compressed. It checks the header
// (not the CRC: see Validate). A Reader does the same with reused buffers
// and a limit of the caller's choice.
func NewIterator(b []byte) (*Iterator, error) {
	var r Reader
	return r.Records(b)
}

// Reader decodes the records of batches, compressed or not, reusing its
// decompression buffer and iterator from one batch to the next. A Reader
// is not safe for concurrent use.
type Reader struct {
	// MaxRecordBytes bounds the records of one batch once decompressed;
	// 0 means DefaultMaxRecordBytes. A broker sets it from
	// message.max.bytes.
	MaxRecordBytes int

	buf []byte   // decompressed records of the last batch
	it  Iterator // the iterator Records returns
}

// readers are Readers kept for reuse by GetReader and PutReader; a pooled
// Reader keeps at most pooledReaderBytes of decompression buffer, so the
// pool does not hold on to the largest batch it ever saw.
var readers = sync.Pool{New: func() any { return new(Reader) }}

const pooledReaderBytes = 4 << 20

// GetReader returns a Reader from a pool shared by every caller (a broker's
// produce validation, a log's timestamp lookups), with the given limit.
// Give it back with PutReader when done with its iterator.
func GetReader(maxRecordBytes int) *Reader {
	r := readers.Get().(*Reader)
	r.MaxRecordBytes = maxRecordBytes
	return r
}

// PutReader returns r to the pool; its iterator must not be used after.
func PutReader(r *Reader) {
	if cap(r.buf) > pooledReaderBytes {
		r.buf = nil
	}
	readers.Put(r)
}

// Records returns an iterator over the records of the batch at the front
// of b, valid until the next call. A compressed batch is decompressed into
// the Reader's buffer. It fails before decompressing when the batch claims
// more records than MaxRecordBytes can hold, with ErrTooLarge when the
// records inflate past MaxRecordBytes, with ErrUnknownCodec or
// ErrCorruptCompression when they cannot be decompressed, and with
// ErrInvalidRecord when there are fewer bytes than the count needs.
func (r *Reader) Records(b []byte) (*Iterator, error) {
	h, err := ReadHeader(b)
	if err != nil {
		return nil, err
	}
	return r.RecordsOf(&h, b)
}

// RecordsOf is Records for a batch whose header h the caller has read
// already (with ReadHeader), so that a validator parses it once.
func (r *Reader) RecordsOf(h *BatchHeader, b []byte) (*Iterator, error) {
	var err error
	if h.Size() > len(b) {
		return nil, fmt.Errorf("%w: length field says %d bytes, only %d present", ErrLengthMismatch, h.Size(), len(b))
	}
	data := b[HeaderSize:h.Size()]
	limit := r.MaxRecordBytes
	if limit <= 0 {
		limit = DefaultMaxRecordBytes
	}
	if c := h.Attributes.Codec(); c != CodecNone {
		if !c.Known() {
			return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
		}
		if int64(h.NumRecords)*MinRecordSize > int64(limit) {
			return nil, fmt.Errorf("%w: recordsCount %d cannot fit in the %d bytes a batch may decompress to",
				ErrInvalidRecord, h.NumRecords, limit)
		}
		if r.buf, err = AppendDecompressed(r.buf[:0], data, c, limit); err != nil {
			return nil, err
		}
		data = r.buf
	}
	if int64(h.NumRecords)*MinRecordSize > int64(len(data)) {
		return nil, fmt.Errorf("%w: recordsCount %d cannot fit in %d bytes of records", ErrInvalidRecord, h.NumRecords, len(data))
	}
	r.it.Reset(data, h.NumRecords)
	return &r.it, nil
}

// NewRecordIterator returns an iterator over count records encoded back to
// back in data, without a batch header. Bytes left after count records are
// an error.
func NewRecordIterator(data []byte, count int32) *Iterator {
	return &Iterator{data: data, left: count}
}

// Reset makes it iterate over count records in data, keeping its buffers.
func (it *Iterator) Reset(data []byte, count int32) {
	*it = Iterator{data: data, left: count, rec: Record{Headers: it.rec.Headers[:0]}}
}

// Next decodes the next record. It returns false at the end or on an error.
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.left == 0 {
		if len(it.data) != 0 {
			it.err = fmt.Errorf("%w: %d bytes after the last record", ErrInvalidRecord, len(it.data))
		}
		return false
	}
	it.left--
	if err := it.decode(); err != nil {
		it.err = err
		return false
	}
	return true
}

// Record returns the record Next decoded. It is overwritten by the next call.
func (it *Iterator) Record() *Record { return &it.rec }

// Err returns the first error met, or nil if every record decoded.
func (it *Iterator) Err() error { return it.err }

// decode reads one record from the front of it.data into it.rec.
func (it *Iterator) decode() error {
	length, n := readVarint(it.data, 5)
	if n == 0 || length < 0 || length > int64(len(it.data)-n) {
		return fmt.Errorf("%w: record length %d with %d bytes left", ErrInvalidRecord, length, len(it.data)-n)
	}
	d := decoder{b: it.data[n : n+int(length)], ok: true}
	it.data = it.data[n+int(length):]

	r := &it.rec
	r.Attributes = int8(d.byte())
	r.TimestampDelta = d.varlong()
	r.OffsetDelta = d.varint()
	r.Key = d.bytes()
	r.Value = d.bytes()
	count := d.varint()
	if count < 0 || int(count) > len(d.b) {
		// Each header takes at least two bytes, so a count beyond the bytes
		// left is corrupt; checking here keeps a bad count from allocating.
		d.fail()
	}
	r.Headers = r.Headers[:0]
	for i := int32(0); i < count && d.ok; i++ {
		r.Headers = append(r.Headers, Header{Key: d.bytes(), Value: d.bytes()})
		if r.Headers[i].Key == nil {
			d.fail() // header keys are strings, never null
		}
	}
	if !d.ok || len(d.b) != 0 {
		return fmt.Errorf("%w: malformed record body (%d bytes unread)", ErrInvalidRecord, len(d.b))
	}
	return nil
}

// decoder reads a record body with a sticky error, so decode reads like the
// format: each read after a failure returns a zero value.
type decoder struct {
	b  []byte // bytes not yet read
	ok bool   // false once any read failed
}

func (d *decoder) fail() { d.ok, d.b = false, nil }

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) varlong() int64 {
	v, n := readVarint(d.b, 10)
	if n == 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int32 {
	v, n := readVarint(d.b, 5)
	if n == 0 || v < math.MinInt32 || v > math.MaxInt32 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return int32(v)
}

// bytes reads a length-prefixed byte string; -1 is null.
func (d *decoder) bytes() []byte {
	n := d.varint()
	switch {
	case !d.ok:
		return nil
	case n == -1:
		return nil
	case n < -1 || int(n) > len(d.b):
		d.fail()
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

// end build
