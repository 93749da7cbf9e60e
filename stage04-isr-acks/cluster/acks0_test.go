package cluster

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// frame encodes a request with a v1 header (not flexible): size, api key,
// version, correlation id, client id, body.
func frame(req kmsg.Request, correlationID int32) []byte {
	body := req.AppendTo(nil)
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, uint16(len("acks0-test")))
	b = append(b, "acks0-test"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestAcksZeroWritesNoResponseAndTheConnectionGoesOn: seed §1.4's acks=0 is
// fire and forget. The broker appends and writes nothing back, not even an
// empty response, and the next request on the same connection is answered
// (the connection is unmuted without a response). Read on the raw socket:
// the first bytes to arrive are the answer to the second request.
func TestAcksZeroWritesNoResponseAndTheConnectionGoesOn(t *testing.T) {
	tc := startCluster(t, nil)
	end := tc.logEnd(0)
	b := record.NewBatch(time.Now().UnixMilli(), record.Record{Value: []byte("fire and forget")})
	batch, err := record.AppendBatch(nil, b)
	require.NoError(t, err)
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 7, 0, 5000
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: tc.tp.Topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 0

	leader, _ := tc.Broker(0)
	conn, err := net.Dial("tcp", leader.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(frame(produce, 1))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tc.logEnd(0) == end+1 }, 10*time.Second, 5*time.Millisecond, "appended")

	// Nothing comes back for the produce...
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = conn.Read(make([]byte, 1))
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "no response bytes for acks=0, got %v", err)

	// ...and the next request is answered: its correlation id is the first
	// thing on the wire.
	_, err = conn.Write(frame(versions, 2))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	head := make([]byte, 8)
	_, err = io.ReadFull(conn, head)
	require.NoError(t, err)
	require.Equal(t, uint32(2), binary.BigEndian.Uint32(head[4:]), "the answer is the ApiVersions one")
}
