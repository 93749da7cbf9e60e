package server

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/producer"
)

// TestRebuildStartsAtTheLatestSnapshotAndEndsWhereTheWholeLogWould: a
// state built from a snapshot at a segment's base offset plus the batches
// after it is the state built from the whole log, and the log is read
// from the snapshot on; a snapshot past the log end (the tail it covered
// was lost in a crash) is passed over for an older one.
func TestRebuildStartsAtTheLatestSnapshotAndEndsWhereTheWholeLogWould(t *testing.T) {
	cfg := commitlog.DefaultConfig()
	cfg.SegmentBytes = 1024
	dir := t.TempDir()
	l, err := commitlog.Open(dir, cfg, commitlog.Options{Logger: discard()})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })

	live := producer.NewState()
	snapshotAt := map[int64]bool{}
	seqs := map[int64]int32{}
	for i := range 60 {
		pid := int64(1000 + i%3)
		b := record.NewBatch(time.Now().UnixMilli(), record.Record{Value: fmt.Appendf(nil, "p%d-%d", pid, seqs[pid])},
			record.Record{OffsetDelta: 1, Value: []byte("x")})
		b.ProducerID, b.ProducerEpoch, b.BaseSequence = pid, 0, seqs[pid]
		seqs[pid] += 2
		data, err := record.AppendBatch(nil, b)
		require.NoError(t, err)
		_, _, err = l.AppendAsLeader(data, 0)
		require.NoError(t, err)
		observe(live, data)
		// What recorded does after a roll.
		if base := l.ActiveBaseOffset(); base > 0 && !snapshotAt[base] {
			snapshotAt[base] = true
			require.NoError(t, writeSnapshot(live, dir, base))
		}
	}
	require.Greater(t, len(snapshotAt), 2, "the log rolled")
	latest := l.ActiveBaseOffset()

	whole := producer.NewState()
	require.NoError(t, readBatches(whole, l, 0))

	built := producer.NewState()
	from, err := rebuild(built, l, discard())
	require.NoError(t, err)
	require.Equal(t, latest, from, "read from the newest snapshot on")
	for pid := range seqs {
		want, ok := whole.Entry(pid)
		require.True(t, ok)
		got, ok := built.Entry(pid)
		require.True(t, ok)
		require.Equal(t, want.LastSeq(), got.LastSeq(), "producer %d", pid)
		require.Equal(t, want.Batches[len(want.Batches)-1], got.Batches[len(got.Batches)-1], "producer %d", pid)
	}

	// A crash lost the tail: the newest snapshot is past the log end.
	_, err = l.TruncateTo(latest - 1)
	require.NoError(t, err)
	from, err = rebuild(producer.NewState(), l, discard())
	require.NoError(t, err)
	require.Less(t, from, latest, "an older snapshot, not one past the log end")
	require.True(t, snapshotAt[from])
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
