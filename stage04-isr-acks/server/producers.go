package server

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage03-replication/replica"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// producerStates holds each partition's producer state (package producer):
// a leader updates it as it appends, a follower as it replicates, and a
// partition's state is first built by reading its log, so that it is the
// same on every replica and survives a restart.
//
// Locks: mu guards the map and is held for map operations only, never
// while a log is read or a file written: building one partition's state
// (reading up to a segment of its log) holds up no other partition's
// produces and replicated fetches, only the callers that need that same
// state, which wait for it (partitionProducers.built). Each partition's
// snapshot files are written under its own fileMu.
type producerStates struct {
	logger *slog.Logger
	// held reports whether p is still this broker's replica of its
	// partition: false once StopReplica deleted it, after which its log
	// directory's name may belong to a new partition of the same name. nil:
	// always (tests). Set before the broker starts.
	held func(p *replica.Partition) bool
	// rebuild builds a state from a log: rebuild, unless a test slows it.
	// Set before the broker starts.
	rebuild func(st *producer.State, l *commitlog.Log, logger *slog.Logger) (int64, error)

	mu     sync.Mutex
	states map[commitlog.TopicPartition]*partitionProducers // Protected by mu.
}

type partitionProducers struct {
	p *replica.Partition
	// built is closed once the state is built from the log, or failed to
	// be: by the first caller that needed it, outside producerStates.mu;
	// the others wait for it.
	built chan struct{}
	st    *producer.State // set before built is closed, nil if err is set
	err   error           // set before built is closed
	// segment is the log's active segment when the state was last
	// snapshotted (or built): when the log has rolled past it, the next
	// recorded batch writes a snapshot.
	segment atomic.Int64
	// fileMu is held while this partition's snapshot files are written or
	// removed, and by forget, so that once forget has returned no file is
	// written into a directory that may now be another partition's.
	fileMu  sync.Mutex
	removed bool // the partition was deleted. Protected by fileMu.
}

// get returns p's state and whether this call built it from the log
// (which then already holds anything just appended).
func (ps *producerStates) get(p *replica.Partition) (*producer.State, bool, error) {
	pp, built, err := ps.entry(p)
	if err != nil {
		return nil, false, err
	}
	return pp.st, built, nil
}

// entry returns p's entry, building its state from the log if this is
// the first use (or p is a partition deleted and created again: the old
// state is not its), and reports whether this call built it. A partition
// that was deleted gets an error wrapping replica.ErrNotReplica, and no
// entry.
func (ps *producerStates) entry(p *replica.Partition) (*partitionProducers, bool, error) {
	tp := p.TopicPartition
	ps.mu.Lock()
	pp, ok := ps.states[tp]
	if ok && pp.p == p {
		ps.mu.Unlock()
		<-pp.built
		if pp.err != nil {
			return nil, false, pp.err
		}
		return pp, false, nil
	}
	// The first use of p, or p is a new partition of a deleted one's name.
	// Checked and entered under mu: forget, which runs after a deletion,
	// then finds the entry, or this finds the deletion (a request that
	// looked p up before StopReplica deleted it).
	if !ps.holds(p) {
		ps.mu.Unlock()
		return nil, false, fmt.Errorf("%w: %s was deleted", replica.ErrNotReplica, tp)
	}
	old := pp
	pp = &partitionProducers{p: p, built: make(chan struct{})}
	if ps.states == nil {
		ps.states = map[commitlog.TopicPartition]*partitionProducers{}
	}
	ps.states[tp] = pp
	ps.mu.Unlock()
	if ok {
		old.retire() // the deleted partition's: it writes no more files
	}

	st := producer.NewState()
	build := ps.rebuild
	if build == nil {
		build = rebuild
	}
	from, err := build(st, p.Log, ps.logger)
	if err != nil {
		ps.mu.Lock()
		if ps.states[tp] == pp {
			delete(ps.states, tp) // the next caller tries again
		}
		ps.mu.Unlock()
		pp.err = fmt.Errorf("build the producer state of %s: %w", tp, err)
		close(pp.built)
		return nil, false, pp.err
	}
	ps.logger.Debug("producer state built", "partition", tp, "read_from", from,
		"log_start", p.Log.StartOffset(), "log_end", p.Log.EndOffset(), "producers", st.Len())
	st.LastStableOffset(p.HighWatermark()) // the replayed markers below the high watermark hold nothing
	pp.st = st
	pp.segment.Store(p.Log.ActiveBaseOffset())
	close(pp.built)
	return pp, true, nil
}

