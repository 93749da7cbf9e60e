//go:build !linux

package broker

import "github.com/kafkaworkbook/workbook/stage02-reactor/network"

// benchServers: elsewhere there is only the portable server.
var benchServers = []benchServer{
	{"portable", network.NewPortableServer},
}
