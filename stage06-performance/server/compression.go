package server

import (
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	s5 "github.com/kafkaworkbook/workbook/stage05-controller/server"
)

// recompressor is the produce path with a topic's compression.type applied
// (seed §2.1.6): a batch whose codec is not its topic's is rebuilt with
// the topic's codec before it is validated and appended, as Kafka's
// LogValidator does; with compression.type=producer (the default), or the
// producer's own codec, the batch is stored as it came, its offsets
// assigned in place, and the broker never decompresses more than
// validation needs. Only the leader does this: followers copy what it
// stored.
type recompressor struct {
	s    *s5.Server
	next broker.Appender // stage 05's produce path
}

func (rc recompressor) AppendRecords(r *broker.Request, acks int16, timeout time.Duration, parts []broker.ProducePartition, done func()) {
	for _, part := range parts {
		p, ok := rc.s.Replicas.Partition(part.Topic, part.Request.Partition)
		if !ok {
			continue // the next step answers for it
		}
		codec, recompress := p.Log.Config().CompressionType.Codec()
		if !recompress {
			continue
		}
		h, err := record.ReadHeader(part.Request.Records)
		if err != nil || h.Attributes.Codec() == codec {
			continue
		}
		limit := int(rc.s.Config().Broker.MessageMaxBytes) * broker.DecompressionFactor
		if out, err := record.Recompress(nil, part.Request.Records, codec, limit); err == nil {
			part.Request.Records = out
		} // a batch that does not decode is left for validation to refuse
	}
	rc.next.AppendRecords(r, acks, timeout, parts, done)
}
