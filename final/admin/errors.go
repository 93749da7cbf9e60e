package admin

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaError words a per-resource error of an admin answer: what failed,
// the broker's own message if it sent one (else Kafka's description of
// the code, or a phrase of ours for the common ones), and the code's
// name in parentheses, the way Kafka users search for it:
//
//	topic orders already exists (TOPIC_ALREADY_EXISTS)
//	create topic orders: Replication factor: 4 larger than available brokers: 3. (INVALID_REPLICATION_FACTOR)
func kafkaError(kind, name, action string, err error, brokerMsg string) error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return fmt.Errorf("%s %s %s: %w", action, kind, name, err)
	}
	switch ke {
	case kerr.TopicAlreadyExists:
		return fmt.Errorf("%s %s already exists (%s)", kind, name, ke.Message)
	case kerr.UnknownTopicOrPartition, kerr.GroupIDNotFound:
		return fmt.Errorf("%s %s does not exist (%s)", kind, name, ke.Message)
	case kerr.NonEmptyGroup:
		return fmt.Errorf("%s %s is not empty: it has active members (%s)", kind, name, ke.Message)
	}
	detail := brokerMsg
	if detail == "" {
		detail = ke.Description
	}
	return fmt.Errorf("%s %s %s: %s (%s)", action, kind, name, detail, ke.Message)
}

// codeName is Kafka's name of an error code, or the error itself.
func codeName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
