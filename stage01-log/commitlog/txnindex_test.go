package commitlog

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// abortTxn appends a transactional batch of pid, n other batches, and an
// ABORT marker, then records the aborted transaction as stage 04 does.
func abortTxn(t *testing.T, l *Log, pid int64, others int) AbortedTxn {
	t.Helper()
	b := record.NewBatch(1, record.Record{Key: []byte("k"), Value: []byte("aborted")})
	b.Attributes, b.ProducerID, b.ProducerEpoch, b.BaseSequence = record.TransactionalFlag, pid, 0, 0
	data, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	first, _, err := l.Append(data)
	require.NoError(t, err)
	for i := range others {
		_, _, err := l.Append(makeBatch(t, i, 2, 50, 1))
		require.NoError(t, err)
	}
	marker, _, err := l.Append(record.AppendMarker(nil, record.Marker{ProducerID: pid}, 1))
	require.NoError(t, err)
	txn := AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: marker, LastStableOffset: marker + 1}
	require.NoError(t, l.AddAbortedTxn(txn))
	return txn
}

// The .txnindex is Kafka's: 34 bytes an entry, version 0, then producer
// id, first offset, last offset and last stable offset, big-endian, in
// the file of the segment that holds the marker; it survives a restart.
func TestTheTxnIndexIsKafkasFileFormat(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	a := abortTxn(t, l, 7, 1)
	b := abortTxn(t, l, 8, 0)

	data, err := os.ReadFile(filepath.Join(h.dir, segmentName(0)+txnIndexSuffix))
	require.NoError(t, err)
	require.Len(t, data, 2*34)
	require.Equal(t, uint16(0), binary.BigEndian.Uint16(data))
	require.Equal(t, uint64(7), binary.BigEndian.Uint64(data[2:]))
	require.Equal(t, uint64(a.FirstOffset), binary.BigEndian.Uint64(data[10:]))
	require.Equal(t, uint64(a.LastOffset), binary.BigEndian.Uint64(data[18:]))
	require.Equal(t, uint64(a.LastStableOffset), binary.BigEndian.Uint64(data[26:]))
	require.Equal(t, uint64(8), binary.BigEndian.Uint64(data[36:]))

	require.NoError(t, l.Close())
	l = h.open(Options{})
	got, err := l.AbortedTxns(0, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b}, got)
}

// AbortedTxns returns exactly the transactions overlapping [from, upTo),
// across segments: a marker before from, or a first offset at or after
// upTo, leaves one out. A segment without aborts has no file.
func TestAbortedTxnsOverlapTheFetchedRange(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	var txns []AbortedTxn
	for i := range 6 {
		txns = append(txns, abortTxn(t, l, int64(100+i), 4))
		require.NoError(t, l.Roll())
		h.appendBatches(l, 3, 2, 50) // a segment with no aborted transaction
		require.NoError(t, l.Roll())
	}
	require.Greater(t, len(l.Segments()), 6)
	for _, s := range l.Segments() {
		_, err := os.Stat(filepath.Join(h.dir, segmentName(s.BaseOffset)+txnIndexSuffix))
		hasAbort := false
		for _, txn := range txns {
			hasAbort = hasAbort || (txn.FirstOffset == s.BaseOffset)
		}
		require.Equal(t, hasAbort, err == nil, "segment %d", s.BaseOffset)
	}
	for from := int64(0); from < l.EndOffset(); from += 3 {
		for upTo := from + 1; upTo <= l.EndOffset(); upTo += 5 {
			var want []AbortedTxn
			for _, txn := range txns {
				if txn.LastOffset >= from && txn.FirstOffset < upTo {
					want = append(want, txn)
				}
			}
			got, err := l.AbortedTxns(from, upTo)
			require.NoError(t, err)
			require.Equal(t, want, got, "[%d, %d)", from, upTo)
		}
	}
}

// Recording a transaction twice (stage 04 replays the log after a
// restart) keeps one entry; one missing from the middle goes back in its
// place. A marker past the log end is refused.
func TestAddAbortedTxnIsIdempotentAndOrdered(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	a, b, c := abortTxn(t, l, 1, 0), abortTxn(t, l, 2, 0), abortTxn(t, l, 3, 0)
	require.NoError(t, l.AddAbortedTxn(b))
	got, err := l.AbortedTxns(0, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b, c}, got)

	// Lose b, as a crash between the marker and its entry would.
	require.NoError(t, l.Close())
	path := filepath.Join(h.dir, segmentName(0)+txnIndexSuffix)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(data[:34:34], data[68:]...), 0o644))
	l = h.open(Options{})
	got, err = l.AbortedTxns(0, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, c}, got)
	require.NoError(t, l.AddAbortedTxn(b))
	got, err = l.AbortedTxns(0, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b, c}, got)

	require.ErrorIs(t, l.AddAbortedTxn(AbortedTxn{ProducerID: 9, FirstOffset: 1, LastOffset: l.EndOffset()}), ErrOffsetOutOfRange)
}

