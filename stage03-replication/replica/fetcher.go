package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// fetchState is one partition's place in a fetcher.
type fetchState struct {
	p *Partition
	// epoch is the leader epoch the partition follows; fetches name it, so
	// the leader refuses them once a newer leader exists.
	epoch int32
	// truncating: before fetching, find where the log diverges from the
	// leader's (OffsetForLeaderEpoch) and cut it there (KIP-101, KIP-279).
	truncating bool
	// delayedUntil: after an error, wait replica.fetch.backoff.ms.
	delayedUntil time.Time
	// busy counts the fetcher's turns at this partition in progress: an
	// answer being applied, then told to the listener. remove waits for it
	// to fall to 0. Protected by the fetcher's mu.
	busy int
}

// fetcher is Kafka's ReplicaFetcherThread: one goroutine and one connection
// per leader broker, fetching for every partition this broker follows
// there. Fetches are long polls at the leader, which answers as soon as it
// appends, so replication latency is not bounded by the poll timeout.
type fetcher struct {
	m        *Manager
	leaderID int32
	addr     string
	logger   *slog.Logger

	mu    sync.Mutex                               // guards parts and each state's fields
	parts map[commitlog.TopicPartition]*fetchState // partitions fetched from this leader. Protected by mu.
	// settled is signalled when a state's busy count falls to 0: remove
	// waits on it, so that once remove returns no answer from this leader
	// can still land on the removed partition, and all it applied has been
	// told (Kafka's removePartitions waits on partitionMapLock for the
	// same reason; here no lock is held while an answer is applied or
	// told, so the listener may call back into this package).
	settled *sync.Cond // on mu

	// told gathers what the apply in progress has to tell the listener.
	// Only the goroutine applying (run) touches it.
	told news

	wake   chan struct{}      // a partition was added
	ctx    context.Context    // cancelled by shutdown, ending a fetch in flight
	cancel context.CancelFunc //
	done   chan struct{}      // closed when the loop has ended
}

func newFetcher(m *Manager, leaderID int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{m: m, leaderID: leaderID, addr: addr, parts: map[commitlog.TopicPartition]*fetchState{},
		logger: m.logger.With("fetcher", fmt.Sprintf("%d->%d", m.cfg.BrokerID, leaderID)),
		wake:   make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	f.settled = sync.NewCond(&f.mu)
	// Kafka's ReplicaFetcherManager logs the same: which leader, at which
	// address (its endpoint on the inter-broker listener).
	f.logger.Info("added fetcher to broker", "leader", leaderID, "addr", addr)
	go f.run()
	return f
}

// add starts (or restarts, at a new epoch) fetching a partition; it
// truncates first.
func (f *fetcher) add(tp commitlog.TopicPartition, p *Partition, epoch int32) {
	f.mu.Lock()
	f.parts[tp] = &fetchState{p: p, epoch: epoch, truncating: true}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// remove stops fetching a partition and returns how many remain. It waits
// for an answer being applied to it, and told, to finish.
func (f *fetcher) remove(tp commitlog.TopicPartition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.parts[tp]
	delete(f.parts, tp) // no new turn at s begins: apply checks parts
	for ok && s.busy > 0 {
		f.settled.Wait()
	}
	return len(f.parts)
}

// state returns tp's fetch state, if this fetcher fetches it.
func (f *fetcher) state(tp commitlog.TopicPartition) (*fetchState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.parts[tp]
	return s, ok
}

// states returns the partitions and their epochs, for moving them to
// another fetcher.
func (f *fetcher) states() map[commitlog.TopicPartition]*fetchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[commitlog.TopicPartition]*fetchState, len(f.parts))
	for tp, s := range f.parts {
		out[tp] = s
	}
	return out
}

// apply runs fn, which changes tp's log, if s is still tp's state, then
// tells the listener what fn gathered in f.told: a whole partition's
// answer applied, then told, with no lock held throughout (the listener
// may look partitions up). s counts as busy meanwhile, so that remove
// waits for both. It reports whether fn ran.
func (f *fetcher) apply(tp commitlog.TopicPartition, s *fetchState, fn func()) bool {
	f.mu.Lock()
	if f.parts[tp] != s {
		f.mu.Unlock()
		return false
	}
	s.busy++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if s.busy--; s.busy == 0 {
			f.settled.Broadcast()
		}
		f.mu.Unlock()
	}()
	fn()
	told := f.told
	f.told = nil
	told.tell()
	return true
}

