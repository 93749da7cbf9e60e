package commitlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// produceTxn appends one transactional batch of producer pid.
func (h *cleanerHarness) produceTxn(pid int64, epoch int16, recs ...kv) (first, last int64) {
	h.t.Helper()
	b := record.NewBatch(h.clock.Now().UnixMilli())
	b.Attributes, b.ProducerID, b.ProducerEpoch, b.BaseSequence = record.TransactionalFlag, pid, epoch, 0
	return h.produceBatch(b, recs...)
}

// endTxn appends a COMMIT or ABORT marker of producer pid; an aborted
// transaction that began at first is recorded in the .txnindex, as stage 04
// does. It returns the marker's offset.
func (h *cleanerHarness) endTxn(pid int64, epoch int16, commit bool, first int64) (int64, AbortedTxn) {
	h.t.Helper()
	m := record.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}
	off, _, err := h.l.Append(record.AppendMarker(nil, m, h.clock.Now().UnixMilli()))
	require.NoError(h.t, err)
	if commit {
		return off, AbortedTxn{}
	}
	txn := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: off, LastStableOffset: off + 1}
	require.NoError(h.t, h.l.AddAbortedTxn(txn))
	return off, txn
}

// controlBatch is a control batch as read back: its header and, when it
// still holds its record, its marker.
type controlBatch struct {
	h      record.BatchHeader
	marker *record.Marker
}

// controlBatches reads the control batches of the log, by offset.
func controlBatches(t *testing.T, l *Log) map[int64]controlBatch {
	t.Helper()
	out := map[int64]controlBatch{}
	for _, b := range readBatches(t, l) {
		h, err := record.Validate(b)
		require.NoError(t, err)
		if !h.Attributes.Control() {
			continue
		}
		cb := controlBatch{h: h}
		if h.NumRecords > 0 {
			m, err := record.ReadMarker(&h, b)
			require.NoError(t, err)
			cb.marker = &m
		}
		out[h.BaseOffset] = cb
	}
	return out
}

