package consumer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// build 06.I: poll: records from the fetched batches, decompressed, aborted transactions skipped, positions advanced
// tests: TestReadsBackWhatFranzGoProduced, TestReadCommittedSkipsAbortedTransactions, TestPollStartsWhereAutoOffsetResetSays

// Record is one consumed record.
//
// Key, Value and Headers alias the fetched bytes, or a buffer the
// consumer reuses once the batch was decompressed, and the Record itself
// lives in a slice the next Poll overwrites: all of it is valid until the
// next Poll. Copy what must outlive that. This is what lets Poll return
// records without allocating per record.
type Record struct {
	Topic       string
	Partition   int32
	Offset      int64
	Timestamp   time.Time // CreateTime, or LogAppendTime if the topic says so
	LeaderEpoch int32     // the epoch of the leader that appended it
	Key         []byte    // nil for a null key
	Value       []byte    // nil for a tombstone
	Headers     []Header
}

// Header is a record header.
type Header = record.Header

// poller is Poll's state between calls: the fetch being consumed and the
// place in it. It is owned by whoever holds mu: Poll calls are
// serialized, because the records one returns are valid until the next.
// The offsets it moves are atomics in the partition states, not guarded
// by mu: the fetchers and the committer never take it.
type poller struct {
	mu sync.Mutex
	c  *Consumer

	// The chunk being delivered, and where in it.
	cur     *fetch          // the fetch whose chunks are being delivered; nil when none
	next    int             // index in cur.chunks of the chunk after ck
	ck      *partitionState // the chunk's partition; nil between chunks
	rest    []byte          // its batches not yet started
	pos     int64           // the offset after the last record delivered from it
	inBatch bool            // it is walking a batch's records
	batch   record.BatchHeader
	it      record.Iterator // over batch's records
	// read_committed: the chunk's aborted transactions not yet reached
	// (by first offset), and the producers whose batches are being
	// skipped until their ABORT markers (Kafka's CompletedFetch).
	aborted     []kmsg.FetchResponseTopicPartitionAbortedTransaction
	abortedPIDs map[int64]bool

	// What one Poll returns; reused by the next.
	out     []Record
	headers []Header          // every record's headers, back to back
	touched []*partitionState // partitions this Poll delivered from

	// Decompression buffers: curBuf holds the batch being walked (it
	// may outlive this Poll), held the earlier batches of this Poll,
	// free the buffers the next compressed batch may take.
	curBuf []byte
	held   [][]byte
	free   [][]byte
}

func (p *poller) init(c *Consumer) { p.c = c }

// maxFreeBuffers bounds the decompression buffers kept between Polls.
const maxFreeBuffers = 8

// Poll returns the next records of the assigned partitions, at most
// max.poll.records, waiting until there is at least one, ctx is done or
// the consumer is closed. Records of one partition come in offset order
// (a Seek starts the order anew).
// The slice and the records' bytes are valid until the next Poll.
//
// Calling Poll says the application is done with the records of the
// previous one: their offsets become what the background committer
// commits (enable.auto.commit).
//
// An error comes with the records read before it: a partition that
// cannot start (auto.offset.reset=none), a batch that fails its CRC or
// cannot be decoded (the partition is fetched again from its position),
// ctx's error, or ErrClosed.
func (c *Consumer) Poll(ctx context.Context) ([]Record, error) {
	p := &c.poller
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.group != nil { // the application is not stuck (max.poll.interval.ms)
		c.group.pollStarted()
		defer c.group.pollEnded()
	}
	p.begin()
	limit := c.cfg.MaxPollRecords
	for {
		if err := p.deliver(limit); err != nil {
			return p.out, err
		}
		if len(p.out) >= limit {
			return p.out, nil
		}
		var f *fetch
		if len(p.out) > 0 {
			select { // take more only if it is already there
			case f = <-c.fetched:
			default:
				return p.out, nil
			}
		} else {
			select {
			case f = <-c.fetched:
			case err := <-c.errs:
				return nil, err
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-c.ctx.Done():
				return nil, ErrClosed
			}
		}
		p.cur, p.next = f, 0
	}
}

