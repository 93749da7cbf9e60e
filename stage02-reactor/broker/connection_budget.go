package broker

import "github.com/kafkaworkbook/workbook/stage02-reactor/store"

// DefaultMaxConnections is the broker's default max.connections: a
// quarter of the open-file limit (Kafka: unlimited, which lets new clients
// hang in the accept queue once descriptors run out). The partitions and
// their segments have the rest (store.DefaultMaxPartitions).
func DefaultMaxConnections() int { return max(store.OpenFileLimit()/4, 1) }
