package server

import (
	"time"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// The group coordinator's keys, with Kafka's names and defaults
// (group.DefaultConfig).
const (
	KeyOffsetsTopicPartitions        = "offsets.topic.num.partitions"        // 50
	KeyOffsetsTopicReplicationFactor = "offsets.topic.replication.factor"    // 3
	KeyOffsetsTopicSegmentBytes      = "offsets.topic.segment.bytes"         // 104857600
	KeyOffsetsCommitTimeout          = "offsets.commit.timeout.ms"           // 5000
	KeyOffsetsLoadBufferSize         = "offsets.load.buffer.size"            // 5242880
	KeyOffsetMetadataMaxBytes        = "offset.metadata.max.bytes"           // 4096
	KeyGroupMinSessionTimeout        = "group.min.session.timeout.ms"        // 6000
	KeyGroupMaxSessionTimeout        = "group.max.session.timeout.ms"        // 1800000
	KeyGroupInitialRebalanceDelay    = "group.initial.rebalance.delay.ms"    // 3000
	KeyGroupMaxSize                  = "group.max.size"                      // 2147483647
	KeyOffsetsRetention              = "offsets.retention.ms"                // 604800000
	KeyOffsetsRetentionCheck         = "offsets.retention.check.interval.ms" // 600000
)

var groupKeys = []string{KeyOffsetsTopicPartitions, KeyOffsetsTopicReplicationFactor, KeyOffsetsTopicSegmentBytes,
	KeyOffsetsCommitTimeout, KeyOffsetsLoadBufferSize, KeyOffsetMetadataMaxBytes, KeyGroupMinSessionTimeout,
	KeyGroupMaxSessionTimeout, KeyGroupInitialRebalanceDelay, KeyGroupMaxSize, KeyOffsetsRetention, KeyOffsetsRetentionCheck}

// parseGroupConfig reads the coordinator's keys into cfg. cfg.Broker is
// read already: the largest group record is message.max.bytes, which
// __consumer_offsets inherits (createOffsetsTopic sets no
// max.message.bytes, and the broker checks message.max.bytes only).
func parseGroupConfig(props map[string]string, cfg *Config) error {
	cfg.Group, cfg.OffsetsReplicationFactor, cfg.OffsetsSegmentBytes = group.DefaultConfig(), 3, 100<<20
	cfg.Group.MaxRecordBytes = int(cfg.Broker.MessageMaxBytes)
	return parseIntKeys(props, []intKey{
		{KeyOffsetsTopicPartitions, 1, func(v int64) { cfg.Group.Partitions = int32(min(v, 1<<31-1)) }},
		{KeyOffsetsTopicReplicationFactor, 1, func(v int64) { cfg.OffsetsReplicationFactor = int(min(v, 1<<15-1)) }},
		{KeyOffsetsTopicSegmentBytes, 1, func(v int64) { cfg.OffsetsSegmentBytes = v }},
		{KeyOffsetsCommitTimeout, 1, ms(&cfg.Group.CommitTimeout)},
		{KeyOffsetsLoadBufferSize, 1, func(v int64) { cfg.Group.LoadBufferBytes = int(min(v, 1<<31-1)) }},
		{KeyOffsetMetadataMaxBytes, 0, func(v int64) { cfg.Group.MetadataMaxBytes = int(min(v, 1<<31-1)) }},
		{KeyGroupMinSessionTimeout, 0, ms(&cfg.Group.MinSessionTimeout)},
		{KeyGroupMaxSessionTimeout, 0, ms(&cfg.Group.MaxSessionTimeout)},
		{KeyGroupInitialRebalanceDelay, 0, ms(&cfg.Group.InitialRebalanceDelay)},
		{KeyGroupMaxSize, 1, func(v int64) { cfg.Group.MaxSize = int(min(v, 1<<31-1)) }},
		{KeyOffsetsRetention, 1, ms(&cfg.Group.OffsetsRetention)},
		{KeyOffsetsRetentionCheck, 1, ms(&cfg.Group.OffsetsRetentionCheck)},
	})
}

// intKey is an integer key of a coordinator: its least value and where
// it goes.
type intKey struct {
	key string
	min int64
	set func(int64)
}

// parseIntKeys sets each key present in props, refusing a bad value with
// the key's name.
func parseIntKeys(props map[string]string, keys []intKey) error {
	for _, k := range keys {
		if raw, ok := props[k.key]; ok {
			v, err := parseInt(k.key, raw, k.min)
			if err != nil {
				return err
			}
			k.set(v)
		}
	}
	return nil
}

// ms sets a duration from a count of milliseconds.
func ms(d *time.Duration) func(int64) {
	return func(v int64) { *d = time.Duration(v) * time.Millisecond }
}
