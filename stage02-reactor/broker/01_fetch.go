package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// Fetch (key 1), v4-v12. Consumers read records; the answer's records are
// regions of the log files (commitlog.Region), framed by
// protocol.FetchResponseSends without being copied into the message.
//
// A fetch is a long poll: when fewer than MinBytes are available the broker
// holds the request up to MaxWaitMillis and answers as soon as an append
// to one of its partitions brings enough (stage 04 moves this into a
// purgatory). The wait is capped (maxFetchWait), and a fetch whose client
// went away is dropped at once (Request.Done).
//
// Budgets, as Kafka's: a partition listed more than once is read once (the
// request is a map keyed by partition; the last listing's offsets win), the
// response takes at most the request's max_bytes and the broker's
// fetch.max.bytes, and a partition at most its partition_max_bytes, except
// that the first partition with data may exceed them by its first batch
// (KIP-74).
//
// v4 adds isolation level and the last stable offset, v5 the log start
// offset, v7 fetch sessions (KIP-227: we never create one, SessionID 0, so
// every fetch is a full fetch), v9 the current leader epoch (KIP-320), v11
// the rack for follower fetching, v12 is flexible. v13 names topics by id
// (KIP-516): the handler turns ids into names before anything reads (an id
// it cannot name answers UNKNOWN_TOPIC_ID), and a partition held here for
// another topic of the same name answers INCONSISTENT_TOPIC_ID
// (fetch_topic_ids.go). v14 adds an error for tiered storage (none here),
// v15 moves the follower's id into ReplicaState (KIP-903), v16 adds
// NodeEndpoints to the response (left out), v17 the follower's directory
// id (ignored). Kafka 3.9 serves up to v17.
var fetchAPI = FetchAPI(nil)

// maxFetchWait caps a fetch's max_wait_ms, which a client may set to 24
// days: an abandoned long poll must not hold its connection that long.
// Kafka's consumers ask for 500 ms (fetch.max.wait.ms), librdkafka for
// 500 ms, franz-go for 5 s; 30 s is above every default. The wait is also
// kept under half of connections.max.idle.ms, which closes a connection
// whose request waits longer.
const maxFetchWait = 30 * time.Second

// FetchSource is what a fetch reads. The single broker of this stage reads
// its store (StoreFetchSource); stage 03 plugs in a replica-aware source
// (leaders only, followers up to the log end, consumers up to the high
// watermark) and keeps everything else of this handler: sessions, byte
// budgets, the long poll, the zero-copy framing.
type FetchSource interface {
	// ReadPartition fills out for one requested partition. remaining is
	// what the response may still take; first says no partition has
	// returned data yet, so this one may exceed the limits by its first
	// batch (KIP-74). replicaID is -1 for consumers, a broker id for
	// followers.
	ReadPartition(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition)
	// Watch registers ch to be signalled when the partition may have more
	// for this fetcher, and returns how to unregister it; nil if there is
	// nothing to watch.
	Watch(replicaID int32, topic string, partition int32, ch chan struct{}) (unwatch func())
}

// CommittedFetchSource is implemented by a FetchSource that keeps
// transactions (stage 04): a consumer's fetch with isolation_level
// READ_COMMITTED (1, Fetch v4+) reads each partition through
// ReadCommitted, which reads up to the last stable offset and lists the
// aborted transactions among what it read (out.AbortedTransactions, a
// non-nil list). A source without transactions has nothing uncommitted:
// ReadPartition answers both isolation levels.
type CommittedFetchSource interface {
	ReadCommitted(topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition)
}

// FetchRecorder is implemented by a FetchSource that learns something from
// the fetch itself, not only from what it reads: stage 03's leader records
// a follower's fetch offset as its log end offset, and the time of the
// fetch, from which the ISR is decided. RecordFetch runs once per partition
// when the request arrives, before the first read; never on the re-reads of
// a fetch that waits, which would otherwise make a follower that stopped
// fetching look as if it kept asking (Kafka updates the follower's state in
// fetchMessages, not in DelayedFetch). An error code it leaves in out
// answers the partition with it, unread.
type FetchRecorder interface {
	RecordFetch(replicaID int32, topic string, fp *kmsg.FetchRequestTopicPartition, out *protocol.FetchPartition)
}

// FetchWaiter holds a fetch that found fewer than min bytes until it can
// be answered (Kafka's DelayedFetch in the fetch purgatory). Stage 02's
// waiter (nil) gives each waiting fetch a goroutine woken by its
// partitions' Watch; stage 04 parks them in a purgatory instead.
type FetchWaiter interface {
	// Park holds f for up to wait and answers it: when f.Ready says so,
	// at the deadline, or at shutdown (f.Respond). It must not block.
	Park(f *PendingFetch, wait time.Duration)
}

