package producer_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	s4 "github.com/kafkaworkbook/workbook/stage04-isr-acks/cluster"
	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// senderModes are the two ways the producer drives its connections: one
// sender goroutine per broker (the default), and Kafka's single Sender
// loop (Options.SingleSender). The tests below hold for both.
var senderModes = []struct {
	name   string
	single bool
}{{"per-broker", false}, {"single-loop", true}}

// newProducerWith is newProducer with Options.SingleSender set as asked.
func newProducerWith(t testing.TB, single bool, addrs []string, props ...string) *producer.Producer {
	t.Helper()
	kv := map[string]string{"bootstrap.servers": joinAddrs(addrs), "retry.backoff.ms": "20"}
	for i := 0; i+1 < len(props); i += 2 {
		kv[props[i]] = props[i+1]
	}
	cfg, err := producer.ParseConfig(kv)
	require.NoError(t, err)
	p, err := producer.New(cfg, producer.Options{Logger: testLogger(), SingleSender: single})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// startCluster starts n stage 04 brokers with a topic of the given
// partitions and replication factor: partition i is led by broker i mod n.
func startCluster(t testing.TB, n int, topic string, partitions, rf int, props map[string]string) *s4.Cluster {
	t.Helper()
	c, err := s4.Start(n, s4.Options{Dir: t.TempDir(), Logger: testLogger(), Props: props})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Controller.CreateTopic(topic, partitions, rf))
	return c
}

// keysByPartition returns, for each of n partitions, a key that murmur2
// puts there.
func keysByPartition(n int) [][]byte {
	keys := make([][]byte, n)
	for i, found := 0, 0; found < n; i++ {
		k := []byte("key-" + strconv.Itoa(i))
		if p := producer.KeyPartition(k, n); keys[p] == nil {
			keys[p] = k
			found++
		}
	}
	return keys
}

// TestEverySenderAcknowledgesEachRecordOnceInOrderWithFiveInFlight: three
// brokers, six partitions (two led by each), many small batches and five
// requests in flight per connection: in both sender modes each callback
// runs once with the offset the record is read back at, and each
// partition holds its records in the order produced.
func TestEverySenderAcknowledgesEachRecordOnceInOrderWithFiveInFlight(t *testing.T) {
	const topic, partitions = "spread", 6
	c := startCluster(t, 3, topic, partitions, 1, nil)
	for _, mode := range senderModes {
		t.Run(mode.name, func(t *testing.T) {
			p := newProducerWith(t, mode.single, c.Addrs(), "acks", "1", "batch.size", "1024",
				"max.in.flight.requests.per.connection", "5")
			a := newAcks()
			const n = 20000
			prefix := mode.name + "-"
			for i := range n {
				require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: topic, Value: []byte(prefix + strconv.Itoa(i))}, a.callback))
			}
			require.NoError(t, p.Flush(ctx(t)))
			got, failed, twice := a.snapshot()
			require.Empty(t, failed)
			require.Empty(t, twice, "each callback runs once")
			require.Len(t, got, n)

			last := map[int32]int{}
			read := 0
			for _, r := range readAll(t, c.Addrs(), topic) {
				if len(r.value) <= len(prefix) || r.value[:len(prefix)] != prefix {
					continue // the other mode's records
				}
				read++
				require.Equal(t, got[r.value], ack{r.partition, r.offset}, "record %s is where its callback said", r.value)
				v, err := strconv.Atoi(r.value[len(prefix):])
				require.NoError(t, err)
				if prev, ok := last[r.partition]; ok {
					require.Greater(t, v, prev, "partition %d: %d after %d", r.partition, v, prev)
				}
				last[r.partition] = v
			}
			require.Equal(t, n, read, "every record read back once")
			require.Len(t, last, partitions, "the sticky partitioner went round every partition")
		})
	}
}