// holds reports whether p is still this broker's replica (held). It
// takes the partition store's lock, a leaf: callable with mu held.
func (ps *producerStates) holds(p *replica.Partition) bool { return ps.held == nil || ps.held(p) }

// forget drops p's state once p was deleted (StopReplica with
// delete_partitions), so that a partition of the same name created later
// starts from its own log, and waits for a snapshot of p being written.
func (ps *producerStates) forget(p *replica.Partition) {
	ps.mu.Lock()
	pp, ok := ps.states[p.TopicPartition]
	if ok && pp.p == p {
		delete(ps.states, p.TopicPartition)
	}
	ps.mu.Unlock()
	if ok && pp.p == p {
		pp.retire()
	}
}

// retire marks pp's partition deleted: its files are no longer written.
func (pp *partitionProducers) retire() {
	pp.fileMu.Lock()
	pp.removed = true
	pp.fileMu.Unlock()
}

// files runs f, which writes or removes pp's snapshot files, unless pp's
// partition was deleted; under pp.fileMu, and no other lock of ps.
func (ps *producerStates) files(pp *partitionProducers, f func(dir string)) {
	pp.fileMu.Lock()
	defer pp.fileMu.Unlock()
	if pp.removed || !ps.holds(pp.p) {
		return
	}
	f(pp.p.Log.Dir())
}

// builtEntries lists the entries whose states are built, for the tasks that go
// over every partition (snapshot, expire) without holding ps.mu.
func (ps *producerStates) builtEntries() []*partitionProducers {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*partitionProducers, 0, len(ps.states))
	for _, pp := range ps.states {
		select {
		case <-pp.built:
			if pp.err == nil {
				out = append(out, pp)
			}
		default: // being built: nothing to snapshot or expire yet
		}
	}
	return out
}

// keepSnapshots is how many snapshots a roll leaves: the newest, and the
// one before in case the newest cannot be read.
const keepSnapshots = 2

// recorded is called after batches were appended to the partition's log and recorded
// in its state, by the one goroutine that does both (a leader's produce
// under State.Serialize, a follower's fetcher). If the log rolled since
// the last snapshot, the state holds every idempotent batch below the new
// segment's base offset, and is written to a snapshot named by it, as
// Kafka's Log.roll does: a restart after a crash then reads only the
// batches from there on, not the whole log. The write is synchronous, as
// Kafka's (once per segment, segment.bytes apart), and holds only this
// partition's fileMu.
func (ps *producerStates) recorded(pp *partitionProducers) {
	base := pp.p.Log.ActiveBaseOffset()
	if base <= pp.segment.Load() {
		return
	}
	pp.segment.Store(base)
	ps.files(pp, func(dir string) {
		if err := writeSnapshot(pp.st, dir, base); err != nil {
			ps.logger.Error("producer snapshot at roll", "partition", pp.p.TopicPartition, "err", err)
			return
		}
		offsets := slices.Sorted(maps.Keys(snapshots(dir)))
		if len(offsets) > keepSnapshots {
			keep := offsets[len(offsets)-keepSnapshots]
			removeSnapshots(dir, func(offset int64) bool { return offset < keep }, ps.logger)
		}
	})
}

// writeSnapshot writes st as of offset to dir's snapshot file for offset.
func writeSnapshot(st *producer.State, dir string, offset int64) error {
	return commitlog.WriteFileAtomic(filepath.Join(dir, producer.SnapshotFileName(offset)), st.SnapshotAt(offset))
}

