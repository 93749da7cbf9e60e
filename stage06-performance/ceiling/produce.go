package ceiling

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// ProduceVersion is the Produce version the requests are encoded at: v9,
// the newest our brokers serve (stage 02's 00_produce.go) and the one
// Kafka 3.x clients send them.
const ProduceVersion = 9

// ProduceConfig describes the requests of a load.
type ProduceConfig struct {
	Topic      string
	Partitions int32 // partitions 0..Partitions-1, one request per partition in turn
	Records    int   // records per batch (one batch per request)
	RecordSize int   // bytes of each record's value; keys are null, no headers
	// Acks is 1 (the leader appended) or -1 (acks=all: every in-sync
	// replica has it). Not 0: a broker does not answer acks=0, and the
	// load generator waits for answers.
	Acks int16
	// Timeout is the request's timeout_ms: how long an acks=all request
	// may wait for the followers. 0 means 30 s, Kafka's request.timeout.ms.
	Timeout  time.Duration
	ClientID string // "" means "loadgen"
}

// Produce is a load's Produce requests, each encoded once: one request
// per partition, each holding one uncompressed batch of Records records.
// AppendRequest hands out copies stamped with a correlation id, the only
// bytes that change between sends.
type Produce struct {
	requests [][]byte // per partition: the request without its size prefix, correlation id 0
	batch    []byte   // the batch every request carries
	records  int      // records per batch
}

// corrPos is where a request's correlation id sits: after api_key (int16)
// and api_version (int16), in every request header version.
const corrPos = 4

// NewProduce encodes cfg's requests.
func NewProduce(cfg ProduceConfig) (*Produce, error) {
	if cfg.Topic == "" || cfg.Partitions < 1 || cfg.Records < 1 || cfg.RecordSize < 0 {
		return nil, errors.New("ceiling: need a topic, Partitions > 0, Records > 0 and RecordSize >= 0")
	}
	if cfg.Acks != 1 && cfg.Acks != -1 {
		return nil, fmt.Errorf("ceiling: acks %d: only 1 and -1 (all) are answered", cfg.Acks)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	clientID := cfg.ClientID
	if clientID == "" {
		clientID = "loadgen"
	}
	batch, err := Batch(cfg.Records, cfg.RecordSize)
	if err != nil {
		return nil, err
	}
	p := &Produce{batch: batch, records: cfg.Records}
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	for partition := range cfg.Partitions {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(ProduceVersion)
		req.Acks = cfg.Acks
		req.TimeoutMillis = int32(timeout.Milliseconds())
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = cfg.Topic
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition = partition
		part.Records = batch
		topic.Partitions = append(topic.Partitions, part)
		req.Topics = append(req.Topics, topic)
		p.requests = append(p.requests, formatter.AppendRequest(nil, req, 0)[4:])
	}
	return p, nil
}

// Batch is a magic-2 batch of n uncompressed records, each a null key and
// a value of size pseudo-random bytes (the same every call), with the
// producer's defaults: no idempotence, CreateTime timestamps of now.
func Batch(n, size int) ([]byte, error) {
	rng := rand.New(rand.NewPCG(6, 6))
	values := make([]byte, n*size)
	for i := range values {
		values[i] = byte(rng.Uint32())
	}
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{OffsetDelta: int32(i), Value: values[i*size : (i+1)*size : (i+1)*size]}
	}
	b, err := record.AppendBatch(nil, record.NewBatch(time.Now().UnixMilli(), recs...))
	if err != nil {
		return nil, fmt.Errorf("ceiling: encode batch: %w", err)
	}
	return b, nil
}

// AppendRequest is loadgen.Config.AppendRequest: it appends the request
// of partition corr mod Partitions (so a connection's requests go round
// the partitions) carrying correlation id corr. The load generator's
// whole cost per request is this one copy into its buffer and the
// write(2). Safe for concurrent use.
func (p *Produce) AppendRequest(dst []byte, corr int32) []byte {
	start := len(dst)
	dst = append(dst, p.requests[int(uint32(corr)%uint32(len(p.requests)))]...)
	binary.BigEndian.PutUint32(dst[start+corrPos:], uint32(corr))
	return dst
}

// Batch is the record batch every request carries: the bytes a broker
// appends to its log for each request, and what the raw baseline writes.
func (p *Produce) Batch() []byte { return p.batch }

// Records is the number of records per request.
func (p *Produce) Records() int { return p.records }

// RequestBytes is the size of a request on the wire, with its size prefix.
func (p *Produce) RequestBytes() int { return 4 + len(p.requests[0]) }
