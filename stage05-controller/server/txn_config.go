package server

import "github.com/kafkaworkbook/workbook/stage05-controller/txn"

// The transaction coordinator's keys, with Kafka's names and defaults
// (txn.DefaultConfig).
const (
	KeyTxnTopicPartitions        = "transaction.state.log.num.partitions"                        // 50
	KeyTxnTopicReplicationFactor = "transaction.state.log.replication.factor"                    // 3
	KeyTxnTopicMinISR            = "transaction.state.log.min.isr"                               // 2
	KeyTxnTopicSegmentBytes      = "transaction.state.log.segment.bytes"                         // 104857600
	KeyTxnLoadBufferSize         = "transaction.state.log.load.buffer.size"                      // 5242880
	KeyTxnMaxTimeout             = "transaction.max.timeout.ms"                                  // 900000
	KeyTxnAbortCheck             = "transaction.abort.timed.out.transaction.cleanup.interval.ms" // 10000
	KeyTxnIDExpiration           = "transactional.id.expiration.ms"                              // 604800000
	KeyTxnIDExpirationCheck      = "transaction.remove.expired.transaction.cleanup.interval.ms"  // 3600000
)

var txnKeys = []string{KeyTxnTopicPartitions, KeyTxnTopicReplicationFactor, KeyTxnTopicMinISR, KeyTxnTopicSegmentBytes,
	KeyTxnLoadBufferSize, KeyTxnMaxTimeout, KeyTxnAbortCheck, KeyTxnIDExpiration, KeyTxnIDExpirationCheck}

// parseTxnConfig reads the transaction coordinator's keys into cfg.
func parseTxnConfig(props map[string]string, cfg *Config) error {
	cfg.Txn, cfg.TxnReplicationFactor, cfg.TxnMinISR, cfg.TxnSegmentBytes = txn.DefaultConfig(), 3, 2, 100<<20
	return parseIntKeys(props, []intKey{
		{KeyTxnTopicPartitions, 1, func(v int64) { cfg.Txn.Partitions = int32(min(v, 1<<31-1)) }},
		{KeyTxnTopicReplicationFactor, 1, func(v int64) { cfg.TxnReplicationFactor = int(min(v, 1<<15-1)) }},
		{KeyTxnTopicMinISR, 1, func(v int64) { cfg.TxnMinISR = int(min(v, 1<<15-1)) }},
		{KeyTxnTopicSegmentBytes, 1, func(v int64) { cfg.TxnSegmentBytes = v }},
		{KeyTxnLoadBufferSize, 1, func(v int64) { cfg.Txn.LoadBufferBytes = int(min(v, 1<<31-1)) }},
		{KeyTxnMaxTimeout, 1, ms(&cfg.Txn.MaxTimeout)},
		{KeyTxnAbortCheck, 1, ms(&cfg.Txn.AbortCheck)},
		{KeyTxnIDExpiration, 1, ms(&cfg.Txn.IDExpiration)},
		{KeyTxnIDExpirationCheck, 1, ms(&cfg.Txn.IDExpirationCheck)},
	})
}
