package wire_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// bigRecords is larger than anything the two sockets' buffers can hold
// (the deaf broker's 4 KiB, the client's 4 MiB at most on Linux), so a
// request carrying it cannot be written whole while the broker does not
// read.
const bigRecords = 16 << 20

// A deafBroker answers ApiVersions (Produce v0-v3, Metadata v0-v1), then
// stops reading: a broker alive on the network whose socket buffer
// (4 KiB) fills under a large request. It reads the size of the request
// after ApiVersions, reports it on writing (the client's write is under
// way, and cannot end while nobody reads), and reads nothing more until
// it hangs up.
type deafBroker struct {
	addr    string
	writing chan uint32   // the size of the request being written, once
	conn    chan net.Conn // the accepted connection, until hangUp takes it
}

// startDeafBroker starts a deaf broker; it hangs up when the test ends.
func startDeafBroker(t *testing.T) *deafBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &deafBroker{addr: ln.Addr().String(), writing: make(chan uint32, 1), conn: make(chan net.Conn, 1)}
	t.Cleanup(func() {
		ln.Close()
		b.hangUp()
	})
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		b.conn <- nc
		if err := nc.(*net.TCPConn).SetReadBuffer(4096); err != nil {
			t.Errorf("deaf broker: %v", err)
			return
		}
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(nc, frame); err != nil {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		resp := kmsg.NewPtrApiVersionsResponse() // v0
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MaxVersion: 3}, {ApiKey: 3, MaxVersion: 1}}
		body := resp.AppendTo(binary.BigEndian.AppendUint32(nil, uint32(corr)))
		if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
			return
		}
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			return
		}
		b.writing <- binary.BigEndian.Uint32(size[:])
	}()
	return b
}

// hangUp closes the broker's side: a write still stuck in a Conn fails
// now. A test that gives up waiting calls it first, so that its deferred
// calls, which may wait for that write, end.
func (b *deafBroker) hangUp() {
	select {
	case nc := <-b.conn:
		nc.Close()
	default:
	}
}

// waitForWrite waits until a request larger than bigRecords is being
// written to the broker.
func (b *deafBroker) waitForWrite(t *testing.T) {
	select {
	case n := <-b.writing:
		require.Greater(t, n, uint32(bigRecords))
	case <-time.After(10 * time.Second):
		t.Fatal("the large request was never written")
	}
}

// within waits up to 10 s for ch, or hangs up and fails with msg.
func within[T any](t *testing.T, b *deafBroker, ch <-chan T, msg string) T {
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		b.hangUp()
		t.Fatal(msg)
		panic("unreachable")
	}
}

// bigProduce is a Produce request too large for a deaf broker's socket.
// Its records are not a valid batch: the deaf broker never reads them.
func bigProduce(acks int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 30_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: 0, Records: make([]byte, bigRecords)},
	}}}
	return req
}

// Close fails the connection at once, even while a write holds the
// connection's lock because the broker stopped reading: closing the
// socket is what ends that write.
func TestCloseDoesNotWaitForAWriteStuckOnADeafBroker(t *testing.T) {
	b := startDeafBroker(t)
	c, err := wire.Dial(ctx(t), b.addr, wire.Options{RequestTimeout: time.Minute})
	require.NoError(t, err)
	sent := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		sent <- c.Send(ctx(t), bigProduce(1), func(_ kmsg.Response, err error) { done <- err })
	}()
	b.waitForWrite(t)

	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	within(t, b, closed, "Close waited for the write stuck on the deaf broker")
	// Part of the request was written: Send hands the failure to done.
	require.NoError(t, within(t, b, sent, "the stuck Send never returned"))
	require.ErrorIs(t, within(t, b, done, "the request never failed"), net.ErrClosed)
	require.ErrorIs(t, c.Err(), net.ErrClosed)
}

// A write the broker does not read fails at request.timeout.ms, as an
// unanswered request does: with acks=1 the request fails with
// ErrRequestTimeout; with acks=0 (no response to wait for) Send itself
// returns it. Either way the connection is given up.
func TestAWriteStuckOnADeafBrokerFailsAtTheRequestTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, acks := range []int16{1, 0} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			b := startDeafBroker(t)
			c, err := wire.Dial(ctx(t), b.addr, wire.Options{RequestTimeout: timeout})
			require.NoError(t, err)
			failed := make(chan error, 1)
			start := time.Now()
			go func() {
				if acks == 0 {
					failed <- c.Send(ctx(t), bigProduce(0), func(kmsg.Response, error) {})
					return
				}
				_, err := c.Request(ctx(t), bigProduce(1))
				failed <- err
			}()
			b.waitForWrite(t)
			require.ErrorIs(t, within(t, b, failed, "the stuck write never failed"), wire.ErrRequestTimeout)
			require.GreaterOrEqual(t, time.Since(start), timeout-50*time.Millisecond)
			within(t, b, c.Dead(), "the connection was not given up")
			require.ErrorIs(t, c.Err(), wire.ErrRequestTimeout)
		})
	}
}

// A write stuck on one broker does not hold up the pool: asking for that
// broker's connection (which looks at whether it died) answers at once,
// and the pool's other calls are not queued behind it.
func TestThePoolDoesNotWaitForAWriteStuckOnADeafBroker(t *testing.T) {
	b := startDeafBroker(t)
	p := wire.NewPool([]string{b.addr}, wire.Options{RequestTimeout: time.Minute})
	defer p.Close()
	c, err := p.Conn(ctx(t), b.addr)
	require.NoError(t, err)
	go c.Send(context.Background(), bigProduce(1), func(kmsg.Response, error) {})
	b.waitForWrite(t)

	again := make(chan *wire.Conn, 1)
	go func() {
		if c, err := p.Conn(ctx(t), b.addr); err == nil {
			again <- c
		}
	}()
	require.Same(t, c, within(t, b, again, "the pool waited for the write stuck on the deaf broker"),
		"the connection is alive, only slow")
	metadata := make(chan *wire.Metadata, 1)
	go func() { metadata <- p.Metadata() }()
	require.Nil(t, within(t, b, metadata, "the pool's other calls waited for the stuck write"))
}