// Truncation takes the entries whose markers it removes, in the segment it
// cuts and with the segments it deletes.
func TestTruncationRemovesTheEntriesOfRemovedMarkers(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	a := abortTxn(t, l, 1, 2)
	b := abortTxn(t, l, 2, 2)
	require.NoError(t, l.Roll())
	c := abortTxn(t, l, 3, 2)

	_, err := l.TruncateTo(b.LastOffset + 1)
	require.NoError(t, err)
	got, err := l.AbortedTxns(0, l.EndOffset()+100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b}, got, "c's segment is gone")
	_, err = l.TruncateTo(b.LastOffset)
	require.NoError(t, err)
	got, err = l.AbortedTxns(0, l.EndOffset()+100)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a}, got, "b's marker is gone")
	_ = c

	require.NoError(t, l.Close())
	l = h.open(Options{})
	got, err = l.AbortedTxns(0, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a}, got, "and stays gone")
}

// After a crash that tore the last batch, the entries of markers that did
// not survive are dropped, and a torn entry at the file's end too.
func TestRecoveryDropsTheEntriesOfLostMarkers(t *testing.T) {
	h := newLogHarness(t, smallConfig())
	l := h.open(Options{})
	a := abortTxn(t, l, 1, 1)
	abortTxn(t, l, 2, 1)
	crashed := h.crash()
	seg := filepath.Join(crashed.dir, segmentName(0))
	fi, err := os.Stat(seg + logSuffix)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(seg+logSuffix, fi.Size()-10)) // the last marker is torn
	f, err := os.OpenFile(seg+txnIndexSuffix, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 20)) // and a torn entry follows
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := crashed.open(Options{})
	got, err := r.AbortedTxns(0, r.EndOffset()+10)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a}, got)
}

// Retention deletes a segment's .txnindex with it.
func TestRetentionDeletesTheTxnIndexWithItsSegment(t *testing.T) {
	cfg := smallConfig()
	cfg.FileDeleteDelay = 0
	h := newLogHarness(t, cfg)
	l := h.open(Options{})
	abortTxn(t, l, 1, 1)
	require.NoError(t, l.Roll())
	b := abortTxn(t, l, 2, 1)
	require.NoError(t, l.Roll())
	_, err := l.IncrementStartOffset(b.FirstOffset)
	require.NoError(t, err)
	_, err = l.DeleteOldSegments(b.FirstOffset)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(h.dir, segmentName(0)+txnIndexSuffix+deletedSuffix))
		_, err2 := os.Stat(filepath.Join(h.dir, segmentName(0)+txnIndexSuffix))
		return os.IsNotExist(err) && os.IsNotExist(err2)
	}, 5e9, 1e7)
	got, err := l.AbortedTxns(b.FirstOffset, l.EndOffset())
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{b}, got)
}

// A first compaction keeps every marker (each is younger than
// delete.retention.ms), so the cleaned segment keeps the aborted
// transactions of the segments it replaces, also when a crash interrupts
// the swap at any step.
func TestCompactionKeepsAbortedTxnsThroughACrashAtEachStep(t *testing.T) {
	for _, step := range []string{"cleaned", "swap", "deleted", "done"} {
		t.Run(step, func(t *testing.T) {
			h := newCleanerHarness(t, compactConfig())
			var txns []AbortedTxn
			for i := range 8 {
				h.fill(20, 5, 20)
				txns = append(txns, abortTxn(t, h.l, int64(i), 0))
				h.roll()
			}
			end := h.l.EndOffset()
			var crashed string
			swapTestHook = func(s, dir string) {
				if s == step && crashed == "" {
					crashed = copyDir(t, dir)
				}
			}
			t.Cleanup(func() { swapTestHook = nil })
			require.True(t, h.clean().Cleaned)
			swapTestHook = nil
			if step == "done" {
				crashed = copyDir(t, h.l.Dir())
			}
			got, err := h.l.AbortedTxns(0, end)
			require.NoError(t, err)
			require.Equal(t, txns, got, "after cleaning")
			l, err := Open(crashed, compactConfig(), Options{Logger: quietLogger, RecoveryPoint: end})
			require.NoError(t, err)
			defer l.Close()
			got, err = l.AbortedTxns(0, end)
			require.NoError(t, err)
			require.Equal(t, txns, got, fmt.Sprintf("after a crash at %q", step))
			for _, name := range segmentFiles(t, crashed) {
				require.NotContains(t, name, swapSuffix)
			}
		})
	}
}