// shutdown stops the loop and waits for it.
func (f *fetcher) shutdown() {
	f.cancel()
	<-f.done
}

// snapshot returns the partitions ready to truncate and to fetch, and the
// time the next delayed one becomes ready.
func (f *fetcher) snapshot(now time.Time) (truncate, fetch map[commitlog.TopicPartition]*fetchState, next time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	truncate, fetch = map[commitlog.TopicPartition]*fetchState{}, map[commitlog.TopicPartition]*fetchState{}
	for tp, s := range f.parts {
		switch {
		case now.Before(s.delayedUntil):
			if next.IsZero() || s.delayedUntil.Before(next) {
				next = s.delayedUntil
			}
		case s.truncating:
			truncate[tp] = s
		default:
			fetch[tp] = s
		}
	}
	return truncate, fetch, next
}

func (f *fetcher) delay(tp commitlog.TopicPartition, s *fetchState, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parts[tp] == s {
		s.delayedUntil = time.Now().Add(f.m.cfg.FetchBackoff)
	}
	f.logger.Info("partition fetch delayed", "partition", tp, "err", err, "backoff", f.m.cfg.FetchBackoff)
}

// build 03.D: the replica fetcher: truncate by OffsetsForLeaderEpoch, then fetch and append
// tests: TestAnEpochThatStartsAtOurLogEndIsForgottenWhenTheLeaderAnswers, TestFollowerTruncatesWhereTheLeadersAnswerSays, TestAFollowerCatchingUpBoundsTheHighWatermark

func (f *fetcher) run() {
	defer close(f.done)
	var client *protocol.Client
	defer func() {
		if client != nil {
			client.Close()
		}
	}()
	backoff := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-f.ctx.Done():
			return false
		case <-f.wake:
		case <-t.C:
		}
		return true
	}
	for f.ctx.Err() == nil {
		if resumed := f.m.fetchPaused(); resumed != nil {
			select {
			case <-f.ctx.Done():
				return
			case <-resumed:
			}
			continue
		}
		truncate, fetch, next := f.snapshot(time.Now())
		if len(truncate) == 0 && len(fetch) == 0 {
			wait := time.Hour
			if !next.IsZero() {
				wait = time.Until(next)
			}
			if !backoff(wait) {
				return
			}
			continue
		}
		if client == nil {
			ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
			c, err := protocol.Dial(ctx, f.addr, fmt.Sprintf("replica-fetcher-%d", f.m.cfg.BrokerID))
			cancel()
			if err != nil {
				f.logger.Info("cannot reach leader", "addr", f.addr, "err", err)
				if !backoff(f.m.cfg.FetchBackoff) {
					return
				}
				continue
			}
			client = c
		}
		if !f.m.beginRequest() {
			continue // paused meanwhile: wait at the top
		}
		var err error
		if len(truncate) > 0 {
			err = f.truncate(client, truncate)
		} else {
			err = f.fetch(client, fetch)
		}
		f.m.endRequest()
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.logger.Info("request to leader failed", "err", err)
			client.Close()
			client = nil
			if !backoff(f.m.cfg.FetchBackoff) {
				return
			}
		}
	}
}

// truncate finds where each partition's log diverges from the leader's and
// cuts it there (KIP-101, KIP-279): it asks the leader where our latest
// epoch ends, and truncateFromAnswer applies each answer. A log with no
// epoch falls back to the high watermark.
func (f *fetcher) truncate(client *protocol.Client, parts map[commitlog.TopicPartition]*fetchState) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.cfg.BrokerID
	byTopic := map[string]int{}
	for tp, s := range parts {
		epoch := s.p.Epochs.LatestEpoch()
		if epoch == UndefinedEpoch {
			// No epochs: an empty log, or one written before epochs.
			f.apply(tp, s, func() { f.finishTruncation(tp, s, s.p.HighWatermark(), true) })
			continue
		}
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			req.Topics = append(req.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: tp.Topic})
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.Partition, s.epoch, epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	resp, err := client.Request(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, rp := range rt.Partitions {
			tp := commitlog.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			s, ok := parts[tp]
			if !ok {
				continue
			}
			f.apply(tp, s, func() { f.truncateFromAnswer(tp, s, &rp) })
		}
	}
	return nil
}