// snapshot writes every partition's producer state to one snapshot file
// and removes the others: a clean shutdown. Kafka names that snapshot by
// the log end, and a restart then remembers each producer's last batch
// only; but a broker that stops had batches appended and not yet
// acknowledged (an acks=all request waiting for followers that stop too),
// and a producer retries all of its five in flight, oldest first: the
// restarted broker would refuse the first as out of order, and the client,
// bumping its epoch to go on, would write them twice (found by final's
// fault suite, a full-cluster restart). So the snapshot is taken at the
// first offset of the oldest batch any producer's window holds: the
// restart reads those batches back from the log and every window is whole
// again. Two bounds: not below the active segment's base offset (a
// restart reads one segment at most, as after a crash; a producer idle
// for a segment's worth of others' batches keeps only the newer part of
// its window), and not above the log end read before the state (the
// state holds at least what the log held there; the batches past it, and
// those recorded twice, are skipped on reading). A deleted partition's
// state is not written: its directory may be a new partition's by now.
func (ps *producerStates) snapshot() {
	for _, pp := range ps.builtEntries() {
		ps.files(pp, func(dir string) {
			at := pp.p.Log.EndOffset()
			if start, ok := pp.st.WindowStart(); ok {
				at = min(at, max(start, pp.p.Log.ActiveBaseOffset()))
			}
			if err := writeSnapshot(pp.st, dir, at); err != nil {
				ps.logger.Error("producer snapshot", "partition", pp.p.TopicPartition, "err", err)
				return
			}
			removeSnapshots(dir, func(offset int64) bool { return offset != at }, ps.logger)
		})
	}
}

// expire forgets, in every partition, the producers idle for longer than
// d (by their batches' timestamps, as Kafka).
func (ps *producerStates) expire(d time.Duration) {
	cutoff := time.Now().Add(-d).UnixMilli()
	for _, pp := range ps.builtEntries() {
		if n := pp.st.ExpireBefore(cutoff); n > 0 {
			ps.logger.Info("expired idle producer ids", "partition", pp.p.TopicPartition, "count", n, "idle_for", d)
		}
	}
}

// snapshots lists a log directory's snapshot files by offset.
func snapshots(dir string) map[int64]string {
	out := map[int64]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".snapshot")
		if !ok {
			continue
		}
		if offset, err := strconv.ParseInt(name, 10, 64); err == nil {
			out[offset] = filepath.Join(dir, e.Name())
		}
	}
	return out
}

// removeSnapshots deletes the snapshots whose offsets match.
func removeSnapshots(dir string, match func(offset int64) bool, logger *slog.Logger) {
	for offset, path := range snapshots(dir) {
		if match(offset) {
			if err := os.Remove(path); err != nil {
				logger.Warn("removing a producer snapshot", "path", path, "err", err)
			}
		}
	}
}

// ProducerState returns a partition's producer state, building it from the
// log on first use (and reporting whether this call did).
func (s *Server) ProducerState(p *replica.Partition) (*producer.State, bool, error) {
	return s.producers.get(p)
}

// batchOf is what the producer state keeps of a batch.
func batchOf(h *record.BatchHeader) producer.Batch {
	last := int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1)) // sequences wrap to 0
	return producer.Batch{FirstSeq: h.BaseSequence, LastSeq: last, FirstOffset: h.BaseOffset,
		LastOffset: h.LastOffset(), Timestamp: h.MaxTimestamp, Transactional: h.Attributes.Transactional()}
}

// observe records the idempotent batches and transaction markers among
// whole batches, copied by a follower.
func observe(st *producer.State, l *commitlog.Log, batches []byte, logger *slog.Logger) {
	for len(batches) > 0 {
		h, err := record.ReadHeader(batches)
		if err != nil || h.Size() > len(batches) {
			return
		}
		recordBatch(st, l, &h, batches[:h.Size()], logger)
		batches = batches[h.Size():]
	}
}

