package producer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// Config is a producer's configuration: Kafka's producer keys, one field
// each. DefaultConfig holds Kafka 3.x's defaults; ParseConfig reads the
// keys from a map as a properties file gives them.
type Config struct {
	// BootstrapServers is bootstrap.servers: host:port of a few brokers to
	// learn the cluster from.
	BootstrapServers []string
	// ClientID is client.id, sent in every request header.
	ClientID string
	// Acks is acks: 0 (no response), 1 (the leader appended) or -1 ("all":
	// every replica in the ISR has it).
	Acks int16
	// BatchSize is batch.size: the bytes of one batch's buffer, and the
	// size of the BufferPool's pooled buffers. A record larger than this
	// gets a batch of its own, of its own size.
	BatchSize int
	// Linger is linger.ms: how long a batch that is not full waits for more
	// records before it is sendable.
	Linger time.Duration
	// BufferMemory is buffer.memory: the bytes all batches not yet
	// acknowledged may hold.
	BufferMemory int64
	// MaxBlock is max.block.ms: how long Produce waits for buffer memory or
	// for a topic's metadata before it fails.
	MaxBlock time.Duration
	// MaxInFlight is max.in.flight.requests.per.connection: requests sent
	// to one broker and not yet answered. With idempotence, at most 5.
	MaxInFlight int
	// Retries is retries: how many times a batch is sent again after a
	// retriable error, within DeliveryTimeout.
	Retries int
	// RetryBackoff is retry.backoff.ms: the wait before a failed batch is
	// sent again, and between two metadata refreshes.
	RetryBackoff time.Duration
	// DeliveryTimeout is delivery.timeout.ms: the time from Produce to the
	// callback, retries included; a batch older than this fails.
	DeliveryTimeout time.Duration
	// RequestTimeout is request.timeout.ms: how long a Produce request
	// waits for its response (the broker is told the same, for acks=all).
	RequestTimeout time.Duration
	// Idempotence is enable.idempotence: a producer id and per-partition
	// sequence numbers, so that retries neither duplicate nor reorder.
	Idempotence bool
	// Compression is compression.type: none, gzip, snappy, lz4 or zstd.
	Compression record.Codec
	// MaxRequestSize is max.request.size: the bytes of the batches of one
	// Produce request, and the largest record accepted.
	MaxRequestSize int
	// TransactionalID is transactional.id: set, the producer writes in
	// transactions (txn.go), and a later producer of the same id fences
	// this one. Requires idempotence.
	TransactionalID string
	// TransactionTimeout is transaction.timeout.ms: the coordinator aborts
	// a transaction open for longer.
	TransactionTimeout time.Duration
}

