package broker

import "github.com/kafkaworkbook/workbook/stage02-reactor/store"

// DefaultMaxConnections is the broker's default max.connections: half the
// open-file limit (Kafka: unlimited, which lets new clients hang in the
// accept queue once descriptors run out). The partitions and their
// segments have the other half (store.DefaultMaxPartitions).
func DefaultMaxConnections() int { return max(store.OpenFileLimit()/2, 1) }