// begin starts a Poll: the previous Poll's partitions are consumed up to
// where it left them, and its buffers are free again.
func (p *poller) begin() {
	for _, s := range p.touched {
		s.consumed.Store(s.position.Load())
	}
	p.touched = p.touched[:0]
	for _, b := range p.held {
		if len(p.free) < maxFreeBuffers {
			p.free = append(p.free, b[:0])
		}
	}
	clear(p.held)
	p.held = p.held[:0]
	clear(p.out) // let the previous records' bytes go
	p.out = p.out[:0]
	p.headers = p.headers[:0]
	if p.ck != nil && !p.c.assigned.Load().current(p.ck) {
		p.dropChunk() // the rest of a chunk whose partition was sought, reset or revoked since
	}
}

// deliver appends records to p.out from the current fetch until limit or
// its end.
func (p *poller) deliver(limit int) error {
	for len(p.out) < limit {
		if p.ck == nil && !p.nextChunk() {
			return nil
		}
		start := len(p.out)
		from := p.pos
		err := p.walk(limit)
		// Publish the new position; if a seek, a reset or a rebalance
		// replaced the state meanwhile, take back what was appended. (A
		// swap between the check and the CompareAndSwap lets the records
		// out; whoever reads the partition next reads them again: at
		// least once.)
		s := p.ck
		if !p.c.assigned.Load().current(s) || !s.position.CompareAndSwap(from, p.pos) {
			clear(p.out[start:])
			p.out = p.out[:start]
			p.dropChunk()
		} else if len(p.out) > start || p.pos != from {
			p.touch(s)
		}
		if err != nil {
			p.dropChunk()
			p.c.replaceState(s, s.position.Load()) // fetch it again: the fault may be in transit
			return err
		}
		if p.ck != nil && !p.inBatch && len(p.rest) == 0 {
			p.ck = nil
		}
	}
	return nil
}

// nextChunk moves to the next deliverable chunk of the current fetch.
func (p *poller) nextChunk() bool {
	a := p.c.assigned.Load()
	for p.cur != nil && p.next < len(p.cur.chunks) {
		ck := &p.cur.chunks[p.next]
		p.next++
		s := ck.state
		if !a.current(s) {
			continue // revoked, sought or reset since it was fetched
		}
		pos := s.position.Load()
		if ck.start > pos {
			// A gap: a chunk before this one was lost (two fetchers
			// around a leader change can queue theirs out of order).
			// Fetch again from the position.
			p.c.replaceState(s, pos)
			continue
		}
		p.ck, p.rest, p.pos, p.inBatch = s, ck.data, pos, false
		p.aborted = ck.aborted
		clear(p.abortedPIDs)
		ck.data, ck.aborted = nil, nil
		return true
	}
	p.cur = nil
	return false
}

// walk appends the current chunk's records at or after p.pos to p.out,
// until limit or the chunk's end.
func (p *poller) walk(limit int) error {
	for len(p.out) < limit {
		if !p.inBatch {
			if len(p.rest) == 0 {
				return nil
			}
			if err := p.startBatch(); err != nil {
				return err
			}
			continue
		}
		if !p.it.Next() {
			if err := p.it.Err(); err != nil {
				return fmt.Errorf("consumer: %s[%d] batch at %d: %w", p.ck.tp.Topic, p.ck.tp.Partition, p.batch.BaseOffset, err)
			}
			// Compaction may have left the batch's last offsets empty.
			p.pos = max(p.pos, p.batch.NextOffset())
			p.inBatch = false
			continue
		}
		r := p.it.Record()
		off := p.batch.BaseOffset + int64(r.OffsetDelta)
		if off < p.pos {
			continue // fetched from the start of a batch that began below the position
		}
		ts := p.batch.FirstTimestamp + r.TimestampDelta
		if p.batch.Attributes.LogAppendTime() {
			ts = p.batch.MaxTimestamp
		}
		h := len(p.headers)
		p.headers = append(p.headers, r.Headers...)
		p.out = append(p.out, Record{
			Topic: p.ck.tp.Topic, Partition: p.ck.tp.Partition, Offset: off,
			Timestamp: time.UnixMilli(ts), LeaderEpoch: p.batch.PartitionLeaderEpoch,
			Key: r.Key, Value: r.Value, Headers: p.headers[h:len(p.headers):len(p.headers)],
		})
		p.pos = off + 1
	}
	return nil
}

