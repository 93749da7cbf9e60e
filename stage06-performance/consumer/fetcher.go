package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// build 06.F: the consumer's fetcher: one Fetch session per leader, records ahead of poll
// tests: TestReadsBackWhatFranzGoProduced, TestALeaderChangeMovesPartitionsToTheNewLeadersFetcher, TestPollStartsWhereAutoOffsetResetSays

// fetchVersion is the highest Fetch version this client sends: v13 names
// topics by ID (KIP-516).
const fetchVersion = 12

// A fetch is what one Fetch response brought for Poll: a chunk per
// partition that had records.
type fetch struct {
	chunks []chunk
}

// A chunk is one partition's record batches from one fetch response,
// complete batches only.
type chunk struct {
	state *partitionState // the state it was fetched for; dropped if no longer current
	start int64           // the offset the fetch asked for: batches begin at or before it
	data  []byte          // whole batches; aliases the response (a Conn reads each into a new buffer)
	// aborted are the aborted transactions among data (read_committed),
	// by first offset: Poll skips their producers' batches up to each
	// one's ABORT marker.
	aborted []kmsg.FetchResponseTopicPartitionAbortedTransaction
}

// fetcher is one broker's fetch loop (Kafka's Fetcher sends a request to
// each node with fetchable partitions and none in flight; here each node
// has a goroutine). It fetches the assigned partitions the broker leads,
// hands what came back to Poll through Consumer.fetched, and sends the
// next request at once: while the application works through one response,
// the next is on its way. When Poll falls behind, the channel fills and
// the fetcher waits: that is the bound on memory.
type fetcher struct {
	c      *Consumer
	broker int32 // the broker whose partitions it fetches; immutable

	// Owned by run's goroutine.
	rotate int  // where the next request's partition list starts (fairness under fetch.max.bytes)
	stale  bool // the last response said the metadata is stale: wait for a refresh before the next
}

func (f *fetcher) run() {
	c := f.c
	for c.ctx.Err() == nil {
		wake := c.changed.wait() // before reading the assignment: a change after it wakes us
		a := c.assigned.Load()
		var mine, unresolved []*partitionState
		for _, s := range a.list {
			if s.leader.Load() != f.broker {
				continue
			}
			if s.fetchOffset.Load() == unknown {
				unresolved = append(unresolved, s)
			} else {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 && len(unresolved) == 0 {
			select {
			case <-wake:
			case <-c.ctx.Done():
			}
			continue
		}
		conn, err := c.pool.Broker(c.ctx, f.broker)
		if err != nil {
			f.failed(err)
			continue
		}
		if len(unresolved) > 0 {
			if err := f.resolve(conn, unresolved); err != nil {
				f.failed(err)
			}
			continue
		}
		f.stale = false
		if err := f.fetchOnce(conn, mine); err != nil {
			f.failed(err)
		}
		if f.stale { // don't ask again before the leaders may have moved
			t := time.NewTimer(c.cfg.RetryBackoff)
			select {
			case <-wake:
			case <-t.C:
			case <-c.ctx.Done():
			}
			t.Stop()
		}
	}
}

// failed logs err, asks for fresh metadata (the broker may be gone or no
// longer lead) and backs off.
func (f *fetcher) failed(err error) {
	if f.c.ctx.Err() != nil {
		return
	}
	f.c.log.Warn("fetch failed", "broker", f.broker, "err", err)
	f.c.refreshSoon()
	f.c.sleep(f.c.cfg.RetryBackoff)
}

// fetchOnce sends one Fetch for parts and queues what it brings for Poll.
func (f *fetcher) fetchOnce(conn *wire.Conn, parts []*partitionState) error {
	c := f.c
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(c.cfg.FetchMaxWait.Milliseconds())
	req.MinBytes = c.cfg.FetchMinBytes
	req.MaxBytes = c.cfg.FetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // no fetch session (KIP-227): every fetch is full
	if c.cfg.IsolationLevel == ReadCommitted {
		req.IsolationLevel = 1 // up to the LSO, with the aborted transactions
	}
	asked := make(map[TopicPartition]int64, len(parts))
	f.rotate = (f.rotate + 1) % len(parts)
	for i := range parts {
		s := parts[(f.rotate+i)%len(parts)]
		off := s.fetchOffset.Load()
		asked[s.tp] = off
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != s.tp.Topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = s.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = s.tp.Partition
		p.FetchOffset = off
		p.PartitionMaxBytes = c.cfg.MaxPartitionFetchBytes
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp, err := request[*kmsg.FetchResponse](c.ctx, conn, req, fetchVersion)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch from broker %d: %w", f.broker, err)
	}
	a := c.assigned.Load()
	out := &fetch{}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			tp := TopicPartition{t.Topic, p.Partition}
			s := a.parts[tp]
			off, ok := asked[tp]
			if s == nil || !ok || s.fetchOffset.Load() != off {
				continue // reassigned, sought or reset meanwhile
			}
			if ck, ok := f.partition(s, off, p); ok {
				out.chunks = append(out.chunks, ck)
			}
		}
	}
	if len(out.chunks) == 0 {
		return nil
	}
	select {
	case c.fetched <- out: // blocks while Poll is BufferedFetches behind
	case <-c.ctx.Done():
	}
	return nil
}

