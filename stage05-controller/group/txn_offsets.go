package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Offsets committed in a transaction (KIP-98's consume-transform-produce):
// a transactional producer sends its consumer group's offsets here with
// TxnOffsetCommit, after AddOffsetsToTxn put the group's partition of
// __consumer_offsets in its transaction. They are written as the
// producer's transactional batch (its id and epoch), kept aside as pending
// (Group.txnOffsets), and become the group's committed offsets only when
// the transaction's COMMIT marker reaches that partition (CompleteTxn);
// an ABORT drops them. OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for a partition with pending offsets, so that a
// consumer taking it over after a rebalance waits for the decision
// instead of reading from an offset about to change. Loading reads the
// same way: a transaction's offset records count once its COMMIT marker
// is read.

// TxnOffsetCommit handles a TxnOffsetCommit request (Kafka's
// handleTxnCommitOffsets). respond is called once, possibly from another
// goroutine.
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest, respond func(*kmsg.TxnOffsetCommitResponse)) {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	fill := func(code func(p kmsg.TxnOffsetCommitRequestTopicPartition) int16) {
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	all := func(code int16) func(kmsg.TxnOffsetCommitRequestTopicPartition) int16 {
		return func(kmsg.TxnOffsetCommitRequestTopicPartition) int16 { return code }
	}
	g, code := c.lookup(req.Group, true)
	if code != 0 {
		if code == kerr.CoordinatorLoadInProgress.Code && req.Version < 2 {
			code = kerr.CoordinatorNotAvailable.Code
		}
		fill(all(code))
		respond(resp)
		return
	}
	defer g.unlock()
	if code := g.checkTxnCommit(req); code != 0 {
		fill(all(code))
		reply(g, respond, resp)
		return
	}
	now := c.now().UnixMilli()
	var keys, values [][]byte
	commits := map[commitlog.TopicPartition]Offset{}
	fill(func(p kmsg.TxnOffsetCommitRequestTopicPartition) int16 {
		if p.Metadata != nil && len(*p.Metadata) > c.cfg.MetadataMaxBytes {
			return kerr.OffsetMetadataTooLarge.Code
		}
		return 0
	})
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue
			}
			tp := commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			o := Offset{Offset: p.Offset, LeaderEpoch: -1, CommitTime: now, ExpireTime: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			commits[tp] = o
			keys, values = append(keys, offsetKey(g.id, tp)), append(values, offsetValue(o))
		}
	}
	if len(keys) == 0 {
		reply(g, respond, resp)
		return
	}
	// Pending before the append, as Kafka's storeOffsets does: the
	// transaction's marker may be acknowledged before this append's
	// callback runs, and must find them. A failed append takes them back.
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[commitlog.TopicPartition]Offset{}
	}
	if g.txnOffsets[req.ProducerID] == nil {
		g.txnOffsets[req.ProducerID] = map[commitlog.TopicPartition]Offset{}
	}
	for tp, o := range commits {
		g.txnOffsets[req.ProducerID][tp] = o
	}
	batch := txnBatchOf(c.now(), req.ProducerID, req.ProducerEpoch, keys, values)
	c.appendBatch(g, batch, func(code int16) {
		if code != 0 {
			g.lock()
			if offs := g.txnOffsets[req.ProducerID]; offs != nil {
				for tp, o := range commits {
					if offs[tp] == o {
						delete(offs, tp)
					}
				}
				if len(offs) == 0 {
					delete(g.txnOffsets, req.ProducerID)
				}
			}
			g.unlock()
		}
		code = txnCommitErrorCode(code)
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if _, ok := commits[commitlog.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; ok {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		respond(resp)
	})
}

// txnCommitErrorCode is commitErrorCode, keeping the producer-state
// answers a transactional producer acts on (a fenced epoch).
func txnCommitErrorCode(code int16) int16 {
	switch code {
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code, kerr.InvalidTxnState.Code:
		return code
	}
	return commitErrorCode(code)
}

// checkTxnCommit is Kafka's validateOffsetCommit for a transactional
// commit: a commit that names no member (generation -1, no member id, no
// instance id) is accepted whatever the group's state; one that names a
// member must be from a member of the current generation.
func (g *Group) checkTxnCommit(req *kmsg.TxnOffsetCommitRequest) int16 {
	switch {
	case g.is(Dead):
		return kerr.CoordinatorNotAvailable.Code
	case req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil:
		return 0
	}
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// CompleteTxn applies (commit) or drops (abort) the offsets producer pid
// committed in its transaction to the groups of partition p of
// __consumer_offsets: the transaction's marker was written there (stage
// 04's TxnCompleted; Kafka's onTransactionCompleted).
//
// A marker that comes while the partition loads is kept on its ownership
// and applied by the load (install), whose read of the log may have
// ended before the marker.
func (c *Coordinator) CompleteTxn(p int32, pid int64, commit bool) {
	c.mu.Lock()
	if o := c.owned[p]; o != nil && o.loading {
		o.decided = append(o.decided, decidedTxn{pid, commit})
		c.mu.Unlock()
		return
	}
	var groups []*Group
	for _, g := range c.groups {
		if g.partition == p {
			groups = append(groups, g)
		}
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.lock()
		g.completeTxnLocked(pid, commit)
		g.unlock()
	}
}

// completeTxnLocked applies or drops pid's pending offsets. Called with
// the group's lock held (or on a group not yet visible).
func (g *Group) completeTxnLocked(pid int64, commit bool) {
	offs, ok := g.txnOffsets[pid]
	if !ok {
		return
	}
	if commit {
		for tp, o := range offs {
			g.offsets[tp] = o
		}
	}
	delete(g.txnOffsets, pid)
}

// unstable reports whether a transaction has offsets pending for tp.
// Called with the group's lock held.
func (g *Group) unstable(tp commitlog.TopicPartition) bool {
	for _, offs := range g.txnOffsets {
		if _, ok := offs[tp]; ok {
			return true
		}
	}
	return false
}

// txnBatchOf encodes records as the producer's transactional batch, as
// Kafka's group coordinator writes a transactional offset commit:
// uncompressed, sequence 0 (a coordinator's write is not sequence
// checked).
func txnBatchOf(now time.Time, pid int64, epoch int16, keys, values [][]byte) []byte {
	recs := make([]record.Record, len(keys))
	for i := range keys {
		recs[i] = record.Record{OffsetDelta: int32(i), Key: keys[i], Value: values[i]}
	}
	b := record.NewBatch(now.UnixMilli(), recs...)
	b.Attributes = record.TransactionalFlag
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, epoch, 0
	out, err := record.AppendBatch(nil, b)
	if err != nil {
		panic(err) // records of our own making always encode
	}
	return out
}

// loadedTxn is what loading holds of an open transaction: its offset
// records by group, applied at its COMMIT marker.
type loadedTxn map[string]map[commitlog.TopicPartition]Offset

// applyTxn folds a transactional offset commit record into l's pending
// offsets of producer pid.
func (l *loaded) applyTxn(pid int64, key, value []byte) error {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil || k.Version > 1 || value == nil {
		return l.apply(key, value) // not an offset commit: as any record
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return err
	}
	o := Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTime: v.CommitTimestamp, ExpireTime: -1}
	if v.Version >= 3 {
		o.LeaderEpoch = v.LeaderEpoch
	}
	if l.txns == nil {
		l.txns = map[int64]loadedTxn{}
	}
	if l.txns[pid] == nil {
		l.txns[pid] = loadedTxn{}
	}
	if l.txns[pid][k.Group] == nil {
		l.txns[pid][k.Group] = map[commitlog.TopicPartition]Offset{}
	}
	l.txns[pid][k.Group][commitlog.TopicPartition{Topic: k.Topic, Partition: k.Partition}] = o
	return nil
}

// completeTxn applies or drops pid's pending offsets at its marker.
func (l *loaded) completeTxn(pid int64, commit bool) {
	if commit {
		for group, offs := range l.txns[pid] {
			if l.offsets[group] == nil {
				l.offsets[group] = map[commitlog.TopicPartition]Offset{}
			}
			for tp, o := range offs {
				l.offsets[group][tp] = o
			}
		}
	}
	delete(l.txns, pid)
}
