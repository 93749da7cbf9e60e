package store

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Errors from the Store.
var (
	ErrTopicExists  = errors.New("store: topic already exists")
	ErrUnknownTopic = errors.New("store: unknown topic")
	// ErrTooManyPartitions: creating the partitions would take the broker
	// past the partitions it can hold (Options.MaxPartitions).
	ErrTooManyPartitions = errors.New("store: too many partitions")
)

// Kafka's error codes for what the store and its logs report, from
// franz-go's kerr so that none is invented.
var (
	kerrUnknownTopicOrPartition = kerr.UnknownTopicOrPartition.Code
	kerrCorruptMessage          = kerr.CorruptMessage.Code
	kerrMessageTooLarge         = kerr.MessageTooLarge.Code
	kerrRecordListTooLarge      = kerr.RecordListTooLarge.Code
	kerrKafkaStorageError       = kerr.KafkaStorageError.Code
	kerrInconsistentTopicID     = kerr.InconsistentTopicID.Code
)

// AppendErrorCode maps an append failure to Kafka's error code. A batch
// larger than segment.bytes is RECORD_LIST_TOO_LARGE (18), Kafka's
// RecordBatchTooLargeException from UnifiedLog.append: it could never fit
// in a segment. (A batch over message.max.bytes is MESSAGE_TOO_LARGE, 10,
// refused before the append by the produce validation.)
func AppendErrorCode(err error) int16 {
	switch {
	case record.IsCorrupt(err):
		return kerrCorruptMessage
	case errors.Is(err, commitlog.ErrBatchTooLarge):
		return kerrRecordListTooLarge
	case errors.Is(err, commitlog.ErrClosed):
		return kerrUnknownTopicOrPartition // the partition was deleted meanwhile
	}
	return kerrKafkaStorageError
}

// CheckLeaderEpoch compares the leader epoch a client believes in (KIP-320;
// -1 when it does not say) with the partition's: a newer one means this
// broker has not heard of the new leader yet, an older one that the client
// has not.
func CheckLeaderEpoch(clientEpoch, epoch int32) int16 {
	switch {
	case clientEpoch < 0 || clientEpoch == epoch:
		return 0
	case clientEpoch > epoch:
		return kerr.UnknownLeaderEpoch.Code
	default:
		return kerr.FencedLeaderEpoch.Code
	}
}