// DefaultConfig is Kafka 3.x's producer defaults (acks=all and
// idempotence on since 3.0).
func DefaultConfig() Config {
	return Config{
		ClientID:        "",
		Acks:            -1,
		BatchSize:       16384,
		Linger:          0,
		BufferMemory:    32 << 20,
		MaxBlock:        60 * time.Second,
		MaxInFlight:     5,
		Retries:         math.MaxInt32,
		RetryBackoff:    100 * time.Millisecond,
		DeliveryTimeout: 120 * time.Second,
		RequestTimeout:  30 * time.Second,
		Idempotence:     true,
		Compression:     record.CodecNone,
		MaxRequestSize:  1 << 20,

		TransactionTimeout: time.Minute,
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("producer: invalid configuration")

// ParseConfig reads Kafka's producer keys from props over DefaultConfig.
// An unknown key, a bad value or a contradiction is an error that names
// the key and the value. As in Kafka 3.2 and later, idempotence left at its
// default is switched off by acks other than all (or by max.in.flight
// above 5); set explicitly, it makes those an error.
func ParseConfig(props map[string]string) (Config, error) {
	c := DefaultConfig()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first error is the same from run to run
	idempotenceSet := false
	for _, key := range keys {
		v := strings.TrimSpace(props[key])
		var err error
		switch key {
		case "bootstrap.servers":
			c.BootstrapServers = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.BootstrapServers = append(c.BootstrapServers, s)
				}
			}
		case "client.id":
			c.ClientID = v
		case "acks":
			switch v {
			case "all", "-1":
				c.Acks = -1
			case "0":
				c.Acks = 0
			case "1":
				c.Acks = 1
			default:
				err = errors.New("must be all, -1, 0 or 1")
			}
		case "batch.size":
			c.BatchSize, err = atoi(v, 1, math.MaxInt32)
		case "linger.ms":
			c.Linger, err = millis(v)
		case "buffer.memory":
			var n int
			n, err = atoi(v, 1, math.MaxInt)
			c.BufferMemory = int64(n)
		case "max.block.ms":
			c.MaxBlock, err = millis(v)
		case "max.in.flight.requests.per.connection":
			c.MaxInFlight, err = atoi(v, 1, math.MaxInt32)
		case "retries":
			c.Retries, err = atoi(v, 0, math.MaxInt32)
		case "retry.backoff.ms":
			c.RetryBackoff, err = millis(v)
		case "delivery.timeout.ms":
			c.DeliveryTimeout, err = millis(v)
		case "request.timeout.ms":
			c.RequestTimeout, err = millis(v)
		case "enable.idempotence":
			idempotenceSet = true
			c.Idempotence, err = strconv.ParseBool(v)
		case "compression.type":
			c.Compression, err = ParseCodec(v)
		case "max.request.size":
			c.MaxRequestSize, err = atoi(v, 1, math.MaxInt32)
		case "transactional.id":
			c.TransactionalID = v
		case "transaction.timeout.ms":
			c.TransactionTimeout, err = millis(v)
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			return c, fmt.Errorf("%w: %s=%q: %w", ErrConfig, key, props[key], err)
		}
	}
	if !idempotenceSet && (c.Acks != -1 || c.MaxInFlight > 5) {
		c.Idempotence = false
	}
	return c, c.Validate()
}

// Validate checks what no single key can: the contradictions between
// keys, as Kafka's ProducerConfig does.
func (c *Config) Validate() error {
	if len(c.BootstrapServers) == 0 {
		return fmt.Errorf("%w: bootstrap.servers is empty", ErrConfig)
	}
	if c.TransactionalID != "" && !c.Idempotence {
		return fmt.Errorf("%w: transactional.id=%q needs enable.idempotence=true", ErrConfig, c.TransactionalID)
	}
	if c.Idempotence && c.Acks != -1 {
		return fmt.Errorf("%w: acks=%d: must be all (-1) with enable.idempotence=true", ErrConfig, c.Acks)
	}
	if c.Idempotence && c.MaxInFlight > 5 {
		return fmt.Errorf("%w: max.in.flight.requests.per.connection=%d: must be at most 5 with enable.idempotence=true", ErrConfig, c.MaxInFlight)
	}
	if c.BatchSize <= 0 || c.MaxInFlight <= 0 || c.MaxRequestSize <= 0 || c.BufferMemory <= 0 {
		return fmt.Errorf("%w: batch.size, max.in.flight.requests.per.connection, max.request.size and buffer.memory must be positive", ErrConfig)
	}
	if c.DeliveryTimeout < c.Linger+c.RequestTimeout {
		// Kafka's ProducerConfig refuses this too: a batch would expire
		// before its first request could time out.
		return fmt.Errorf("%w: delivery.timeout.ms=%d: must be at least linger.ms + request.timeout.ms = %d",
			ErrConfig, c.DeliveryTimeout.Milliseconds(), (c.Linger + c.RequestTimeout).Milliseconds())
	}
	return nil
}

// ParseCodec reads a compression.type value as Kafka names them.
func ParseCodec(s string) (record.Codec, error) {
	for c := record.CodecNone; c <= record.CodecZstd; c++ {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, errors.New("must be none, gzip, snappy, lz4 or zstd")
}

func atoi(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("must be in [%d, %d]", lo, hi)
	}
	return n, nil
}

func millis(s string) (time.Duration, error) {
	n, err := atoi(s, 0, math.MaxInt32)
	return time.Duration(n) * time.Millisecond, err
}
