package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// TestMaxConnectionsClosesClientsOverItAtOnceAndCountsEveryClose holds
// max.connections (50) open on each network server, as a hostile client
// holding thousands would: a client over the limit is closed at accept,
// within a second (not left in the accept queue); the held connections
// then close, half by their clients, half by the broker (a size prefix
// over socket.request.max.bytes), and every close gives its place back
// exactly once: the open count returns to zero and 50 new clients are
// served, and the 51st is closed again. A close path that forgot to
// give its place back would leave the broker refusing everyone for good.
func TestMaxConnectionsClosesClientsOverItAtOnceAndCountsEveryClose(t *testing.T) {
	for _, srv := range benchServers {
		t.Run(srv.name, func(t *testing.T) {
			tb := startBrokerWith(t, Options{ServerFactory: srv.factory}, "max.connections", "50")
			fill := func() []*rawConn {
				held := make([]*rawConn, 50)
				for i := range held {
					held[i] = tb.dial()
					held[i].apiVersions()
				}
				return held
			}
			held := fill()
			tb.dial().closedWithin(time.Second)
			require.Equal(t, int64(50), tb.NetworkStats().OpenConnections)

			for i, c := range held {
				if i%2 == 0 {
					require.NoError(t, c.conn.Close())
				} else {
					c.write(binary.BigEndian.AppendUint32(nil, 1<<31-1)) // over socket.request.max.bytes
				}
			}
			require.Eventually(t, func() bool { return tb.NetworkStats().OpenConnections == 0 },
				10*time.Second, time.Millisecond, "every close gives its place back")
			fill()
			tb.dial().closedWithin(time.Second)
			st := tb.NetworkStats()
			require.Equal(t, uint64(2), st.RejectedConnections)
			require.Equal(t, uint64(25), st.ClosedBadSize)
		})
	}
}

// TestDefaultMaxConnectionsIsAQuarterOfTheOpenFileLimit: without
// max.connections the broker takes a quarter of RLIMIT_NOFILE (5,000 of
// the 20,000 on the workbook's machines), the share the descriptor budget
// leaves it: half for the partitions' active .log files
// (store.DefaultMaxPartitions), a quarter for the older segments that
// reads open. docs/02-reactor.md and final/config/server.properties say
// the same.
func TestDefaultMaxConnectionsIsAQuarterOfTheOpenFileLimit(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{"log.dirs": t.TempDir()}, quietLogger)
	require.NoError(t, err)
	require.Equal(t, store.OpenFileLimit()/4, cfg.Network.MaxConnections)
	require.LessOrEqual(t, cfg.Network.MaxConnections+store.DefaultMaxPartitions(), store.OpenFileLimit()*3/4,
		"a quarter of the descriptors stays for the older segments reads open")
}

// apiVersions does an ApiVersions round trip on the connection.
func (c *rawConn) apiVersions() {
	c.t.Helper()
	c.send(kmsg.NewPtrApiVersionsRequest(), 1)
	id, _ := c.receive()
	require.Equal(c.t, int32(1), id)
}

// closedWithin checks that the broker closes the connection, with nothing
// sent, within d.
func (c *rawConn) closedWithin(d time.Duration) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(d)))
	n, err := c.r.Read(make([]byte, 1))
	require.Zero(c.t, n, "the broker sent data instead of closing")
	require.True(c.t, err == io.EOF || errors.Is(err, syscall.ECONNRESET), "want the connection closed within %v, got %v", d, err)
}