// recordBatch records one batch in the producer state: an idempotent
// producer's batch, or a transaction marker, which closes the producer's
// transaction and, for an ABORT, adds it to the log's aborted transaction
// index (Kafka's UnifiedLog.append after ProducerStateManager.update). A
// marker that does not decode is logged and skipped: it was validated
// when it was first appended.
func recordBatch(st *producer.State, l *commitlog.Log, h *record.BatchHeader, batch []byte, logger *slog.Logger) {
	switch {
	case h.ProducerID < 0:
	case h.Attributes.Control():
		m, err := record.ReadMarker(h, batch)
		if err != nil {
			logger.Warn("skipping a control batch", "offset", h.BaseOffset, "err", err)
			return
		}
		completeTxn(st, l, m, h.BaseOffset, h.MaxTimestamp, logger)
	default:
		st.Append(h.ProducerID, h.ProducerEpoch, batchOf(h))
	}
}

// completeTxn closes the marker's transaction and indexes it if aborted.
func completeTxn(st *producer.State, l *commitlog.Log, m record.Marker, offset, timestamp int64, logger *slog.Logger) {
	txn, ok := st.Complete(m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, offset, timestamp)
	if !ok || !txn.Aborted {
		return
	}
	entry := commitlog.AbortedTxn{ProducerID: txn.ProducerID, FirstOffset: txn.FirstOffset, LastOffset: txn.LastOffset,
		LastStableOffset: st.StableAfter(txn)}
	if err := l.AddAbortedTxn(entry); err != nil {
		// The marker is in the log; a restart's replay adds the entry back.
		logger.Error("aborted transaction index", "dir", l.Dir(), "producer", txn.ProducerID, "marker", offset, "err", err)
	}
}

// rebuild loads the latest snapshot at or below the log end, if one reads
// whole, and reads the batches after it into st (all of the log without
// one), as Kafka's ProducerStateManager does at load. It returns the
// offset it read the log from.
func rebuild(st *producer.State, l *commitlog.Log, logger *slog.Logger) (from int64, err error) {
	from = l.StartOffset()
	best := int64(-1)
	for offset := range snapshots(l.Dir()) {
		if offset <= l.EndOffset() && offset > best {
			best = offset
		}
	}
	if best >= 0 {
		path := filepath.Join(l.Dir(), producer.SnapshotFileName(best))
		data, err := os.ReadFile(path)
		if err == nil {
			err = st.LoadSnapshot(data)
		}
		if err != nil { // LoadSnapshot changes nothing when it fails
			logger.Warn("ignoring a producer snapshot; reading the whole log", "path", path, "err", err)
		} else {
			// The snapshot may hold batches appended while it was taken,
			// at or past its offset: those come from the log, as it is now.
			st.TruncateFrom(best)
			st.RemoveBefore(l.StartOffset())
			from = max(from, best)
		}
	}
	return from, readBatches(st, l, from, logger)
}

// readBatches reads the log's batches from offset into st.
func readBatches(st *producer.State, l *commitlog.Log, from int64, logger *slog.Logger) error {
	const chunk = 1 << 20
	for offset := from; offset < l.EndOffset(); {
		region, err := l.Read(offset, chunk)
		if errors.Is(err, commitlog.ErrOffsetOutOfRange) {
			return nil // retention moved the start meanwhile; what is left was read
		}
		if err != nil {
			return err
		}
		data, err := region.Bytes()
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return nil
		}
		_, size, err := record.PeekSize(data)
		if err != nil {
			return err
		}
		if size > len(data) { // one batch larger than the chunk
			if region, err = l.Read(offset, size); err != nil {
				return err
			}
			if data, err = region.Bytes(); err != nil {
				return err
			}
		}
		next := offset
		for b := data; len(b) > 0; {
			h, err := record.ReadHeader(b)
			if err != nil || h.Size() > len(b) {
				break
			}
			recordBatch(st, l, &h, b[:h.Size()], logger)
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
		if next == offset {
			return nil // nothing whole to read
		}
		offset = next
	}
	return nil
}
