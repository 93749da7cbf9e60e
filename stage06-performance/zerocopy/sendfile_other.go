//go:build !linux

package zerocopy

import "github.com/kafkaworkbook/workbook/stage02-reactor/network"

// Zero reports whether Default sends without copying: not here.
const Zero = false

// Default is the sender a broker uses unless it asks for copies. Outside
// Linux it is the copying sender: the portable server (stage 02) writes
// from memory anyway.
func Default() network.RegionSender { return network.CopyRegionSender{} }