// FetchAPI is the Fetch handler reading from src; nil means the broker's
// own store. Waiting fetches wait on goroutines.
func FetchAPI(src FetchSource) API { return FetchAPIWith(src, nil) }

// FetchAPIWith is FetchAPI with the waiting fetches held by w (nil: a
// goroutine each).
func FetchAPIWith(src FetchSource, w FetchWaiter) API {
	return API{Key: 1, MinVersion: protocol.FetchMinVersion, MaxVersion: protocol.FetchMaxVersion,
		Handle: func(r *Request) {
			s := src
			if s == nil {
				s = StoreFetchSource{r.Broker.store}
			}
			handleFetch(r, s, w)
		}}
}

// leaderEpoch is the epoch of every partition on a single broker: the first
// leader's, never bumped (stage 03 bumps it on each leader change).
const leaderEpoch = 0

func handleFetch(r *Request, src FetchSource, w FetchWaiter) {
	req := r.Body.(*kmsg.FetchRequest)
	if req.SessionID != 0 {
		// We hand out no sessions, so an incremental fetch names one we
		// do not have; the client falls back to full fetches.
		respondFetch(r, &protocol.FetchResponse{ErrorCode: kerr.FetchSessionIDNotFound.Code})
		return
	}
	f := planFetch(req, r.Broker.cfg.FetchMaxBytes)
	f.nameTopics(fetchNamer(src, r.Broker.store), r.Broker.store)
	f.recordFetch(src)
	resp, bytes, hasError := f.read(src)
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	if idle := r.Broker.cfg.Network.ConnectionsMaxIdle; idle > 0 {
		wait = min(wait, idle/2)
	}
	if bytes >= int64(req.MinBytes) || hasError || wait <= 0 {
		respondFetch(r, resp)
		return
	}
	pf := &PendingFetch{r: r, plan: f, src: src}
	if w == nil {
		waitFetch(pf, wait)
		return
	}
	w.Park(pf, wait)
}

// respondFetch frames a fetch response and sends it. One that cannot be
// framed (over 2 GiB, which the budgets prevent) closes the connection: the
// client cannot be told otherwise.
func respondFetch(r *Request, resp *protocol.FetchResponse) {
	if req, ok := r.Body.(*kmsg.FetchRequest); ok && FetchReplicaID(req) < 0 { // BytesOutPerSec counts consumers' fetches
		for _, t := range resp.Topics {
			var n int64
			for _, p := range t.Partitions {
				n += recordsLen(p.Records)
			}
			r.Broker.counters.countOut(t.Topic, n)
		}
	}
	sends, err := protocol.FetchResponseSends(r.Header, resp)
	if err != nil {
		r.Broker.logger.Error("cannot frame a fetch response", "err", err)
		r.CloseConnection()
		return
	}
	r.RespondSends(sends)
}

// fetchPlan is a Fetch request as the handler reads it: each partition once,
// in the order the request first names it, grouped by topic as the
// response lists them, and the response's byte budget.
type fetchPlan struct {
	replicaID int32
	committed bool // a consumer's read_committed fetch (v4+)
	byID      bool // v13+: topics are named by id (fetch_topic_ids.go)
	minBytes  int32
	maxBytes  int64 // min(max_bytes, fetch.max.bytes)
	topics    []plannedTopic
	// refused holds the error codes RecordFetch gave, by partition: those
	// partitions answer with them, unread.
	refused map[*kmsg.FetchRequestTopicPartition]protocol.FetchPartition
}

type plannedTopic struct {
	topic      string
	id         store.TopicID // v13+: the id the request named the topic by
	partitions []*kmsg.FetchRequestTopicPartition
}

