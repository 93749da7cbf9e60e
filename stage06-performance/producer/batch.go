package producer

import (
	"sync"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// build 06.B: a producer batch: records appended into a pooled buffer, closed into a Kafka batch
// tests: TestBatchesFillUpToBatchSize, TestEveryCodecRoundTrips, TestARecordLargerThanBatchSizeGetsABufferOfItsOwn

// A batch is Kafka's ProducerBatch: the records of one partition that
// travel together, encoded in place into a buffer from the BufferPool as
// they are appended. The buffer starts with record.HeaderSize bytes
// reserved; close compresses the records (if compression.type says so)
// and writes the header there with record.PutHeader, and from then on the
// bytes are final: a retry sends the very same bytes, sequence numbers
// included, which is what lets the broker recognize it.
//
// A batch belongs to its partition's deque, then to one request in flight,
// then (after a retriable error) to the deque again; only one goroutine
// holds it at a time, so its fields need no lock of their own.
type batch struct {
	part *partition // the partition it belongs to

	buf     []byte             // header room + records, from the BufferPool
	spill   []byte             // the pool buffer, when compression outgrew it and buf is a copy
	pending []pendingRecord    // one per record, in offset order; reused
	first   int64              // first record's timestamp, ms
	maxTS   int64              // largest record timestamp, ms
	created time.Time          // when the first record was appended
	number  uint64             // its partition's batch count when made: deque order
	header  record.BatchHeader // the header fields; writeHeader puts them in buf

	closed      bool          // compressed: no more appends; the records are final
	sealed      bool          // a record did not fit: no more appends, ready at once
	stamped     bool          // the producer fields of header are set (setSequence)
	headerStale bool          // header changed since writeHeader last wrote it
	retryAt     time.Time     // not sendable before this (retry.backoff.ms)
	attempts    int           // requests it was sent in
	lastErr     error         // why its last request failed, if it is waiting for a retry
	flushed     chan struct{} // closed when done; made only when a Flush waits
}

// pendingRecord is what the callback needs for one record.
type pendingRecord struct {
	r  *Record
	cb func(*Record, error)
}

// batchFreeList keeps done batches, with their pending slices, for the
// next ones: like the BufferPool's buffers, and unlike a sync.Pool, it is
// not emptied by a garbage collection, so a steady producer allocates no
// batch and grows no pending slice. It holds at most as many batches as
// buffer.memory has batch.size buffers.
type batchFreeList struct {
	mu   sync.Mutex
	max  int
	free []*batch // Protected by mu.
}

// get returns a batch for part, its first record about recordSize bytes,
// in buf.
func (l *batchFreeList) get(part *partition, buf []byte, now time.Time, number uint64, recordSize int) *batch {
	l.mu.Lock()
	var b *batch
	if n := len(l.free); n > 0 {
		b = l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
	}
	l.mu.Unlock()
	if b == nil {
		b = &batch{pending: make([]pendingRecord, 0, cap(buf)/max(recordSize/2, 8)+1)} // recordSize is an upper bound
	}
	*b = batch{part: part, buf: buf[:record.HeaderSize], pending: b.pending[:0], created: now, number: number}
	return b
}

// put takes back a done batch; its buffer is already back in the
// BufferPool.
func (l *batchFreeList) put(b *batch) {
	clear(b.pending) // drop the records and callbacks for the collector
	*b = batch{pending: b.pending[:0]}
	l.mu.Lock()
	if len(l.free) < l.max {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}

// poolBuffer is the buffer to give back to the BufferPool.
func (b *batch) poolBuffer() []byte {
	if b.spill != nil {
		return b.spill
	}
	return b.buf
}

// records is the number of records appended.
func (b *batch) records() int { return len(b.pending) }

// tryAppend encodes r at the end of the buffer if it fits and reports
// whether it did. The first record always fits: its buffer was sized for
// it.
func (b *batch) tryAppend(r *Record, ts int64, cb func(*Record, error)) bool {
	if len(b.pending) == 0 {
		b.first, b.maxTS = ts, ts
	}
	rec := record.Record{TimestampDelta: ts - b.first, OffsetDelta: int32(len(b.pending)),
		Key: r.Key, Value: r.Value, Headers: r.Headers}
	if len(b.pending) > 0 && len(b.buf)+rec.EncodedSize() > cap(b.buf) {
		// Kafka closes such a batch for appends (closeForRecordAppends)
		// and counts it full: it leaves at once instead of lingering for
		// a record that would have to be smaller than this one.
		b.sealed = true
		return false
	}
	b.buf = rec.AppendTo(b.buf)
	b.maxTS = max(b.maxTS, ts)
	b.pending = append(b.pending, pendingRecord{r: r, cb: cb})
	return true
}

// full reports whether the batch takes no more records: one did not fit,
// or there is no room for a small one.
func (b *batch) full() bool { return b.sealed || cap(b.buf)-len(b.buf) < 16 }

// close compresses the records, if codec says so, and marks the batch
// transactional for a transactional producer: from now on the records are
// final.
//
// The batch is out of its deque by then, where no Produce can reach it, so
// this runs without the partition's lock: appends to the partition go on
// while a batch of it is compressed.
func (b *batch) close(codec record.Codec, transactional bool) {
	if codec != record.CodecNone {
		b.compress(codec)
	}
	h := &b.header // the producer fields are the sequencer's (setSequence)
	h.PartitionLeaderEpoch = record.NoPartitionLeaderEpoch
	h.Attributes = record.Attributes(0).WithCodec(codec)
	if transactional { // a transactional producer writes only in transactions
		h.Attributes |= record.TransactionalFlag
	}
	h.LastOffsetDelta = int32(len(b.pending) - 1)
	h.FirstTimestamp, h.MaxTimestamp = b.first, b.maxTS
	h.NumRecords = int32(len(b.pending))
	b.closed = true
}

// setSequence gives the batch its producer id, epoch and base sequence
// (record.NoProducerID etc. without idempotence); writeHeader puts them in
// the bytes. A retry sends the bytes as they were; only a new producer id
// (after a sequence the broker could not accept) changes them, which
// rewrites the 61 header bytes and the CRC, not the records.
func (b *batch) setSequence(id producerID, seq int32) {
	b.header.ProducerID, b.header.ProducerEpoch, b.header.BaseSequence = id.id, id.epoch, seq
	b.stamped, b.headerStale = true, true
}

// writeHeader writes the header over the reserved bytes, if it changed.
func (b *batch) writeHeader() {
	if b.headerStale {
		record.PutHeader(b.buf, &b.header)
		b.headerStale = false
	}
}

// scratch holds compressed records on their way back into a batch's
// buffer.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// compress replaces the records in the buffer with their compressed form.
// The codec writes into a pooled scratch buffer, which is copied back into
// the batch's own buffer (the compressed form is almost always smaller),
// so that compression, too, allocates nothing in the steady state. In the
// rare case it came out larger, the batch keeps a copy of its own
// (outside buffer.memory; the pool buffer goes back when the batch is
// done).
func (b *batch) compress(codec record.Codec) {
	s := scratch.Get().(*[]byte)
	out, err := record.AppendCompressed((*s)[:0], b.buf[record.HeaderSize:], codec)
	if err != nil { // the codecs fail only on bad options, which are constant
		panic(err)
	}
	if record.HeaderSize+len(out) <= cap(b.buf) {
		b.buf = append(b.buf[:record.HeaderSize], out...)
	} else {
		big := make([]byte, record.HeaderSize, record.HeaderSize+len(out))
		b.spill = b.buf
		b.buf = append(big, out...)
	}
	*s = out
	scratch.Put(s)
}

// end build
