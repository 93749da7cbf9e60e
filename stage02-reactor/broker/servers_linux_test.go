package broker

import "github.com/kafkaworkbook/workbook/stage02-reactor/network"

// benchServers are the network servers the benchmarks compare: on Linux,
// the epoll reactor and the goroutine-per-connection baseline.
var benchServers = []benchServer{
	{"reactor", network.NewReactorServer},
	{"portable", network.NewPortableServer},
}