// truncateFromAnswer applies the leader's OffsetForLeaderEpoch answer.
func (f *fetcher) truncateFromAnswer(tp commitlog.TopicPartition, s *fetchState, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	if rp.ErrorCode != 0 {
		f.delay(tp, s, kerr.ErrorForCode(rp.ErrorCode))
		return
	}
	// exercise 03.4: truncate by the leader's OffsetsForLeaderEpoch answer
	// hint: the logs agree up to where the shared epoch ends first, on either side; a follower that never had the leader's epoch cuts back and asks again (KIP-279)
	// tests: TestFollowerTruncatesWhereTheLeadersAnswerSays
	// break 03.b1: truncate to the high watermark, as followers did before KIP-101
	// predict: after a leader change, which records can a follower that cuts its log back to its high watermark lose, or keep while the new leader lacks them? Which check of the tests below fails first?
	// tests: TestFollowerTruncatesWhereTheLeadersAnswerSays, TestAnEpochThatStartsAtOurLogEndIsForgottenWhenTheLeaderAnswers
	leo := s.p.Log.EndOffset()
	if rp.LeaderEpoch == UndefinedEpoch || rp.EndOffset == UndefinedOffset {
		f.finishTruncation(tp, s, s.p.HighWatermark(), true)
		return
	}
	ourEpoch, ourEnd := s.p.Epochs.EndOffsetFor(rp.LeaderEpoch, leo)
	if ourEpoch != rp.LeaderEpoch {
		// We never had the leader's epoch: cut back to where our last
		// epoch before it ends, and ask again for that one (KIP-279).
		f.finishTruncation(tp, s, min(ourEnd, rp.EndOffset), false)
		return
	}
	// Both have the epoch: the logs agree up to where it ends on the side
	// where it ends first.
	f.finishTruncation(tp, s, min(ourEnd, rp.EndOffset, leo), true)
	// broken:
	// f.finishTruncation(tp, s, s.p.HighWatermark(), true)
	// end break
	// end exercise
}

// finishTruncation cuts the log at offset; done ends the truncation phase.
// Called from apply.
func (f *fetcher) finishTruncation(tp commitlog.TopicPartition, s *fetchState, offset int64, done bool) {
	before := s.p.Log.EndOffset()
	if offset < before {
		if err := s.p.truncateTo(offset, &f.told); err != nil {
			f.delay(tp, s, err)
			return
		}
		f.logger.Info("truncated diverging log", "partition", tp, "from", before, "to", s.p.Log.EndOffset())
	} else if err := s.p.Epochs.TruncateFromEnd(before); err != nil {
		// No record to cut, but an epoch may start at our log end: one we
		// led without appending (MakeLeader records its epoch there). It
		// goes, as in Kafka's UnifiedLog.truncateTo; kept, it would be the
		// next question to the leader again, with the same answer, and
		// the truncation would never end.
		f.delay(tp, s, err)
		return
	}
	if done {
		f.mu.Lock()
		if f.parts[tp] == s {
			s.truncating = false
		}
		f.mu.Unlock()
	}
}

// followerFetchVersion is the highest Fetch version a follower sends: the
// last that names topics by name.
const followerFetchVersion = 12