// TestABrokerWhoseAnswersAreHeldDoesNotStallTheOthers: one broker of
// three keeps its answers (a proxy holds them) while records go on to
// every partition; the records of the partitions the two others lead are
// acknowledged meanwhile, in both sender modes (the single loop skips a
// full connection where a per-broker sender blocks on its own), and the
// held ones once the answers flow again.
func TestABrokerWhoseAnswersAreHeldDoesNotStallTheOthers(t *testing.T) {
	const topic, partitions = "held-one", 6
	c := startCluster(t, 3, topic, partitions, 1, nil)
	proxies := proxyCluster(t, c)
	keys := keysByPartition(partitions)
	for _, mode := range senderModes {
		t.Run(mode.name, func(t *testing.T) {
			p := newProducerWith(t, mode.single, proxies.addrs(), "acks", "1", "batch.size", "1024",
				"request.timeout.ms", "60000")
			a := newAcks()
			produce := func(part, i int) {
				v := fmt.Sprintf("%s-%d-%d", mode.name, part, i)
				require.NoError(t, p.Produce(ctx(t), &producer.Record{Topic: topic, Key: keys[part], Value: []byte(v)}, a.callback))
			}
			for part := range partitions { // metadata and connections
				produce(part, -1)
			}
			a.waitFor(t, partitions, 30*time.Second)

			leader := leaderOf(t, c, commitlog.TopicPartition{Topic: topic, Partition: 0})
			heldParts := map[int32]bool{}
			for part := range int32(partitions) {
				heldParts[part] = leaderOf(t, c, commitlog.TopicPartition{Topic: topic, Partition: part}) == leader
			}
			held := proxies.byBroker[leader]
			held.Hold()
			const each = 500 // 100 batches of 1 KiB per partition: the held connection fills up
			for i := range each {
				for part := range partitions {
					produce(part, i)
				}
			}
			others := 0
			for _, h := range heldParts {
				if !h {
					others += each
				}
			}
			a.waitFor(t, partitions+others, 30*time.Second)
			got, failed, _ := a.snapshot()
			require.Empty(t, failed)
			for v, where := range got {
				var part, i int
				_, err := fmt.Sscanf(v[len(mode.name)+1:], "%d-%d", &part, &i)
				require.NoError(t, err)
				require.False(t, heldParts[where.partition] && i >= 0, "record %s of a held partition was acknowledged", v)
			}
			t.Logf("%s: %d records of the free partitions acknowledged while broker %d's answers were held", mode.name, others, leader)
			held.Release()
			require.NoError(t, p.Flush(ctx(t)))
			got, failed, twice := a.snapshot()
			require.Empty(t, failed)
			require.Empty(t, twice)
			require.Len(t, got, partitions*(each+1))
		})
	}
}