// planFetch dedupes the request's partitions as Kafka's FetchRequest does
// when it reads them into a LinkedHashMap: the first listing fixes the
// place, the last one the offsets and limits. A 56 KB request naming one
// partition 2,000 times reads it once.
func planFetch(req *kmsg.FetchRequest, fetchMaxBytes int32) *fetchPlan {
	type key struct {
		topic     string
		id        store.TopicID // v13+
		partition int32
	}
	type slot struct{ topic, partition int } // indexes into f.topics (stable, unlike pointers into growing slices)
	f := &fetchPlan{replicaID: FetchReplicaID(req), byID: req.Version >= 13, minBytes: req.MinBytes, maxBytes: int64(min(req.MaxBytes, fetchMaxBytes))}
	f.committed = f.replicaID < 0 && req.Version >= 4 && req.IsolationLevel == 1
	slots := map[key]slot{}
	for ti := range req.Topics {
		t := &req.Topics[ti]
		id := store.TopicID{}
		if req.Version >= 13 {
			id = t.TopicID
		}
		for pi := range t.Partitions {
			fp := &t.Partitions[pi]
			k := key{t.Topic, id, fp.Partition}
			if at, ok := slots[k]; ok {
				f.topics[at.topic].partitions[at.partition] = fp
				continue
			}
			if n := len(f.topics); n == 0 || f.topics[n-1].topic != t.Topic || f.topics[n-1].id != id {
				f.topics = append(f.topics, plannedTopic{topic: t.Topic, id: id})
			}
			pt := &f.topics[len(f.topics)-1]
			pt.partitions = append(pt.partitions, fp)
			slots[k] = slot{len(f.topics) - 1, len(pt.partitions) - 1}
		}
	}
	return f
}

// recordFetch lets a FetchRecorder source learn of the fetch, once.
func (f *fetchPlan) recordFetch(src FetchSource) {
	rec, ok := src.(FetchRecorder)
	if !ok {
		return
	}
	for _, t := range f.topics {
		for _, fp := range t.partitions {
			if _, refused := f.refused[fp]; refused {
				continue
			}
			out := newFetchPartition(fp.Partition)
			if rec.RecordFetch(f.replicaID, t.topic, fp, &out); out.ErrorCode != 0 {
				f.refuse(fp, out)
			}
		}
	}
}

// refuse answers fp with out, unread.
func (f *fetchPlan) refuse(fp *kmsg.FetchRequestTopicPartition, out protocol.FetchPartition) {
	if f.refused == nil {
		f.refused = map[*kmsg.FetchRequestTopicPartition]protocol.FetchPartition{}
	}
	f.refused[fp] = out
}

// PendingFetch is a fetch that found fewer than min bytes and waits: what a
// FetchWaiter holds.
type PendingFetch struct {
	r    *Request
	plan *fetchPlan
	src  FetchSource
}

// Request is the waiting request.
func (f *PendingFetch) Request() *Request { return f.r }

// ReplicaID is the fetching broker's id, or -1 for a consumer.
func (f *PendingFetch) ReplicaID() int32 { return f.plan.replicaID }

// Partitions lists the partitions the fetch reads: what it waits on.
func (f *PendingFetch) Partitions() []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, t := range f.plan.topics {
		for _, fp := range t.partitions {
			out = append(out, commitlog.TopicPartition{Topic: t.topic, Partition: fp.Partition})
		}
	}
	return out
}

// Ready reads the partitions again and reports whether the fetch can be
// answered now (min bytes, or an error), with the response it read.
func (f *PendingFetch) Ready() (*protocol.FetchResponse, bool) {
	resp, bytes, hasError := f.plan.read(f.src)
	return resp, bytes >= int64(f.plan.minBytes) || hasError
}

// Respond answers the fetch with resp, or with a fresh read if resp is nil
// (the deadline passed, or the broker is shutting down).
func (f *PendingFetch) Respond(resp *protocol.FetchResponse) {
	if resp == nil {
		resp, _, _ = f.plan.read(f.src)
	}
	respondFetch(f.r, resp)
}

// waitFetch is stage 02's FetchWaiter: it waits, off the handler pool, on a
// goroutine of its own, for enough bytes, the deadline, the client's
// departure or shutdown, then answers with a fresh read (or, if the client
// left, does not answer at all).
func waitFetch(f *PendingFetch, wait time.Duration) {
	r, plan := f.r, f.plan
	wake := make(chan struct{}, 1)
	var unwatch []func()
	for _, t := range plan.topics {
		for _, fp := range t.partitions {
			if u := f.src.Watch(plan.replicaID, t.topic, fp.Partition, wake); u != nil {
				unwatch = append(unwatch, u)
			}
		}
	}
	// Records that arrived between the read that found too little and the
	// Watch calls above signalled nobody: look once more before waiting,
	// or the fetch would sleep out its max wait with data available. The
	// send must not block: an append after the Watch calls may already
	// have filled wake's one slot, which asks for that same look.
	select {
	case wake <- struct{}{}:
	default:
	}
	deadline := time.NewTimer(wait)
	gone := r.Done()
	r.Broker.Delay(func() {
		defer deadline.Stop()
		defer func() {
			for _, u := range unwatch {
				u()
			}
		}()
		for {
			select {
			case <-wake:
				if resp, ok := f.Ready(); ok {
					f.Respond(resp)
					return
				}
			case <-deadline.C:
				f.Respond(nil)
				return
			case <-gone:
				return // the connection closed: nobody to answer
			case <-r.Broker.shutdown:
				f.Respond(nil)
				return
			}
		}
	})
}