// dataRecords is consume without the control records.
func dataRecords(t *testing.T, l *Log) []consumed {
	t.Helper()
	control := controlBatches(t, l)
	var out []consumed
	for _, r := range consume(t, l) {
		if _, ok := control[r.offset]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// An aborted transaction's records are gone after cleaning, and did not
// shadow the committed values of their keys, whether written before or
// after them; committed transactional records are compacted as any other;
// markers stay in the first round (no delete horizon yet), and so does the
// aborted transaction's .txnindex entry.
func TestCleanerDropsAbortedTransactionsAndCompactsCommittedOnes(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.produce(put("a", "committed-a"), put("b", "committed-b"))                    // 0, 1
	aborted, _ := h.produceTxn(5, 0, put("a", "aborted-a"), put("c", "aborted-c")) // 2, 3
	h.produceTxn(6, 0, put("b", "txn-b"), put("d", "txn-d-1"))                     // 4, 5: 5 is compacted away below
	abortAt, txn := h.endTxn(5, 0, false, aborted)                                 // 6
	commitAt, _ := h.endTxn(6, 0, true, 0)                                         // 7
	h.produceTxn(6, 0, put("d", "txn-d-2"))                                        // 8
	h.endTxn(6, 0, true, 0)                                                        // 9
	later, _ := h.produceTxn(5, 0, put("e", "p5-e"))                               // 10: producer 5's last data batch
	h.endTxn(5, 0, true, 0)                                                        // 11
	h.produce(put("f", "after-abort"))                                             // 12
	abortedAgain, _ := h.produceTxn(5, 0, put("f", "aborted-f"))                   // 13: its marker is in the active segment
	h.roll()
	h.produce(put("g", "active"))
	_, txn2 := h.endTxn(5, 0, false, abortedAgain)
	require.True(t, h.cleanPartition().Cleaned)

	got := dataRecords(t, h.l)
	require.Equal(t, map[string]string{"a": "committed-a", "b": "txn-b", "d": "txn-d-2", "e": "p5-e", "f": "after-abort", "g": "active"},
		table(got))
	var offsets []int64
	for _, r := range got {
		require.False(t, strings.HasPrefix(r.value, "aborted"), "aborted record at %d", r.offset)
		offsets = append(offsets, r.offset)
	}
	require.Equal(t, []int64{0, 4, 8, later, 12, abortedAgain + 1}, offsets,
		"b's committed value and d's first are compacted, the aborted records dropped")

	// The first aborted batch is dropped whole; the second, producer 5's
	// last data batch, stays empty to keep its state.
	batches := map[int64]record.BatchHeader{}
	for _, b := range headers(t, readBatches(t, h.l)) {
		batches[b.BaseOffset] = b
	}
	require.NotContains(t, batches, aborted)
	require.Contains(t, batches, abortedAgain)
	require.Equal(t, int32(0), batches[abortedAgain].NumRecords)
	control := controlBatches(t, h.l)
	require.Len(t, control, 5, "every marker stays in the first round")
	require.False(t, control[abortAt].marker.Commit)
	require.True(t, control[commitAt].marker.Commit)

	all, err := h.l.AbortedTxns(0, h.l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{txn, txn2}, all, "the cleaned segment keeps the entry of the marker it keeps")

	// The next round, with the aborted records in the clean part and the
	// committed value of a again in the dirty part, changes nothing.
	h.produce(put("h", "more"))
	h.roll()
	h.cleanPartition()
	require.Equal(t, map[string]string{"a": "committed-a", "b": "txn-b", "d": "txn-d-2", "e": "p5-e", "f": "after-abort", "g": "active", "h": "more"},
		table(dataRecords(t, h.l)))
}

// A marker goes once its transaction has no batch left in the log and its
// segment is past delete.retention.ms, as a tombstone does; an ABORT
// marker's .txnindex entry goes with it. A marker whose transaction still
// has a batch (a committed one, or an aborted batch kept empty as its
// producer's last) stays, and so does its entry. A marker that holds its
// producer's current epoch (bumped after its last data batch) loses its
// record but stays as an empty batch.
func TestCleanerRemovesMarkersPastTheDeleteHorizon(t *testing.T) {
	cfg := compactConfig()
	cfg.DeleteRetention = time.Hour
	h := newCleanerHarness(t, cfg)

	// Segment A at t0.
	first, _ := h.produceTxn(5, 0, put("a", "aborted"), put("x", "aborted"))
	abort5, _ := h.endTxn(5, 0, false, first)
	first, _ = h.produceTxn(6, 0, put("k", "overwritten"))
	commit6, _ := h.endTxn(6, 0, true, 0)
	h.produceTxn(6, 0, put("y", "kept"))
	commit6b, _ := h.endTxn(6, 0, true, 0)
	h.produceTxn(5, 0, put("e", "kept"))
	commit5, _ := h.endTxn(5, 0, true, 0)
	first, _ = h.produceTxn(7, 0, put("z", "aborted")) // producer 7's last data batch
	abort7, txn7 := h.endTxn(7, 0, false, first)
	first, _ = h.produceTxn(9, 0, put("w", "aborted"))
	abort9, _ := h.endTxn(9, 1, false, first) // the coordinator bumped the epoch
	h.produce(put("k", "new"))
	h.uniqueKeys("a", 40)
	h.roll()

	h.cleanPartition()
	control := controlBatches(t, h.l)
	require.Len(t, control, 6, "no clean part yet: every marker stays")
	batches := map[int64]record.BatchHeader{}
	for _, b := range headers(t, readBatches(t, h.l)) {
		batches[b.BaseOffset] = b
	}
	require.Equal(t, int32(0), batches[abort7-1].NumRecords, "producer 7's last batch stays, empty")
	require.NotContains(t, batches, abort9-1, "producer 9's batch is not its last state: its epoch was bumped")

	// Segment B at t0+2h: the horizon is A's t0 - 1h; A's markers stay.
	h.clock.Advance(2 * time.Hour)
	h.uniqueKeys("b", 50)
	h.roll()
	h.cleanPartition()
	require.Len(t, controlBatches(t, h.l), 6, "kept: within delete.retention.ms")

	// Segment C: the clean part ends with B (t0+2h), the horizon t0+1h is
	// past A.
	h.uniqueKeys("c", 50)
	h.roll()
	h.cleanPartition()
	control = controlBatches(t, h.l)
	require.NotContains(t, control, abort5, "producer 5's aborted transaction has no batch left")
	require.NotContains(t, control, commit6, "producer 6's first transaction was compacted away")
	for _, off := range []int64{commit6b, commit5, abort7} {
		require.Contains(t, control, off)
		require.NotNil(t, control[off].marker, "offset %d: its transaction still has a batch", off)
	}
	require.Contains(t, control, abort9)
	require.Nil(t, control[abort9].marker, "producer 9's marker stays, empty: it holds the producer's epoch")
	require.Equal(t, int16(1), control[abort9].h.ProducerEpoch)
	require.Len(t, control, 4)

	all, err := h.l.AbortedTxns(0, h.l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{txn7}, all, "the entries of the removed ABORT markers are gone")
	require.Equal(t, map[string]string{"k": "new", "y": "kept", "e": "kept"},
		func() map[string]string {
			out := map[string]string{}
			for k, v := range table(dataRecords(t, h.l)) {
				if len(k) == 1 {
					out[k] = v
				}
			}
			return out
		}())

	// The cleaned index is on disk: a restart reads the same.
	h.restart()
	all, err = h.l.AbortedTxns(0, h.l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{txn7}, all)
	data, err := os.ReadFile(filepath.Join(h.l.Dir(), segmentName(0)+txnIndexSuffix))
	require.NoError(t, err)
	require.Len(t, data, txnIndexEntrySize)
}

// A producer's aborted transaction that ended in the clean part does not
// make its later committed transaction look aborted when the next round
// maps the dirty part: the committed value still shadows the older one.
func TestCleanerMapsACommittedTransactionAfterAnAbortedOne(t *testing.T) {
	h := newCleanerHarness(t, compactConfig())
	h.produce(put("b", "old"))
	first, _ := h.produceTxn(5, 0, put("a", "aborted"))
	h.endTxn(5, 0, false, first)
	h.roll()
	h.cleanPartition()

	h.produceTxn(5, 0, put("b", "new"))
	h.endTxn(5, 0, true, 0)
	h.roll()
	stats := h.cleanPartition()
	require.Equal(t, 1, stats.KeysMapped)
	got := dataRecords(t, h.l)
	require.Equal(t, map[string]string{"b": "new"}, table(got))
	require.Len(t, got, 1, "b's old value is compacted away")
}
