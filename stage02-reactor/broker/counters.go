package broker

import "sync/atomic"

// Counters count what the broker refused or failed at, under the names of
// Kafka's BrokerTopicStats meters (final exports them to Prometheus). A
// client's bad input is counted here and logged at Debug, not at Error: one
// misbehaving client must not flood the broker's log.
type Counters struct {
	// FailedProduceRequests: produce requests for a partition that got an
	// error (Kafka: FailedProduceRequestsPerSec).
	FailedProduceRequests atomic.Uint64
	// InvalidMessageCRCRecords: batches refused for a CRC mismatch
	// (Kafka: InvalidMessageCrcRecordsPerSec).
	InvalidMessageCRCRecords atomic.Uint64
	// InvalidOffsetOrSequenceRecords: batches refused for inconsistent
	// offsets or counts (Kafka: InvalidOffsetOrSequenceRecordsPerSec).
	InvalidOffsetOrSequenceRecords atomic.Uint64
}

// Counters returns the broker's counters.
func (b *Broker) Counters() *Counters { return &b.counters }
