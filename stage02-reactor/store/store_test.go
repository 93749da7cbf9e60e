package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// TestRetentionStopsAtTheRetentionLimit: the store hands
// Options.RetentionLimit to its logs' Manager, so retention deletes no
// segment holding records at or past the limit (stage 03's high
// watermark); without one it deletes up to the log end.
func TestRetentionStopsAtTheRetentionLimit(t *testing.T) {
	cfg := commitlog.DefaultManagerConfig()
	cfg.Log.SegmentBytes = 1024 // several segments, each of a few batches
	const limit = 10
	var asked []commitlog.TopicPartition
	for _, tt := range []struct {
		name      string
		limit     func(commitlog.TopicPartition, *commitlog.Log) int64
		wantStart func(end int64) int64
	}{
		{"none", nil, func(end int64) int64 { return end }},
		{"at offset 10", func(tp commitlog.TopicPartition, _ *commitlog.Log) int64 {
			asked = append(asked, tp)
			return limit
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "kafka-logs"), 0, cfg, Options{RetentionLimit: tt.limit, Logger: quietLogger})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			parts, err := s.CreateTopic("old", 1, nil)
			require.NoError(t, err)
			l := parts[0].Log
			for range 20 { // timestamp 0: older than retention.ms, every segment may go
				b := record.NewBatch(0, record.Record{OffsetDelta: 0, Value: make([]byte, 200)}, record.Record{OffsetDelta: 1, Value: make([]byte, 200)})
				batch, err := record.AppendBatch(nil, b)
				require.NoError(t, err)
				_, _, err = l.Append(batch)
				require.NoError(t, err)
			}
			_, err = s.logs.DeleteOldSegments()
			require.NoError(t, err)
			if tt.wantStart != nil {
				require.Equal(t, tt.wantStart(l.EndOffset()), l.StartOffset())
				return
			}
			require.Positive(t, l.StartOffset(), "segments below the limit go")
			require.LessOrEqual(t, l.StartOffset(), int64(limit), "nothing at or past the limit goes")
			require.Equal(t, []commitlog.TopicPartition{{Topic: "old", Partition: 0}}, asked)
		})
	}
}

// TestAppendErrorCodesAreKafkas: each append failure of the log maps to
// the code Kafka's UnifiedLog.append gives it; a batch larger than
// segment.bytes is RECORD_LIST_TOO_LARGE (RecordBatchTooLargeException),
// not MESSAGE_TOO_LARGE, which is message.max.bytes'.
func TestAppendErrorCodesAreKafkas(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int16
	}{
		{fmt.Errorf("append: %w", record.ErrCRCMismatch), kerr.CorruptMessage.Code},
		{fmt.Errorf("append: %w", commitlog.ErrBatchTooLarge), kerr.RecordListTooLarge.Code},
		{fmt.Errorf("append: %w", commitlog.ErrClosed), kerr.UnknownTopicOrPartition.Code},
		{errors.New("disk on fire"), kerr.KafkaStorageError.Code},
	} {
		require.Equal(t, tt.want, AppendErrorCode(tt.err), "%v", tt.err)
	}
}
