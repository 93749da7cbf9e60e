package broker

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Counters count what the broker took in, served and refused, under the
// names of Kafka's BrokerTopicStats meters (final exports them to
// Prometheus). A client's bad input is counted here and logged at Debug,
// not at Error: one misbehaving client must not flood the broker's log.
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

	// All counts every topic together; Topic counts one.
	All TopicCounters
	// topics holds each topic's TopicCounters (*TopicCounters by name).
	topics sync.Map
}

// TopicCounters are one topic's traffic, as Kafka's BrokerTopicMetrics
// meters count it: BytesIn and MessagesIn for the batches a leader
// appended from producers (the batches as produced, before any
// recompression; not what followers copy), BytesOut for the record bytes
// fetch responses to consumers carried (not to followers).
type TopicCounters struct {
	BytesIn    atomic.Uint64 // Kafka: BytesInPerSec
	MessagesIn atomic.Uint64 // Kafka: MessagesInPerSec (records)
	BytesOut   atomic.Uint64 // Kafka: BytesOutPerSec
}

// Counters returns the broker's counters.
func (b *Broker) Counters() *Counters { return &b.counters }

// Topic returns a topic's counters, creating them at first use.
func (c *Counters) Topic(topic string) *TopicCounters {
	if t, ok := c.topics.Load(topic); ok {
		return t.(*TopicCounters)
	}
	t, _ := c.topics.LoadOrStore(topic, &TopicCounters{})
	return t.(*TopicCounters)
}

// Topics calls f with each topic that has counters.
func (c *Counters) Topics(f func(topic string, t *TopicCounters)) {
	c.topics.Range(func(k, v any) bool {
		f(k.(string), v.(*TopicCounters))
		return true
	})
}

// appended reports whether a produced partition whose answer has this
// error code was appended: with no error, or with an acks=-1 wait that
// failed after the append (Kafka counts at the append).
func appended(code int16) bool {
	return code == 0 || code == kerr.RequestTimedOut.Code || code == kerr.NotEnoughReplicasAfterAppend.Code
}

// countIn counts the batch a leader appended for a producer (a Produce
// request carries one batch per partition: more is INVALID_RECORD, as in
// Kafka).
func (c *Counters) countIn(topic string, batch []byte) {
	var records uint64
	if h, err := record.ReadHeader(batch); err == nil { // validated already
		records = uint64(h.NumRecords)
	}
	for _, t := range []*TopicCounters{&c.All, c.Topic(topic)} {
		t.BytesIn.Add(uint64(len(batch)))
		t.MessagesIn.Add(records)
	}
}

// countOut counts record bytes a fetch response carried to a consumer.
func (c *Counters) countOut(topic string, n int64) {
	if n <= 0 {
		return
	}
	c.All.BytesOut.Add(uint64(n))
	c.Topic(topic).BytesOut.Add(uint64(n))
}
