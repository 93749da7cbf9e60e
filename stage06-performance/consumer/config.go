package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kafka's consumer config keys, verbatim, with their defaults.
const (
	KeyBootstrapServers            = "bootstrap.servers"             // required
	KeyClientID                    = "client.id"                     // ""
	KeyGroupID                     = "group.id"                      // "": no group, partitions by Assign
	KeyAutoOffsetReset             = "auto.offset.reset"             // latest
	KeyEnableAutoCommit            = "enable.auto.commit"            // true
	KeyAutoCommitInterval          = "auto.commit.interval.ms"       // 5000
	KeyFetchMinBytes               = "fetch.min.bytes"               // 1
	KeyFetchMaxWait                = "fetch.max.wait.ms"             // 500
	KeyFetchMaxBytes               = "fetch.max.bytes"               // 52428800
	KeyMaxPartitionFetchBytes      = "max.partition.fetch.bytes"     // 1048576
	KeyMaxPollRecords              = "max.poll.records"              // 500
	KeyMaxPollInterval             = "max.poll.interval.ms"          // 300000: the rebalance timeout
	KeySessionTimeout              = "session.timeout.ms"            // 45000
	KeyHeartbeatInterval           = "heartbeat.interval.ms"         // 3000
	KeyPartitionAssignmentStrategy = "partition.assignment.strategy" // range
	KeyRequestTimeout              = "request.timeout.ms"            // 30000
	KeyMetadataMaxAge              = "metadata.max.age.ms"           // 300000
	KeyRetryBackoff                = "retry.backoff.ms"              // 100
	KeyCheckCRCs                   = "check.crcs"                    // true
	KeyIsolationLevel              = "isolation.level"               // read_uncommitted
)

// Isolation levels: isolation.level's values (KIP-98).
const (
	ReadUncommitted = "read_uncommitted" // every record below the high watermark
	ReadCommitted   = "read_committed"   // below the last stable offset, without aborted transactions' records
)

// Offset resets: auto.offset.reset's values.
const (
	ResetEarliest = "earliest"
	ResetLatest   = "latest"
	ResetNone     = "none"
)

// Config is a consumer's configuration, one field per Kafka key.
type Config struct {
	BootstrapServers       []string      // bootstrap.servers: host:port, comma-separated in a properties file
	ClientID               string        // client.id, sent in every request header
	GroupID                string        // group.id; empty: no group, Assign names the partitions
	AutoOffsetReset        string        // auto.offset.reset: where to start without a committed or valid offset
	EnableAutoCommit       bool          // enable.auto.commit: commit in the background
	AutoCommitInterval     time.Duration // auto.commit.interval.ms
	FetchMinBytes          int32         // fetch.min.bytes: the broker holds a fetch until it has this much
	FetchMaxWait           time.Duration // fetch.max.wait.ms: … or until this long has passed
	FetchMaxBytes          int32         // fetch.max.bytes: a fetch response's budget
	MaxPartitionFetchBytes int32         // max.partition.fetch.bytes: one partition's share of it
	MaxPollRecords         int           // max.poll.records: the most records one Poll returns
	MaxPollInterval        time.Duration // max.poll.interval.ms: sent as JoinGroup's rebalance timeout
	SessionTimeout         time.Duration // session.timeout.ms: the coordinator drops a silent member after it
	HeartbeatInterval      time.Duration // heartbeat.interval.ms
	AssignmentStrategies   []string      // partition.assignment.strategy: "range", "roundrobin", in preference order
	RequestTimeout         time.Duration // request.timeout.ms
	MetadataMaxAge         time.Duration // metadata.max.age.ms: leaders are re-read at least this often
	RetryBackoff           time.Duration // retry.backoff.ms: the pause after a failed request
	CheckCRCs              bool          // check.crcs: verify each fetched batch's CRC-32C before decoding it
	IsolationLevel         string        // isolation.level: read_uncommitted or read_committed

	// BufferedFetches bounds the fetch responses waiting for Poll (all
	// fetchers together): how far the fetchers run ahead of the
	// application. Kafka has no key for it (its Fetcher keeps completed
	// fetches in an unbounded queue and sends no new fetch for a
	// partition that has one); 0 means 4.
	BufferedFetches int
}