// TestEverySenderIsIdempotentAcrossALeaderRestart: three brokers, a topic
// of three partitions on all three (min.insync.replicas=2), an idempotent
// producer (acks=all, five in flight) writing keyed records while the
// leader of partition 0 stops and starts again: in both sender modes every
// record is acknowledged once and read back once, in the order produced
// on its partition. (The longer story, every broker restarting in turn,
// is TestIdempotentProducerAcknowledgesEveryRecordOnceAcrossBrokerRestarts,
// per-broker senders only.)
func TestEverySenderIsIdempotentAcrossALeaderRestart(t *testing.T) {
	const partitions = 3
	c := startCluster(t, 3, "restarts", partitions, 3, map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "1500"})
	waitISRs := func() {
		t.Helper()
		require.Eventually(t, func() bool {
			for part := range int32(partitions) {
				if isr, _, err := c.ISR(commitlog.TopicPartition{Topic: "restarts", Partition: part}); err != nil || len(isr) != 3 {
					return false
				}
			}
			return true
		}, 30*time.Second, 10*time.Millisecond, "every ISR whole")
	}
	for _, mode := range senderModes {
		t.Run(mode.name, func(t *testing.T) {
			waitISRs()
			p := newProducerWith(t, mode.single, c.Addrs(), "request.timeout.ms", "3000", "delivery.timeout.ms", "60000",
				"linger.ms", "2", "batch.size", "4096")
			a := newAcks()
			prefix := mode.name + "-"
			var sent atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					r := &producer.Record{Topic: "restarts", Key: []byte(fmt.Sprintf("key-%d", i%30)), Value: []byte(prefix + strconv.Itoa(i))}
					if err := p.Produce(ctx(t), r, a.callback); err != nil {
						t.Errorf("Produce: %v", err)
						return
					}
					sent.Add(1)
				}
			})
			progress := func(n int, what string) {
				t.Helper()
				from := a.count()
				require.Eventually(t, func() bool { return a.count() >= from+n }, 30*time.Second, 5*time.Millisecond,
					"the producer goes on %s (%d callbacks)", what, a.count())
			}
			progress(2000, "at the start")
			victim := leaderOf(t, c, commitlog.TopicPartition{Topic: "restarts", Partition: 0})
			require.NoError(t, c.StopBroker(victim))
			require.NoError(t, c.Controller.BrokerStopped(victim))
			progress(1000, fmt.Sprintf("with broker %d stopped", victim))
			require.NoError(t, c.StartBroker(victim))
			require.NoError(t, c.Controller.BrokerStarted(victim))
			waitISRs()
			progress(1000, fmt.Sprintf("after broker %d came back", victim))
			close(stop)
			wg.Wait()
			require.NoError(t, p.Flush(ctx(t)))

			requireOnceInOrder(t, a, int(sent.Load()), readAll(t, c.Addrs(), "restarts"), prefix)
		})
	}
}

// A brokerProxy stands between the clients and one broker of a cluster:
// it rewrites the brokers' addresses in Metadata answers to their
// proxies', so that a client that bootstraps from the proxies reaches
// every broker through one, and it can hold the broker's answers or
// delay each of them. Not for Produce with acks=0 (no answer to pair).
type brokerProxy struct {
	ln     net.Listener
	target string
	routes map[string]string // broker address → its proxy's; set before the first connection
	// produces counts the Produce requests relayed, for the benchmark's
	// records/request.
	produces atomic.Int64
	// misroute is how many of the next Produce requests go to a topic
	// the broker does not have: it appends nothing and answers
	// UNKNOWN_TOPIC_OR_PARTITION, under the request's own topic names
	// (a leader not ready yet, as on a fresh cluster).
	misroute atomic.Int32

	mu    sync.Mutex
	open  chan struct{} // closed while answers flow
	delay time.Duration // added to each answer, from when it came from the broker
}

// proxies are a cluster's brokers behind brokerProxies.
type proxies struct {
	byBroker map[int32]*brokerProxy
}

// produces is the number of Produce requests relayed so far.
func (ps proxies) produces() int64 {
	n := int64(0)
	for _, x := range ps.byBroker {
		n += x.produces.Load()
	}
	return n
}

func (ps proxies) addrs() []string {
	var out []string
	for _, x := range ps.byBroker {
		out = append(out, x.ln.Addr().String())
	}
	return out
}

// proxyCluster puts a brokerProxy in front of each running broker of c.
func proxyCluster(t testing.TB, c *s4.Cluster) proxies {
	t.Helper()
	ps := proxies{byBroker: map[int32]*brokerProxy{}}
	routes := map[string]string{}
	for _, id := range c.Running() {
		b, _ := c.Broker(id)
		x := listenProxy(t, routes)
		x.target = b.Addr().String()
		routes[x.target] = x.ln.Addr().String()
		ps.byBroker[id] = x
	}
	for _, x := range ps.byBroker {
		go x.accept()
	}
	return ps
}

// listenProxy returns a proxy listening on 127.0.0.1, its answers
// flowing; the caller sets its target and starts accept.
func listenProxy(t testing.TB, routes map[string]string) *brokerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	x := &brokerProxy{ln: ln, routes: routes, open: make(chan struct{})}
	close(x.open)
	return x
}

