package producer_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// missingSuffix names the topic a misrouted Produce goes to.
const missingSuffix = ".missing"

// requestBody splits a request frame (no size prefix) into its header and
// body: api key, version, correlation id, client id, and the header's
// tags when the request is flexible.
func requestBody(frame []byte, flexible bool) (head, body []byte, err error) {
	if len(frame) < 10 {
		return nil, nil, fmt.Errorf("request of %d bytes", len(frame))
	}
	n := 10
	if l := int16(binary.BigEndian.Uint16(frame[8:])); l > 0 {
		n += int(l)
	}
	if flexible {
		if len(frame) <= n || frame[n] != 0 {
			return nil, nil, fmt.Errorf("request header with tags")
		}
		n++
	}
	if n > len(frame) {
		return nil, nil, fmt.Errorf("request header of %d bytes in %d", n, len(frame))
	}
	return frame[:n], frame[n:], nil
}

// misrouteProduce renames every topic of a Produce request.
func misrouteProduce(frame []byte, version int16) ([]byte, error) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	head, body, err := requestBody(frame, req.IsFlexible())
	if err != nil {
		return nil, err
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	for i := range req.Topics {
		req.Topics[i].Topic += missingSuffix
	}
	return req.AppendTo(append([]byte(nil), head...)), nil
}

// unmisrouteProduce gives a misrouted Produce's answer its topics' names.
func unmisrouteProduce(frame []byte, version int16) ([]byte, error) {
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(version)
	head := 4
	if resp.IsFlexible() {
		head = 5
	}
	if len(frame) < head {
		return nil, fmt.Errorf("produce answer of %d bytes", len(frame))
	}
	if err := resp.ReadFrom(frame[head:]); err != nil {
		return nil, err
	}
	for i := range resp.Topics {
		resp.Topics[i].Topic = strings.TrimSuffix(resp.Topics[i].Topic, missingSuffix)
	}
	return resp.AppendTo(frame[:head:head]), nil
}

// An idempotent producer pipelines five requests to a leader that is not
// ready for the first three (it refuses them, appending nothing) and
// appends the last two: a broker that knows nothing of the producer takes
// a batch at any sequence (KIP-360). The three come back for a retry, and
// the leader now expects the sequence after the fifth: it refuses them as
// out of order. They can never be appended under this producer id, so
// the producer takes a new one and sends them again; they must not be
// retried until delivery.timeout.ms (found in a clusterbench run on a
// fresh cluster: 444 records expired after 120 s).
func TestBatchesRefusedBehindAnAcknowledgedOneAreSentUnderANewProducerID(t *testing.T) {
	c := startCluster(t, 1, "oos", 1, 1, nil)
	require.NoError(t, c.Controller.CreateTopic("warm", 1, 1))
	ps := proxyCluster(t, c)
	x := ps.byBroker[0]
	p := newProducerWith(t, false, ps.addrs(), "linger.ms", "0", "batch.size", "1024", "delivery.timeout.ms", "20000",
		"request.timeout.ms", "5000")
	a := newAcks()
	// A first record makes the producer fetch metadata and its producer
	// id; to another topic, so that "oos" knows nothing of the producer.
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "warm", Value: []byte("warm-up")}, a.callback))
	a.waitFor(t, 1, 10*time.Second)
	require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "oos", Value: []byte("metadata")}, func(*producer.Record, error) {}))

	x.Hold()
	x.misroute.Store(3)
	const n = 60
	for i := range n {
		require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: "oos", Value: fmt.Appendf(nil, "r-%03d-%s", i, strings.Repeat("x", 90))}, a.callback))
	}
	require.Eventually(t, func() bool { return x.produces.Load() >= 6 }, 10*time.Second, time.Millisecond,
		"five requests in flight (and the warm-up's)")
	t.Logf("produces before release %d, misroute %d", x.produces.Load(), x.misroute.Load())
	x.Release()
	a.waitFor(t, n+1, 15*time.Second) // well before delivery.timeout.ms
	got, errs, _ := a.snapshot()
	require.Empty(t, errs)
	require.Len(t, got, n+1)
	t.Logf("produce requests relayed: %d", x.produces.Load())
	require.Zero(t, x.misroute.Load(), "three requests were refused")

	seen := map[string]int{}
	for _, r := range readAll(t, c.Addrs(), "oos") {
		seen[r.value]++
	}
	require.Len(t, seen, n+1, "and the metadata record")
	for v, count := range seen {
		require.Equal(t, 1, count, "%s written once", v)
	}
}
