package wire_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/broker"
	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

func startBroker(t *testing.T) string {
	cfg, err := broker.ParseConfig(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  filepath.Join(t.TempDir(), "logs"),
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	b, err := broker.New(cfg, broker.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, b.Start())
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b.Addr().String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Many requests sent without waiting come back to their own callers, in
// the order they were sent.
func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	c, err := wire.Dial(ctx(t), startBroker(t), wire.Options{ClientID: "t", MaxInFlight: 5})
	require.NoError(t, err)
	defer c.Close()

	const n = 200
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		req := kmsg.NewPtrMetadataRequest()
		require.NoError(t, c.Send(ctx(t), req, func(r kmsg.Response, err error) {
			defer wg.Done()
			require.NoError(t, err)
			require.IsType(t, &kmsg.MetadataResponse{}, r)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}))
	}
	wg.Wait()
	for i, got := range order {
		require.Equal(t, i, got)
	}
}

// silentBroker answers ApiVersions and then reads requests without ever
// answering; it reports how many it read.
func silentBroker(t *testing.T) (addr string, reqs <-chan int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ch := make(chan int32, 100)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		first := true
		for {
			var size [4]byte
			if _, err := io.ReadFull(nc, size[:]); err != nil {
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(nc, frame); err != nil {
				return
			}
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			if first { // ApiVersions v0: error 0, Metadata v0-v1
				first = false
				body := binary.BigEndian.AppendUint32(nil, uint32(corr))
				body = append(body, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0, 0, 1)
				nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))))
				nc.Write(body)
				continue
			}
			ch <- corr
		}
	}()
	return ln.Addr().String(), ch
}

// A connection holds at most MaxInFlight requests unanswered: the next
// Send waits, and gives up with its context.
func TestSendWaitsWhileMaxInFlightAreUnanswered(t *testing.T) {
	addr, reqs := silentBroker(t)
	c, err := wire.Dial(ctx(t), addr, wire.Options{MaxInFlight: 3})
	require.NoError(t, err)
	defer c.Close()
	for range 3 {
		require.NoError(t, c.Send(ctx(t), kmsg.NewPtrMetadataRequest(), func(kmsg.Response, error) {}))
	}
	for range 3 {
		<-reqs
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = c.Send(short, kmsg.NewPtrMetadataRequest(), func(kmsg.Response, error) {})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case corr := <-reqs:
		t.Fatalf("a fourth request (corr %d) reached the broker", corr)
	default:
	}
}

