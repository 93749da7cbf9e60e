package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommitVersion and offsetFetchVersion are the highest versions
// sent: OffsetCommit v9+ and OffsetFetch v8+ change shape (KIP-848's
// member epochs, KIP-709's batched groups).
const (
	offsetCommitVersion = 8
	offsetFetchVersion  = 7
)

// An offsetsOf picks which offset of a partition to commit, and whether
// it may only move the committed offset forward.
type offsetsOf func(*partitionState) (offset int64, forwardOnly bool)

// consumedOffsets are the background committer's: the records before the
// latest Poll, which the application asked past. They only move the
// committed offset forward: consumed lags position, so after a
// CommitSync of the position, committing consumed would take it back.
func consumedOffsets(s *partitionState) (int64, bool) { return s.consumed.Load(), true }

// positions are CommitSync's, CommitAsync's and Close's: everything Poll
// returned, backwards too (after a Seek back, the application means it).
func positions(s *partitionState) (int64, bool) { return s.position.Load(), false }

// CommitSync commits the position of every assigned partition (what Poll
// returned so far) and waits for the coordinator's answer.
func (c *Consumer) CommitSync(ctx context.Context) error {
	if c.group == nil {
		return fmt.Errorf("%w: commits need %s", ErrConfig, KeyGroupID)
	}
	return c.group.commit(ctx, positions)
}