// read reads every planned partition within the byte budget, and reports
// the bytes read and whether any partition has an error (errors answer at
// once, without waiting).
func (f *fetchPlan) read(src FetchSource) (resp *protocol.FetchResponse, bytes int64, hasError bool) {
	resp = &protocol.FetchResponse{Topics: make([]protocol.FetchTopic, 0, len(f.topics))}
	remaining := f.maxBytes
	committed, _ := src.(CommittedFetchSource)
	if !f.committed {
		committed = nil
	}
	for _, t := range f.topics {
		ft := protocol.FetchTopic{Topic: t.topic, TopicID: t.id, Partitions: make([]protocol.FetchPartition, 0, len(t.partitions))}
		for _, fp := range t.partitions {
			out, refused := f.refused[fp]
			if !refused {
				out = newFetchPartition(fp.Partition)
				if committed != nil {
					committed.ReadCommitted(t.topic, fp, bytes == 0, &remaining, &out)
				} else {
					src.ReadPartition(f.replicaID, t.topic, fp, bytes == 0, &remaining, &out)
				}
			}
			if out.ErrorCode != 0 {
				hasError = true
			} else {
				bytes += recordsLen(out.Records)
			}
			ft.Partitions = append(ft.Partitions, out)
		}
		resp.Topics = append(resp.Topics, ft)
	}
	return resp, bytes, hasError
}

// newFetchPartition is a partition's answer before anything is known.
func newFetchPartition(partition int32) protocol.FetchPartition {
	return protocol.FetchPartition{Partition: partition, HighWatermark: -1, LastStableOffset: -1,
		LogStartOffset: -1, PreferredReadReplica: -1}
}

// StoreFetchSource reads a single broker's store: every partition is led
// here at epoch 0, and its high watermark is its log end offset.
type StoreFetchSource struct{ Store *store.Store }

func (s StoreFetchSource) ReadPartition(_ int32, topic string, fp *kmsg.FetchRequestTopicPartition, first bool, remaining *int64, out *protocol.FetchPartition) {
	p, code := s.Store.Lookup(topic, fp.Partition)
	if code == 0 {
		code = store.CheckLeaderEpoch(fp.CurrentLeaderEpoch, leaderEpoch)
	}
	if out.ErrorCode = code; code == 0 {
		end := p.Log.EndOffset()
		out.ErrorCode = ReadPartition(p.Log, fp.FetchOffset, int64(fp.PartitionMaxBytes), remaining, first, end, end, out)
	}
}

func (s StoreFetchSource) Watch(_ int32, topic string, partition int32, ch chan struct{}) func() {
	p, ok := s.Store.Partition(topic, partition)
	if !ok {
		return nil
	}
	p.Appended.Watch(ch)
	return func() { p.Appended.Unwatch(ch) }
}

// ReadPartition fills out with the records of log from offset, below
// maxOffset (the high watermark for consumers, the log end for followers),
// taking at most partitionMax bytes and what *remaining of the response
// allows. The first partition with data may exceed both by its first batch,
// so that a reader is never stuck behind a batch bigger than its limits
// (KIP-74); later ones are cut, possibly inside a batch, which readers drop.
// highWatermark is what the response reports. It returns a Kafka error code.
func ReadPartition(l *commitlog.Log, offset, partitionMax int64, remaining *int64, first bool, maxOffset, highWatermark int64, out *protocol.FetchPartition) int16 {
	out.HighWatermark = highWatermark
	out.LastStableOffset = highWatermark // no transactions: everything below the HW is stable
	out.LogStartOffset = l.StartOffset()
	limit := min(partitionMax, *remaining)
	if limit <= 0 && !first {
		return 0
	}
	region, err := l.ReadUpTo(offset, int(max(limit, 0)), maxOffset)
	if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
		return kerrOffsetOutOfRange
	}
	if err != nil {
		return kerrKafkaStorageError
	}
	if !first {
		region.Size = min(region.Size, limit)
	}
	if region.Size > 0 {
		out.Records = network.FileSend(region.File, region.Pos, region.Size)
		*remaining -= region.Size
	}
	return 0
}

func recordsLen(s network.Send) int64 {
	if s.File != nil {
		return s.Len
	}
	return int64(len(s.Bytes))
}