// TrySend takes a slot only if one is free: with MaxInFlight requests
// unanswered it returns at once, sends nothing, and will not run done.
func TestTrySendDoesNotWaitForAFullConnection(t *testing.T) {
	addr, reqs := silentBroker(t)
	c, err := wire.Dial(ctx(t), addr, wire.Options{MaxInFlight: 2})
	require.NoError(t, err)
	defer c.Close()
	ran := make(chan error, 3)
	for range 2 {
		require.True(t, c.Ready())
		sent, err := c.TrySend(kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { ran <- err })
		require.NoError(t, err)
		require.True(t, sent)
	}
	for range 2 {
		<-reqs
	}
	require.False(t, c.Ready())
	sent, err := c.TrySend(kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { ran <- err })
	require.NoError(t, err)
	require.False(t, sent, "no slot was free")
	select {
	case corr := <-reqs:
		t.Fatalf("a third request (corr %d) reached the broker", corr)
	default:
	}
	c.Close()
	for range 2 {
		require.ErrorIs(t, <-ran, net.ErrClosed)
	}
	select {
	case err := <-ran:
		t.Fatalf("the done of a request not sent ran: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	sent, err = c.TrySend(kmsg.NewPtrMetadataRequest(), func(kmsg.Response, error) {})
	require.ErrorIs(t, err, net.ErrClosed)
	require.False(t, sent)
}

// An answer frees its slot before its done runs, so a done (or whoever it
// wakes) finds the slot free: a single sender loop woken by its answers
// never misses one.
func TestAnAnswerFreesItsSlotBeforeItsDoneRuns(t *testing.T) {
	c, err := wire.Dial(ctx(t), startBroker(t), wire.Options{MaxInFlight: 1})
	require.NoError(t, err)
	defer c.Close()
	const n = 50
	sentInDone := make(chan bool, n)
	var done func(kmsg.Response, error)
	left := n
	done = func(_ kmsg.Response, err error) {
		require.NoError(t, err)
		if left--; left == 0 {
			close(sentInDone)
			return
		}
		sent, err := c.TrySend(kmsg.NewPtrMetadataRequest(), done)
		require.NoError(t, err)
		sentInDone <- sent
	}
	sent, err := c.TrySend(kmsg.NewPtrMetadataRequest(), done)
	require.NoError(t, err)
	require.True(t, sent)
	for sent := range sentInDone {
		require.True(t, sent, "the slot was still taken when done ran")
	}
}

// An unanswered request fails after request.timeout.ms, and so does every
// request behind it: the connection is given up.
func TestUnansweredRequestsFailAfterTheRequestTimeout(t *testing.T) {
	addr, _ := silentBroker(t)
	c, err := wire.Dial(ctx(t), addr, wire.Options{RequestTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	errs := make(chan error, 2)
	for range 2 {
		require.NoError(t, c.Send(ctx(t), kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { errs <- err }))
	}
	start := time.Now()
	for range 2 {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, wire.ErrRequestTimeout)
		case <-time.After(10 * time.Second):
			t.Fatal("the requests never failed")
		}
	}
	require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	<-c.Dead()
	require.Error(t, c.Send(ctx(t), kmsg.NewPtrMetadataRequest(), func(kmsg.Response, error) {}))
}

// Closing fails what is in flight, once each.
func TestCloseFailsRequestsInFlight(t *testing.T) {
	addr, reqs := silentBroker(t)
	c, err := wire.Dial(ctx(t), addr, wire.Options{})
	require.NoError(t, err)
	errs := make(chan error, 10)
	for range 4 {
		require.NoError(t, c.Send(ctx(t), kmsg.NewPtrMetadataRequest(), func(_ kmsg.Response, err error) { errs <- err }))
	}
	for range 4 {
		<-reqs
	}
	c.Close()
	for range 4 {
		require.ErrorIs(t, <-errs, net.ErrClosed)
	}
	select {
	case err := <-errs:
		t.Fatalf("a callback ran twice: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// A Produce with acks=0 has no response; its callback runs when written,
// and the request after it is still matched to its own response.
func TestAcksZeroProduceIsNotWaitedFor(t *testing.T) {
	addr := startBroker(t)
	c, err := wire.Dial(ctx(t), addr, wire.Options{})
	require.NoError(t, err)
	defer c.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 1, 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 5000
	_, err = c.Request(ctx(t), create)
	require.NoError(t, err)

	p := kmsg.NewPtrProduceRequest()
	p.Acks = 0
	done := make(chan kmsg.Response, 1)
	require.NoError(t, c.Send(ctx(t), p, func(r kmsg.Response, err error) { require.NoError(t, err); done <- r }))
	require.Nil(t, <-done)
	r, err := c.Request(ctx(t), kmsg.NewPtrMetadataRequest())
	require.NoError(t, err)
	require.IsType(t, &kmsg.MetadataResponse{}, r)
}

// A pool dials each broker once for concurrent callers and again after the
// connection died; Refresh learns the brokers and leaders.
func TestPoolSharesAndRedialsConnections(t *testing.T) {
	addr := startBroker(t)
	p := wire.NewPool([]string{addr}, wire.Options{})
	defer p.Close()
	var wg sync.WaitGroup
	conns := make([]*wire.Conn, 8)
	for i := range conns {
		wg.Go(func() {
			c, err := p.Conn(ctx(t), addr)
			require.NoError(t, err)
			conns[i] = c
		})
	}
	wg.Wait()
	for _, c := range conns {
		require.Same(t, conns[0], c)
	}
	conns[0].Close()
	again, err := p.Conn(ctx(t), addr)
	require.NoError(t, err)
	require.NotSame(t, conns[0], again)

	m, err := p.Refresh(ctx(t), nil)
	require.NoError(t, err)
	require.Len(t, m.Brokers, 1)
	for id := range m.Brokers {
		c, err := p.Broker(ctx(t), id)
		require.NoError(t, err)
		require.Same(t, again, c)
	}
}