// partition handles one partition of a fetch response: its error, or its
// batches, which it claims by moving the fetch offset past them.
func (f *fetcher) partition(s *partitionState, off int64, p *kmsg.FetchResponseTopicPartition) (chunk, bool) {
	c := f.c
	switch err := kerr.ErrorForCode(p.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		// The log was truncated or deleted under us, or a seek went past
		// the end: start again where auto.offset.reset says.
		if c.cfg.AutoOffsetReset == ResetNone {
			c.reportErr(fmt.Errorf("consumer: %s[%d] at offset %d: %w (auto.offset.reset=none)", s.tp.Topic, s.tp.Partition, off, err))
			return chunk{}, false
		}
		c.log.Info("offset out of range: resetting", "topic", s.tp.Topic, "partition", s.tp.Partition, "offset", off, "reset", c.cfg.AutoOffsetReset)
		c.replaceState(s, unknown)
		return chunk{}, false
	default:
		// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
		// FENCED_LEADER_EPOCH, …: the metadata is stale. Refreshed, the
		// partition moves to its new leader's fetcher.
		c.log.Info("fetch error: refreshing metadata", "topic", s.tp.Topic, "partition", s.tp.Partition, "err", err)
		c.refreshSoon()
		f.stale = true
		return chunk{}, false
	}
	s.highWatermark.Store(p.HighWatermark)
	if c.cfg.IsolationLevel == ReadCommitted {
		s.highWatermark.Store(p.LastStableOffset) // what there is to read: the lag counts from it
	}
	data, end := completeBatches(p.RecordBatches)
	if end <= off {
		return chunk{}, false // nothing, or one batch larger than the partition's budget so far
	}
	if !s.fetchOffset.CompareAndSwap(off, end) {
		return chunk{}, false // another fetcher (the old or new leader's) claimed this range
	}
	aborted := slices.Clone(p.AbortedTransactions)
	slices.SortStableFunc(aborted, func(a, b kmsg.FetchResponseTopicPartitionAbortedTransaction) int {
		return cmp.Compare(a.FirstOffset, b.FirstOffset) // Kafka sends them in order; not every broker does
	})
	return chunk{state: s, start: off, data: data, aborted: aborted}, true
}

// completeBatches trims b to its whole batches (a broker may cut the last
// one at the byte limit) and returns the offset after the last of them,
// reading only headers.
func completeBatches(b []byte) (whole []byte, end int64) {
	n := 0
	for len(b)-n >= record.HeaderSize {
		_, size, err := record.PeekSize(b[n:])
		if err != nil || size > len(b)-n {
			break
		}
		h, err := record.ReadHeader(b[n:])
		if err != nil {
			break
		}
		end = h.NextOffset()
		n += size
	}
	return b[:n], end
}

// resolve asks the broker where auto.offset.reset points for partitions
// whose start is unknown, and starts them there.
func (f *fetcher) resolve(conn *wire.Conn, parts []*partitionState) error {
	c := f.c
	if c.cfg.AutoOffsetReset == ResetNone {
		for _, s := range parts {
			c.reportErr(fmt.Errorf("consumer: %s[%d] has no committed offset (auto.offset.reset=none)", s.tp.Topic, s.tp.Partition))
		}
		f.c.sleep(c.cfg.RetryBackoff)
		return nil
	}
	ts := int64(-1) // latest
	if c.cfg.AutoOffsetReset == ResetEarliest {
		ts = -2
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if c.cfg.IsolationLevel == ReadCommitted {
		req.IsolationLevel = 1 // latest is the LSO
	}
	for _, s := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != s.tp.Topic {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = s.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp = s.tp.Partition, ts
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp, err := request[*kmsg.ListOffsetsResponse](c.ctx, conn, req, 0)
	if err != nil {
		return err
	}
	a := c.assigned.Load()
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			s := a.parts[TopicPartition{t.Topic, p.Partition}]
			if s == nil {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				c.log.Info("list offsets error: refreshing metadata", "topic", t.Topic, "partition", p.Partition, "err", err)
				c.refreshSoon()
				continue
			}
			// position first: Poll reads it once a chunk exists, and a
			// chunk needs the fetch offset.
			s.position.CompareAndSwap(unknown, p.Offset)
			s.consumed.CompareAndSwap(unknown, p.Offset)
			s.fetchOffset.CompareAndSwap(unknown, p.Offset)
		}
	}
	return nil
}

// end build
