package replica

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// fakeLeader is a leader broker reduced to what a fetcher asks of it, on a
// real socket: ApiVersions, OffsetForLeaderEpoch (it knows no epoch, so a
// follower with epochs falls back to its high watermark) and Fetch, which
// the test answers (fetch runs on the connection's goroutine and may hold
// the request, as a long poll does; ctx ends with the test).
type fakeLeader struct {
	addr  string
	fetch func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	ctx   context.Context
}

// fakeVersions are the APIs and versions a fakeLeader serves.
var fakeVersions = map[int16][2]int16{
	int16(kmsg.ApiVersions): {0, 3}, int16(kmsg.Fetch): {4, followerFetchVersion},
	int16(kmsg.OffsetForLeaderEpoch): {0, 4},
}

func newFakeLeader(t *testing.T, fetch func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse) *fakeLeader {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l := &fakeLeader{addr: ln.Addr().String(), fetch: fetch, ctx: ctx}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { l.serve(conn) })
		}
	})
	t.Cleanup(func() {
		cancel()
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l
}

func (l *fakeLeader) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	versions := func(key int16) (int16, int16, bool) {
		v, ok := fakeVersions[key]
		return v[0], v[1], ok
	}
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		h, req, err := protocol.ParseRequest(frame, versions)
		if err != nil {
			return
		}
		var resp kmsg.Response
		switch req := req.(type) {
		case *kmsg.ApiVersionsRequest:
			out := kmsg.NewPtrApiVersionsResponse()
			for key, v := range fakeVersions {
				out.ApiKeys = append(out.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: v[0], MaxVersion: v[1]})
			}
			resp = out
		case *kmsg.OffsetForLeaderEpochRequest:
			out := kmsg.NewPtrOffsetForLeaderEpochResponse()
			for _, rt := range req.Topics {
				ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
				ot.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					op.Partition, op.LeaderEpoch, op.EndOffset = rp.Partition, UndefinedEpoch, UndefinedOffset
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			resp = out
		case *kmsg.FetchRequest:
			resp = l.fetch(l.ctx, req)
		}
		resp.SetVersion(req.GetVersion())
		if _, err := conn.Write(protocol.AppendResponse(nil, h, resp)); err != nil {
			return
		}
	}
}

// fetchAnswer answers every partition of req alike.
func fetchAnswer(req *kmsg.FetchRequest, code int16, records []byte, hw, logStart int64) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	for _, rt := range req.Topics {
		ot := kmsg.NewFetchResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewFetchResponseTopicPartition()
			op.Partition, op.ErrorCode, op.RecordBatches = rp.Partition, code, records
			op.HighWatermark, op.LastStableOffset, op.LogStartOffset = hw, hw, logStart
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}

// fetchOffset is the offset req fetches its first partition from.
func fetchOffset(req *kmsg.FetchRequest) int64 {
	if len(req.Topics) == 0 || len(req.Topics[0].Partitions) == 0 {
		return -1
	}
	return req.Topics[0].Partitions[0].FetchOffset
}

// longPoll holds a fetch as a leader with nothing new does: until its
// MaxWaitMillis or the test's end.
func longPoll(ctx context.Context, req *kmsg.FetchRequest) {
	t := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// newLockTestManager is broker 0's replica manager over a store in a
// temporary directory, with short fetch waits. It is closed at the end of
// the test unless the test failed: a test that found a deadlock leaves
// goroutines that would block the close.
func newLockTestManager(t *testing.T, l Listener) *Manager {
	st, err := store.Open(t.TempDir(), 0, commitlog.DefaultManagerConfig(), store.Options{Logger: quiet})
	require.NoError(t, err)
	m, err := NewManager(Config{BrokerID: 0, FetchWaitMax: 50 * time.Millisecond, FetchBackoff: 10 * time.Millisecond,
		FetchMaxBytes: 1 << 20, FetchResponseMaxBytes: 10 << 20, FetchMinBytes: 1, HighWatermarkCheckpointInterval: time.Hour},
		st, Options{Logger: quiet, Listener: l})
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			require.NoError(t, m.Close())
			require.NoError(t, st.Close())
		}
	})
	return m
}

// within waits for done up to d; if it does not come, the test fails with
// what and every goroutine's stack (a deadlock shows as two goroutines
// each waiting for the other's lock).
func within(t *testing.T, d time.Duration, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v; goroutines:\n%s", what, d, goroutines())
	}
}

// eventually polls cond every millisecond up to d, and fails the test
// with what and every goroutine's stack if it never holds.
func eventually(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; goroutines:\n%s", what, d, goroutines())
		}
		time.Sleep(time.Millisecond)
	}
}

func goroutines() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

// goroutineIn reports whether a goroutine is running the function named
// (as a stack trace names it).
func goroutineIn(fn string) bool {
	return bytes.Contains(goroutines(), []byte(fn))
}
