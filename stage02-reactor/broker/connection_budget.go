package broker

import "github.com/kafkaworkbook/workbook/stage02-reactor/store"

// DefaultMaxConnections is the broker's default max.connections: a
// quarter of the open-file limit (Kafka: unlimited, which lets new clients
// hang in the accept queue once descriptors run out). The budget, for the
// 20,000 descriptors of the workbook's machines:
//
//	half       10,000  partitions: each keeps its active .log open (its
//	                   .index and .timeindex are mapped, then closed:
//	                   store.DefaultMaxPartitions)
//	a quarter   5,000  older segments' .log files, opened by reads
//	a quarter   5,000  connections (one socket each), this default
//
// plus a handful for the listeners, epoll sets, eventfds, each acceptor's
// spare descriptor and checkpoint files. A broker expected to hold more
// connections needs a higher open-file limit, or max.connections set at
// the cost of the segments' share.
func DefaultMaxConnections() int { return max(store.OpenFileLimit()/4, 1) }
