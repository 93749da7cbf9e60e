package zktest

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// startFakeServer answers every connection on 127.0.0.1 with reply, as
// ZooKeeper answers a four-letter word, and closes it.
func startFakeServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			conn.Read(buf)
			conn.Write([]byte(reply))
			conn.Close()
		}
	}()
	return ln.Addr().String()
}

func TestServerModeReadsSrvrReply(t *testing.T) {
	tests := []struct {
		name    string
		reply   string
		mode    string
		serving bool
	}{
		{"follower", "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n", "follower", true},
		{"leader", "Zookeeper version: 3.8.0\nMode: leader\n", "leader", true},
		{"standalone", "Mode: standalone\n", "standalone", true},
		{"no quorum", "This ZooKeeper instance is not currently serving requests\n", "", false},
		{"closed at once", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode, err := serverMode(t.Context(), startFakeServer(t, tt.reply))
			require.Equal(t, tt.mode, mode)
			require.Equal(t, tt.serving, err == nil, "error %v", err)
		})
	}
}

func TestServerAddressesAreInTheUpperHalf(t *testing.T) {
	lower, upper := halves(netip.MustParsePrefix("192.168.192.0/20"))
	require.Equal(t, netip.MustParsePrefix("192.168.192.0/21"), lower)
	require.Equal(t, netip.MustParsePrefix("192.168.200.0/21"), upper)

	nw := &ensembleNetwork{static: upper.Addr()}
	require.Equal(t, netip.MustParseAddr("192.168.200.10"), nw.serverAddr(0))
	require.Equal(t, netip.MustParseAddr("192.168.200.12"), nw.serverAddr(2))
	require.True(t, upper.Contains(nw.serverAddr(8)))
	require.False(t, lower.Contains(nw.serverAddr(0)), "Docker hands out the lower half")
}