// CommitAsync is CommitSync in the background: the positions are read
// when the committer gets to it, after every commit asked for before.
// done (may be nil) runs with the result on the committer's goroutine
// and must not block.
func (c *Consumer) CommitAsync(done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if c.group == nil {
		done(fmt.Errorf("%w: commits need %s", ErrConfig, KeyGroupID))
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
	if !c.group.committer.enqueue(commitRequest{ctx, positions, func(err error) { cancel(); done(err) }}) {
		cancel()
		done(ErrClosed)
	}
}

// A commitRequest asks the committer to commit, for the partitions
// assigned when it runs, the offsets which picks.
type commitRequest struct {
	ctx   context.Context
	which offsetsOf
	done  func(error) // runs on the committer's goroutine
}

// committer is the queue of a member's commits. Every commit but Close's
// last one (auto, CommitSync, CommitAsync, before a rebalance) goes
// through it and is sent by commitLoop alone, in order: two commits of
// one partition never race on the wire, so an older offset never lands
// after a newer one. (Kafka gets this from its single application
// thread.) The offsets themselves are read from the atomics when the
// commit is sent; the lock guards only the queue.
type committer struct {
	mu     sync.Mutex      // guards queue and closed
	queue  []commitRequest // in the order asked
	closed bool            // commitLoop has returned: enqueue refuses
	wake   chan struct{}   // one token: the queue has something
	done   chan struct{}   // closed when commitLoop returns
}

func newCommitter() *committer {
	return &committer{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// enqueue adds r, or reports false once the committer has stopped.
func (q *committer) enqueue(r commitRequest) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.queue = append(q.queue, r)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take empties the queue; with stop, it also refuses later requests.
func (q *committer) take(stop bool) []commitRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	rs := q.queue
	q.queue = nil
	q.closed = q.closed || stop
	return rs
}

// commit asks the committer for a commit of the offsets which picks and
// waits for it.
func (m *member) commit(ctx context.Context, which offsetsOf) error {
	result := make(chan error, 1)
	if !m.committer.enqueue(commitRequest{ctx, which, func(err error) { result <- err }}) {
		return ErrClosed
	}
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err() // the committer still sends it; nobody waits
	}
}

// commitLoop is the member's committer: it sends the queued commits in
// order and, with enable.auto.commit, every auto.commit.interval.ms what
// the application consumed. It reads the partition states' atomics; Poll
// and the fetchers never wait for it.
func (m *member) commitLoop() {
	c := m.c
	defer close(m.committer.done)
	var tick <-chan time.Time
	if c.cfg.EnableAutoCommit {
		t := time.NewTicker(c.cfg.AutoCommitInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-m.ctx.Done():
			for _, r := range m.committer.take(true) {
				r.done(ErrClosed)
			}
			return
		case <-m.committer.wake:
			for _, r := range m.committer.take(false) {
				r.done(m.commitNow(r.ctx, r.which))
			}
		case <-tick:
			ctx, cancel := context.WithTimeout(m.ctx, c.cfg.RequestTimeout)
			if err := m.commitNow(ctx, consumedOffsets); err != nil && m.ctx.Err() == nil {
				c.log.Info("auto commit failed", "group", c.cfg.GroupID, "err", err)
			}
			cancel()
		}
	}
}

// A pending commit is one partition's offset as it was read.
type pending struct {
	state  *partitionState
	offset int64
}

// snapshot reads, for each partition of a, the offset which picks, where
// it is known and would change what is committed.
func snapshot(a *assignment, which offsetsOf) []pending {
	var out []pending
	for _, s := range a.list {
		off, forwardOnly := which(s)
		committed := s.committed.Load()
		if off == unknown || off == committed || forwardOnly && off < committed {
			continue
		}
		out = append(out, pending{s, off})
	}
	return out
}

// commitNow commits the offsets which picks for the current assignment,
// on the caller's goroutine: commitLoop's, or close's once commitLoop
// has returned.
func (m *member) commitNow(ctx context.Context, which offsetsOf) error {
	return m.commitOffsets(ctx, snapshot(m.c.assigned.Load(), which))
}

// commitOffsets sends one OffsetCommit with the membership's generation
// and records each acknowledged offset in its partition's committed.
func (m *member) commitOffsets(ctx context.Context, offsets []pending) error {
	if len(offsets) == 0 {
		return nil
	}
	c := m.c
	conn, err := m.coordinator(ctx)
	if err != nil {
		return err
	}
	gen := m.gen.Load()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = c.cfg.GroupID, gen.id, gen.memberID
	for _, o := range offsets {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != o.state.tp.Topic {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = o.state.tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = o.state.tp.Partition, o.offset
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	resp, err := request[*kmsg.OffsetCommitResponse](ctx, conn, req, offsetCommitVersion)
	if err != nil {
		m.lostCoordinator(conn)
		return fmt.Errorf("commit offsets of %s: %w", c.cfg.GroupID, err)
	}
	want := map[TopicPartition]pending{}
	for _, o := range offsets {
		want[o.state.tp] = o
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o, ok := want[TopicPartition{t.Topic, p.Partition}]
			if !ok {
				continue
			}
			if err := m.checkCode(conn, p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("commit %s[%d] at %d: %w", t.Topic, p.Partition, o.offset, err))
				continue
			}
			// Responses on one connection come in order, so a later
			// commit's answer is never overwritten by an earlier one's.
			o.state.committed.Store(o.offset)
		}
	}
	return errors.Join(errs...)
}

// fetchCommitted asks the coordinator for parts' committed offsets; a
// partition without one is left out.
func (m *member) fetchCommitted(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	if len(parts) == 0 {
		return out, nil
	}
	c := m.c
	for {
		conn, err := m.coordinator(ctx)
		if err != nil {
			return nil, err
		}
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = c.cfg.GroupID
		for _, tp := range parts {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic = tp.Topic
				req.Topics = append(req.Topics, t)
			}
			t := &req.Topics[len(req.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		resp, err := request[*kmsg.OffsetFetchResponse](ctx, conn, req, offsetFetchVersion)
		if err != nil {
			m.lostCoordinator(conn)
			return nil, fmt.Errorf("fetch offsets of %s: %w", c.cfg.GroupID, err)
		}
		err = m.checkCode(conn, resp.ErrorCode)
		if errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.NotCoordinator) {
			c.sleep(c.cfg.RetryBackoff) // the coordinator is loading the group, or moved
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			return out, nil // kfake's answer for a group that never committed: nothing committed
		}
		if err != nil {
			return nil, fmt.Errorf("fetch offsets of %s: %w", c.cfg.GroupID, err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("fetch offsets of %s: %s[%d]: %w", c.cfg.GroupID, t.Topic, p.Partition, err)
				}
				if p.Offset >= 0 {
					out[TopicPartition{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
		return out, nil
	}
}