// startBatch takes the next batch of the chunk: skipped if wholly below
// the position or a control batch, else checked, decompressed and ready
// for its records.
func (p *poller) startBatch() error {
	h, err := record.ReadHeader(p.rest)
	if err != nil {
		return fmt.Errorf("consumer: %s[%d]: %w", p.ck.tp.Topic, p.ck.tp.Partition, err)
	}
	batch := p.rest[:h.Size()]
	p.rest = p.rest[h.Size():]
	if p.c.cfg.IsolationLevel == ReadCommitted && h.ProducerID >= 0 && p.skipAborted(&h, batch) {
		p.pos = max(p.pos, h.NextOffset())
		return nil
	}
	if h.NextOffset() <= p.pos {
		return nil
	}
	if h.Attributes.Control() { // transaction markers are not records
		p.pos = h.NextOffset()
		return nil
	}
	if p.c.cfg.CheckCRCs {
		if crc := record.Checksum(batch); crc != h.CRC {
			return fmt.Errorf("consumer: %s[%d] batch at %d: %w", p.ck.tp.Topic, p.ck.tp.Partition, h.BaseOffset, record.ErrCRCMismatch)
		}
	}
	data := batch[record.HeaderSize:]
	if codec := h.Attributes.Codec(); codec != record.CodecNone {
		var buf []byte
		if n := len(p.free); n > 0 {
			buf, p.free = p.free[n-1], p.free[:n-1]
		}
		if buf, err = record.AppendDecompressed(buf, data, codec, record.DefaultMaxRecordBytes); err != nil {
			return fmt.Errorf("consumer: %s[%d] batch at %d: %w", p.ck.tp.Topic, p.ck.tp.Partition, h.BaseOffset, err)
		}
		if p.curBuf != nil {
			p.held = append(p.held, p.curBuf)
		}
		p.curBuf, data = buf, buf
	}
	p.batch = h
	p.it.Reset(data, h.NumRecords)
	p.inBatch = true
	return nil
}

// skipAborted reports whether a producer's batch belongs to one of the
// aborted transactions the fetch named, as Kafka's consumer decides
// (CompletedFetch.nextFetchedRecord). It sees every producer's batch in
// offset order, control batches included.
func (p *poller) skipAborted(h *record.BatchHeader, batch []byte) bool {
	// exercise 06.6: skip the batches of aborted transactions, as Kafka's read_committed consumer does
	// hint: a producer is aborting from the first offset of one of its aborted transactions until its ABORT marker; its transactional batches in between are dropped
	// tests: TestReadCommittedSkipsAbortedTransactions
	for len(p.aborted) > 0 && p.aborted[0].FirstOffset <= h.LastOffset() {
		if p.abortedPIDs == nil {
			p.abortedPIDs = map[int64]bool{}
		}
		p.abortedPIDs[p.aborted[0].ProducerID] = true
		p.aborted = p.aborted[1:]
	}
	if h.Attributes.Control() {
		if m, err := record.ReadMarker(h, batch); err == nil && !m.Commit {
			delete(p.abortedPIDs, h.ProducerID)
		}
		return false // a marker is skipped as any control batch
	}
	return h.Attributes.Transactional() && p.abortedPIDs[h.ProducerID]
	// end exercise
}

func (p *poller) dropChunk() {
	p.ck, p.rest, p.inBatch = nil, nil, false
}

func (p *poller) touch(s *partitionState) {
	for _, t := range p.touched {
		if t == s {
			return
		}
	}
	p.touched = append(p.touched, s)
}

// end build