// DefaultConfig is Kafka's defaults. BootstrapServers must be set.
func DefaultConfig() Config {
	return Config{
		AutoOffsetReset:        ResetLatest,
		EnableAutoCommit:       true,
		AutoCommitInterval:     5 * time.Second,
		FetchMinBytes:          1,
		FetchMaxWait:           500 * time.Millisecond,
		FetchMaxBytes:          50 << 20,
		MaxPartitionFetchBytes: 1 << 20,
		MaxPollRecords:         500,
		MaxPollInterval:        5 * time.Minute,
		SessionTimeout:         45 * time.Second,
		HeartbeatInterval:      3 * time.Second,
		AssignmentStrategies:   []string{"range"},
		RequestTimeout:         30 * time.Second,
		MetadataMaxAge:         5 * time.Minute,
		RetryBackoff:           100 * time.Millisecond,
		CheckCRCs:              true,
		IsolationLevel:         ReadUncommitted,
		BufferedFetches:        4,
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("consumer: bad config")

// ParseConfig reads Kafka's keys from props over DefaultConfig. An
// unknown key is an error (Kafka only warns), so that a misspelt key is
// not silently ignored.
func ParseConfig(props map[string]string) (Config, error) {
	c := DefaultConfig()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first bad key reported is always the same one
	for _, k := range keys {
		v := strings.TrimSpace(props[k])
		var err error
		switch k {
		case KeyBootstrapServers:
			c.BootstrapServers = splitList(v)
		case KeyClientID:
			c.ClientID = v
		case KeyGroupID:
			c.GroupID = v
		case KeyAutoOffsetReset:
			c.AutoOffsetReset = v
		case KeyEnableAutoCommit:
			c.EnableAutoCommit, err = strconv.ParseBool(v)
		case KeyAutoCommitInterval:
			c.AutoCommitInterval, err = millis(v)
		case KeyFetchMinBytes:
			c.FetchMinBytes, err = int32s(v)
		case KeyFetchMaxWait:
			c.FetchMaxWait, err = millis(v)
		case KeyFetchMaxBytes:
			c.FetchMaxBytes, err = int32s(v)
		case KeyMaxPartitionFetchBytes:
			c.MaxPartitionFetchBytes, err = int32s(v)
		case KeyMaxPollRecords:
			var n int32
			n, err = int32s(v)
			c.MaxPollRecords = int(n)
		case KeyMaxPollInterval:
			c.MaxPollInterval, err = millis(v)
		case KeySessionTimeout:
			c.SessionTimeout, err = millis(v)
		case KeyHeartbeatInterval:
			c.HeartbeatInterval, err = millis(v)
		case KeyPartitionAssignmentStrategy:
			c.AssignmentStrategies = splitList(v)
		case KeyRequestTimeout:
			c.RequestTimeout, err = millis(v)
		case KeyMetadataMaxAge:
			c.MetadataMaxAge, err = millis(v)
		case KeyRetryBackoff:
			c.RetryBackoff, err = millis(v)
		case KeyCheckCRCs:
			c.CheckCRCs, err = strconv.ParseBool(v)
		case KeyIsolationLevel:
			c.IsolationLevel = v
		default:
			return c, fmt.Errorf("%w: unknown key %q", ErrConfig, k)
		}
		if err != nil {
			return c, fmt.Errorf("%w: %s=%q: %v", ErrConfig, k, props[k], err)
		}
	}
	return c, c.Validate()
}

// Validate checks the values that no parser catches, naming the key.
func (c *Config) Validate() error {
	bad := func(key string, v any, why string) error {
		return fmt.Errorf("%w: %s=%v: %s", ErrConfig, key, v, why)
	}
	switch {
	case len(c.BootstrapServers) == 0:
		return bad(KeyBootstrapServers, `""`, "at least one host:port is required")
	case c.AutoOffsetReset != ResetEarliest && c.AutoOffsetReset != ResetLatest && c.AutoOffsetReset != ResetNone:
		return bad(KeyAutoOffsetReset, c.AutoOffsetReset, "must be earliest, latest or none")
	case c.IsolationLevel != ReadUncommitted && c.IsolationLevel != ReadCommitted:
		return bad(KeyIsolationLevel, c.IsolationLevel, "must be read_uncommitted or read_committed")
	case c.FetchMinBytes < 0:
		return bad(KeyFetchMinBytes, c.FetchMinBytes, "must be at least 0")
	case c.FetchMaxBytes < 1:
		return bad(KeyFetchMaxBytes, c.FetchMaxBytes, "must be at least 1")
	case c.MaxPartitionFetchBytes < 1:
		return bad(KeyMaxPartitionFetchBytes, c.MaxPartitionFetchBytes, "must be at least 1")
	case c.MaxPollRecords < 1:
		return bad(KeyMaxPollRecords, c.MaxPollRecords, "must be at least 1")
	case c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.SessionTimeout:
		return bad(KeyHeartbeatInterval, c.HeartbeatInterval.Milliseconds(), "must be above 0 and below session.timeout.ms")
	case c.EnableAutoCommit && c.AutoCommitInterval <= 0:
		return bad(KeyAutoCommitInterval, c.AutoCommitInterval.Milliseconds(), "must be above 0")
	case c.FetchMaxWait < 0:
		return bad(KeyFetchMaxWait, c.FetchMaxWait.Milliseconds(), "must be at least 0")
	case c.MaxPollInterval <= 0:
		return bad(KeyMaxPollInterval, c.MaxPollInterval.Milliseconds(), "must be above 0")
	case c.RequestTimeout <= 0:
		return bad(KeyRequestTimeout, c.RequestTimeout.Milliseconds(), "must be above 0")
	case c.RetryBackoff <= 0:
		return bad(KeyRetryBackoff, c.RetryBackoff.Milliseconds(), "must be above 0")
	case c.MetadataMaxAge <= 0:
		return bad(KeyMetadataMaxAge, c.MetadataMaxAge.Milliseconds(), "must be above 0")
	}
	if len(c.AssignmentStrategies) == 0 {
		return bad(KeyPartitionAssignmentStrategy, `""`, "name at least one of range, roundrobin")
	}
	for _, s := range c.AssignmentStrategies {
		if assignorNamed(s) == nil {
			return bad(KeyPartitionAssignmentStrategy, s, "known: range, roundrobin (or Kafka's RangeAssignor, RoundRobinAssignor)")
		}
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func millis(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("must be at least 0")
	}
	return time.Duration(n) * time.Millisecond, nil
}

func int32s(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	return int32(n), err
}
