package protocol_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

func startBroker(t *testing.T) *broker.Broker {
	cfg, err := broker.ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "logs"),
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	b, err := broker.New(cfg, broker.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func TestClientNegotiatesVersionsAndRoundTrips(t *testing.T) {
	b := startBroker(t)
	ctx := context.Background()
	c, err := protocol.Dial(ctx, b.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()

	req := kmsg.NewPtrMetadataRequest()
	resp, err := c.Request(ctx, req)
	require.NoError(t, err)
	require.Equal(t, int16(12), req.GetVersion(), "the broker's max, flexible")
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1)

	_, err = c.Request(ctx, kmsg.NewPtrLeaderAndISRRequest())
	require.ErrorIs(t, err, protocol.ErrNoCommonVersion, "stage 02 serves no LeaderAndIsr")
}

func TestClientRequestHonoursContext(t *testing.T) {
	b := startBroker(t)
	c, err := protocol.Dial(context.Background(), b.Addr().String(), "test")
	require.NoError(t, err)
	defer c.Close()
	// A long-poll fetch the broker holds for a minute; the context ends first.
	b.Store().CreateTopic("t", 1, nil)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 60_000, 1, 1<<20
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Request(ctx, protocol.CapVersion(req, 12)) // by name: before topic ids
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// fakeBroker accepts one connection, answers its ApiVersions properly, then
// answers the next request with reply, as a broken or hostile peer would.
func fakeBroker(t *testing.T, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		readFrame := func() []byte {
			var size [4]byte
			if _, err := io.ReadFull(r, size[:]); err != nil {
				return nil
			}
			b := make([]byte, binary.BigEndian.Uint32(size[:]))
			io.ReadFull(r, b)
			return b
		}
		req := readFrame()
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 9}}
		c.Write(protocol.AppendResponse(nil, protocol.Header{CorrelationID: int32(binary.BigEndian.Uint32(req[4:])), APIKey: 18}, resp))
		readFrame()
		c.Write(reply)
		io.Copy(io.Discard, r)
	}()
	return ln.Addr().String()
}

// TestClientDoesNotAllocateWhatAPeerAnnounces: a response announced at
// 1.5 GB whose sender stops after ten bytes costs the client those bytes,
// and one announced past MaxResponseBytes is refused before any reading.
func TestClientDoesNotAllocateWhatAPeerAnnounces(t *testing.T) {
	for name, announced := range map[string]uint32{"under the limit": 200 << 20, "over the limit": 1500 << 20} {
		t.Run(name, func(t *testing.T) {
			reply := binary.BigEndian.AppendUint32(nil, announced)
			reply = append(reply, "0123456789"...)
			addr := fakeBroker(t, reply)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := protocol.Dial(ctx, addr, "test")
			require.NoError(t, err)
			defer c.Close()

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel2()
			_, err = c.Request(ctx2, kmsg.NewPtrMetadataRequest())
			runtime.ReadMemStats(&after)
			require.Error(t, err)
			if announced > protocol.MaxResponseBytes {
				require.ErrorIs(t, err, protocol.ErrResponseTooBig)
			}
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "allocated for an announced %d bytes", announced)
		})
	}
}
