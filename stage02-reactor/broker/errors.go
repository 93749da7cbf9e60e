package broker

import "github.com/twmb/franz-go/pkg/kerr"

// Kafka's error codes used here, from franz-go's kerr so that none is
// invented.
var (
	kerrUnsupportedVersion       = kerr.UnsupportedVersion.Code
	kerrUnknownTopicOrPartition  = kerr.UnknownTopicOrPartition.Code
	kerrCorruptMessage           = kerr.CorruptMessage.Code
	kerrInvalidRecord            = kerr.InvalidRecord.Code
	kerrMessageTooLarge          = kerr.MessageTooLarge.Code
	kerrRecordListTooLarge       = kerr.RecordListTooLarge.Code
	kerrInvalidRequiredAcks      = kerr.InvalidRequiredAcks.Code
	kerrOffsetOutOfRange         = kerr.OffsetOutOfRange.Code
	kerrInvalidTopic             = kerr.InvalidTopicException.Code
	kerrTopicAlreadyExists       = kerr.TopicAlreadyExists.Code
	kerrInvalidPartitions        = kerr.InvalidPartitions.Code
	kerrInvalidReplicationFactor = kerr.InvalidReplicationFactor.Code
	kerrInvalidConfig            = kerr.InvalidConfig.Code
	kerrInvalidRequest           = kerr.InvalidRequest.Code
	kerrUnknownServerError       = kerr.UnknownServerError.Code
	kerrInvalidReplicaAssignment = kerr.InvalidReplicaAssignment.Code
	kerrKafkaStorageError        = kerr.KafkaStorageError.Code
	kerrPolicyViolation          = kerr.PolicyViolation.Code
)