// fetch sends one Fetch for every ready partition, at each one's log end,
// and appends what comes back.
func (f *fetcher) fetch(client *protocol.Client, parts map[commitlog.TopicPartition]*fetchState) error {
	cfg := f.m.cfg
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = cfg.BrokerID
	req.MaxWaitMillis = int32(cfg.FetchWaitMax / time.Millisecond)
	req.MinBytes = cfg.FetchMinBytes
	req.MaxBytes = cfg.FetchResponseMaxBytes
	req.SessionEpoch = -1 // full fetches: no fetch session
	offsets := map[commitlog.TopicPartition]int64{}
	byTopic := map[string]int{}
	for tp, s := range parts {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			req.Topics = append(req.Topics, kmsg.FetchRequestTopic{Topic: tp.Topic})
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		offsets[tp] = s.p.Log.EndOffset()
		fp.Partition, fp.FetchOffset, fp.CurrentLeaderEpoch = tp.Partition, offsets[tp], s.epoch
		fp.LogStartOffset, fp.PartitionMaxBytes = s.p.Log.StartOffset(), cfg.FetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, fp)
	}
	// The leader holds the fetch up to FetchWaitMax; allow for that.
	ctx, cancel := context.WithTimeout(f.ctx, cfg.FetchWaitMax+30*time.Second)
	defer cancel()
	// Fetch v12 at most: a follower names topics by name (Kafka's
	// followers fetch by topic id from v13 on, with IBP 3.1+). The leader
	// serves both.
	resp, err := client.Request(ctx, protocol.CapVersion(req, followerFetchVersion))
	if err != nil {
		return err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return kerr.ErrorForCode(fr.ErrorCode)
	}
	var ahead []commitlog.TopicPartition
	for _, rt := range fr.Topics {
		for _, rp := range rt.Partitions {
			tp := commitlog.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			s, ok := parts[tp]
			if !ok {
				continue
			}
			f.apply(tp, s, func() {
				if s.p.Log.EndOffset() != offsets[tp] {
					return // truncated meanwhile: this answer is for an old position
				}
				if f.handlePartition(tp, s, &rp) {
					ahead = append(ahead, tp)
				}
			})
		}
	}
	for _, tp := range ahead {
		if err := f.truncateToLeaderEnd(client, tp, parts[tp]); err != nil {
			return err
		}
	}
	return nil
}

// truncateToLeaderEnd handles a follower whose log ends past its leader's
// (Kafka's fetchOffsetAndTruncate): ask the leader for its log end, as a
// replica (ListOffsets latest with our replica id), and cut there.
func (f *fetcher) truncateToLeaderEnd(client *protocol.Client, tp commitlog.TopicPartition, s *fetchState) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = f.m.cfg.BrokerID
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = tp.Partition, s.epoch, -1
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: tp.Topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
	ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
	defer cancel()
	resp, err := client.Request(ctx, req)
	if err != nil {
		return err
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
		return fmt.Errorf("ListOffsets for %s: malformed answer", tp)
	}
	answer := lr.Topics[0].Partitions[0]
	f.apply(tp, s, func() {
		if answer.ErrorCode != 0 {
			f.delay(tp, s, kerr.ErrorForCode(answer.ErrorCode))
			return
		}
		f.logger.Warn("follower ahead of its leader; truncating to the leader's log end", "partition", tp,
			"log_end", s.p.Log.EndOffset(), "leader_log_end", answer.Offset)
		f.finishTruncation(tp, s, min(answer.Offset, s.p.Log.EndOffset()), true)
	})
	return nil
}

// handlePartition applies one partition's fetch answer; it reports whether
// the follower is ahead of its leader (OFFSET_OUT_OF_RANGE above the
// leader's log start), which needs a request to the leader to resolve.
// Called from apply.
func (f *fetcher) handlePartition(tp commitlog.TopicPartition, s *fetchState, rp *kmsg.FetchResponseTopicPartition) (ahead bool) {
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
		// The records and the high watermark first, then the leader's log
		// start (DeleteRecords there), which the new high watermark may
		// now allow (Kafka's processPartitionData, in that order).
		if _, err := s.p.appendAsFollower(rp.RecordBatches, rp.HighWatermark, &f.told); err != nil {
			f.delay(tp, s, err)
		} else if err := s.p.maybeIncrementLogStartOffset(rp.LogStartOffset, &f.told); err != nil {
			f.delay(tp, s, err)
		}
	case errors.Is(err, kerr.OffsetOutOfRange):
		if leo := s.p.Log.EndOffset(); rp.LogStartOffset > leo {
			// The leader deleted what we need: start over at its start.
			f.logger.Warn("leader no longer has our next offset; starting over", "partition", tp,
				"log_end", leo, "leader_log_start", rp.LogStartOffset)
			if err := s.p.truncateFullyAndStartAt(rp.LogStartOffset, &f.told); err != nil {
				f.delay(tp, s, err)
			}
			return false
		}
		return true
	default:
		// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH:
		// the leader moved or is moving; the controller will tell us.
		f.delay(tp, s, err)
	}
	return false
}

// end build