// Hold keeps the broker's next answers from the clients.
func (x *brokerProxy) Hold() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open = make(chan struct{})
}

// Release lets the held answers through.
func (x *brokerProxy) Release() {
	x.mu.Lock()
	defer x.mu.Unlock()
	close(x.open)
}

// SetDelay makes each answer wait d after it came from the broker.
func (x *brokerProxy) SetDelay(d time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.delay = d
}

func (x *brokerProxy) accept() {
	for {
		c, err := x.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", x.target)
		if err != nil {
			c.Close()
			continue
		}
		go x.serve(c, b)
	}
}

// asked is a request relayed and not yet answered.
type asked struct {
	key, version int16
	misrouted    bool // a Produce sent to missingSuffix topics
}

type answer struct {
	at    time.Time
	frame []byte
}

// serve relays one connection: requests as they are, answers (Metadata's
// rewritten) in order, each after the gate and the delay.
func (x *brokerProxy) serve(c, b net.Conn) {
	defer c.Close()
	defer b.Close()
	pending := make(chan asked, 1024) // each request not yet answered
	answers := make(chan answer, 1024)
	go func() { // client → broker
		defer b.Close()
		for {
			frame, err := readSized(c)
			if err != nil || len(frame) < 8 {
				return
			}
			a := asked{key: int16(binary.BigEndian.Uint16(frame)), version: int16(binary.BigEndian.Uint16(frame[2:]))}
			if a.key == 0 {
				x.produces.Add(1)
				if x.misroute.Add(-1) >= 0 {
					var err error
					if frame, err = misrouteProduce(frame, a.version); err != nil {
						return
					}
					a.misrouted = true
				} else {
					x.misroute.Store(0)
				}
			}
			pending <- a
			if _, err := b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame)))); err != nil {
				return
			}
			if _, err := b.Write(frame); err != nil {
				return
			}
		}
	}()
	go func() { // broker → answers
		defer close(answers)
		for {
			frame, err := readSized(b)
			if err != nil {
				return
			}
			switch k := <-pending; {
			case k.key == 3:
				if frame, err = x.rewriteMetadata(frame, k.version); err != nil {
					return
				}
			case k.misrouted:
				if frame, err = unmisrouteProduce(frame, k.version); err != nil {
					return
				}
			}
			answers <- answer{time.Now(), frame}
		}
	}()
	for a := range answers { // answers → client
		x.mu.Lock()
		open, delay := x.open, x.delay
		x.mu.Unlock()
		<-open
		if d := time.Until(a.at.Add(delay)); d > 0 {
			time.Sleep(d)
		}
		out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(a.frame)), uint32(len(a.frame)))
		if _, err := c.Write(append(out, a.frame...)); err != nil {
			return
		}
	}
}

// rewriteMetadata puts the proxies' addresses in place of the brokers' in
// a Metadata answer (correlation id, header tags if flexible, body).
func (x *brokerProxy) rewriteMetadata(frame []byte, version int16) ([]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	head := 4
	if req.IsFlexible() {
		if len(frame) < 5 || frame[4] != 0 {
			return nil, fmt.Errorf("metadata answer with header tags")
		}
		head = 5
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	if err := resp.ReadFrom(frame[head:]); err != nil {
		return nil, err
	}
	for i := range resp.Brokers {
		br := &resp.Brokers[i]
		if to, ok := x.routes[net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))]; ok {
			host, port, _ := net.SplitHostPort(to)
			p, _ := strconv.Atoi(port)
			br.Host, br.Port = host, int32(p)
		}
	}
	return resp.AppendTo(frame[:head:head]), nil
}

func readSized(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, frame)
	return frame, err
}

// leaderOf is the broker that leads tp, as the controller decided.
func leaderOf(t testing.TB, c *s4.Cluster, tp commitlog.TopicPartition) int32 {
	t.Helper()
	s, ok := c.Controller.State(tp)
	require.True(t, ok)
	return s.Leader
}
