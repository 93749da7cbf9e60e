package controller_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// stopReply is how an answeringBroker replies to a StopReplica with
// delete.
type stopReply int

const (
	stopDeletes               stopReply = iota // every partition deleted
	stopRefusesRequest                         // an error for the whole request
	stopRefusesFirstPartition                  // KAFKA_STORAGE_ERROR for its first partition, the rest deleted
	stopHolds                                  // no answer: the request waits
	stopDropsConnection                        // the connection closes without an answer
)

// answeringBroker plays a broker for the controller: registered in
// ZooKeeper at 127.0.0.1:<its port>, it answers LeaderAndIsr and
// UpdateMetadata with success and StopReplica as replies says, and
// records every StopReplica and the partitions of every LeaderAndIsr. It can die (its session and its connections
// close) and start again, at a new port and broker epoch.
type answeringBroker struct {
	t   *testing.T
	id  int32
	ens *zktest.Ensemble

	mu      sync.Mutex
	zk      *kafkazk.Client                  // its registration's session. Protected by mu.
	ln      net.Listener                     // Protected by mu.
	conns   map[net.Conn]bool                // open connections. Protected by mu.
	stops   []kmsg.StopReplicaRequest        // every StopReplica received, in order. Protected by mu.
	led     map[commitlog.TopicPartition]int // how many LeaderAndIsr requests named each partition. Protected by mu.
	deletes int                              // StopReplica requests with delete received. Protected by mu.
	// replies says how to answer the n-th StopReplica with delete (from 1);
	// nil: stopDeletes. Protected by mu.
	replies func(n int) stopReply
}

// startAnsweringBroker registers broker id and serves it; it dies at the
// end of the test.
func startAnsweringBroker(t *testing.T, ens *zktest.Ensemble, id int32) *answeringBroker {
	t.Helper()
	b := &answeringBroker{t: t, id: id, ens: ens, led: map[commitlog.TopicPartition]int{}}
	b.start()
	t.Cleanup(b.kill)
	return b
}

// start listens on a new port and registers there, as a broker that
// starts does.
func (b *answeringBroker) start() {
	b.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b.t, err)
	zk, err := kafkazk.Connect(b.ens.Addr(0), kafkazk.Options{SessionTimeout: zktest.SessionTimeout, Logger: testLogger()})
	require.NoError(b.t, err)
	require.NoError(b.t, zk.CreateTopLevelPaths())
	b.mu.Lock()
	b.zk, b.ln, b.conns = zk, ln, map[net.Conn]bool{}
	b.mu.Unlock()
	go b.accept(ln)
	_, err = zk.RegisterBroker(kafkazk.BrokerInfo{ID: b.id, JmxPort: -1, Timestamp: time.Now(), Endpoints: []kafkazk.Endpoint{
		{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}}})
	require.NoError(b.t, err)
}

// kill is the broker's death: its session ends (the controller hears it
// from ZooKeeper) and every connection closes unanswered. Killing twice
// is harmless.
func (b *answeringBroker) kill() {
	b.mu.Lock()
	zk, ln, conns := b.zk, b.ln, b.conns
	b.zk, b.ln, b.conns = nil, nil, nil
	b.mu.Unlock()
	if zk == nil {
		return
	}
	zk.Close()
	ln.Close()
	for conn := range conns {
		conn.Close()
	}
}

// setReplies sets how StopReplica requests with delete are answered.
func (b *answeringBroker) setReplies(f func(n int) stopReply) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replies = f
}

// stopReplicas returns the StopReplica requests received so far.
func (b *answeringBroker) stopReplicas() []kmsg.StopReplicaRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.stops)
}

// leaderAndIsrs returns how many LeaderAndIsr requests named tp.
func (b *answeringBroker) leaderAndIsrs(tp commitlog.TopicPartition) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.led[tp]
}

// stopped returns how many StopReplica requests (with delete as del)
// named tp.
func (b *answeringBroker) stopped(tp commitlog.TopicPartition, del bool) int {
	n := 0
	for _, req := range b.stopReplicas() {
		if req.DeletePartitions == del && slices.Contains(stopReplicaPartitions(&req), tp) {
			n++
		}
	}
	return n
}

func stopReplicaPartitions(req *kmsg.StopReplicaRequest) []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, commitlog.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	return out
}

func (b *answeringBroker) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.conns == nil || b.ln != ln {
			b.mu.Unlock()
			conn.Close()
			return
		}
		b.conns[conn] = true
		b.mu.Unlock()
		go b.serve(conn)
	}
}

// controllerAPIs are the requests a controller sends, and ApiVersions,
// with the highest versions this workbook's brokers serve (stage 03's
// handlers: StopReplica v2 names partitions per topic, v3 would move
// them).
var controllerAPIs = map[int16]int16{4: 7, 5: 2, 6: 8, protocol.ApiVersionsKey: 3}

func apiVersions(key int16) (int16, int16, bool) {
	max, ok := controllerAPIs[key]
	return 0, max, ok
}

// serve answers one connection's requests, one at a time.
func (b *answeringBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		h, req, err := protocol.ParseRequest(frame, apiVersions)
		if err != nil {
			b.t.Errorf("broker %d: %v", b.id, err)
			return
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		switch req := req.(type) {
		case *kmsg.ApiVersionsRequest:
			out := resp.(*kmsg.ApiVersionsResponse)
			for _, key := range slices.Sorted(maps.Keys(controllerAPIs)) {
				out.ApiKeys = append(out.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MaxVersion: controllerAPIs[key]})
			}
		case *kmsg.LeaderAndISRRequest:
			b.mu.Lock()
			for _, ts := range req.TopicStates {
				for _, ps := range ts.PartitionStates {
					b.led[commitlog.TopicPartition{Topic: ts.Topic, Partition: ps.Partition}]++
				}
			}
			b.mu.Unlock()
		case *kmsg.StopReplicaRequest:
			switch b.stopReplica(req) {
			case stopHolds:
				continue
			case stopDropsConnection:
				return
			case stopRefusesRequest:
				resp.(*kmsg.StopReplicaResponse).ErrorCode = kerr.UnknownServerError.Code
			case stopRefusesFirstPartition:
				answerStopReplica(req, resp.(*kmsg.StopReplicaResponse), kerr.KafkaStorageError.Code)
			default:
				answerStopReplica(req, resp.(*kmsg.StopReplicaResponse), 0)
			}
		}
		if _, err := conn.Write(protocol.AppendResponse(nil, h, resp)); err != nil {
			return
		}
	}
}

// stopReplica records req and says how to answer it.
func (b *answeringBroker) stopReplica(req *kmsg.StopReplicaRequest) stopReply {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stops = append(b.stops, *req)
	if !req.DeletePartitions {
		return stopDeletes // a plain stop is always answered
	}
	b.deletes++
	if b.replies == nil {
		return stopDeletes
	}
	return b.replies(b.deletes)
}

// answerStopReplica answers every partition of req, the first with
// firstCode and the rest without error.
func answerStopReplica(req *kmsg.StopReplicaRequest, resp *kmsg.StopReplicaResponse, firstCode int16) {
	for i, tp := range stopReplicaPartitions(req) {
		p := kmsg.NewStopReplicaResponsePartition()
		p.Topic, p.Partition = tp.Topic, tp.Partition
		if i == 0 {
			p.ErrorCode = firstCode
		}
		resp.Partitions = append(resp.Partitions, p)
	}
}
