package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// Ack is where an acknowledged record landed.
type Ack struct {
	Partition int32
	Offset    int64
}

// value is a record's value: its producer and that producer's sequence
// number, unique in the run, sortable by eye ("p1-000004217").
func value(producer, seq int) string { return fmt.Sprintf("p%d-%09d", producer, seq) }

// parseValue is value's inverse; ok is false for a record the workload did
// not write.
func parseValue(v []byte) (producer, seq int, ok bool) {
	p, s, found := strings.Cut(string(v), "-")
	if !found || len(p) < 2 || p[0] != 'p' {
		return 0, 0, false
	}
	producer, err1 := strconv.Atoi(p[1:])
	seq, err2 := strconv.Atoi(s)
	return producer, seq, err1 == nil && err2 == nil
}

// Workload writes unique records with idempotent acks=all producers and
// reads them with a consumer group, keeping a ledger of what the cluster
// acknowledged and what the group saw.
type Workload struct {
	c          *cluster.Cluster
	topic      string
	partitions int
	producers  int
	rate       int // records per second per producer
	start      time.Time
	logf       func(string, ...any)

	// Counters, updated by the producers' callbacks.
	sent    atomic.Int64 // records handed to a producer
	acked   atomic.Int64 // acknowledged
	failed  atomic.Int64 // failed for good (never counted as acked)
	pending atomic.Int64 // handed over, not yet answered
	resets  atomic.Int64 // producer id resets the clients logged

	mu sync.Mutex
	// ledger holds every acknowledged record, by value. Protected by mu.
	ledger map[string]Ack
	// ackTimes are the times (since start) of each partition's
	// acknowledgements, in the order they came. Protected by mu.
	ackTimes [][]time.Duration
	// failures counts failed records by error text. Protected by mu.
	failures map[string]int

	gmu sync.Mutex
	// seen is every workload value the group's consumers delivered, with
	// how many times. Protected by gmu.
	seen map[string]int

	cancel  context.CancelFunc
	prodWG  sync.WaitGroup // the producer loops
	consWG  sync.WaitGroup // the group's consumers
	stopP   chan struct{}  // closed to stop producing
	clients []*kgo.Client
}

// WorkloadConfig says how much the workload writes.
type WorkloadConfig struct {
	Topic      string
	Partitions int
	Producers  int // concurrent producers (default 3)
	Rate       int // records per second per producer (default 300)
	Consumers  int // consumers in the group (default 2)
	Logf       func(string, ...any)
}

// producerOpts are the producers' settings: idempotent (franz-go's
// default) with acks=all, retrying for ever (a record fails only when the
// client closes; Cluster.Client adds the retry of a connection that ends at
// once, which is how a starting broker looks through Docker's proxy), and
// timeouts short enough that a request to a frozen or
// unreachable broker is abandoned within seconds rather than half a minute.
func producerOpts(topic string) []kgo.Opt {
	return append(faultTimeouts(),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(20000),
	)
}

// faultTimeouts are the timeouts of every writer of the suite: short
// enough that a request to a broker paused or cut off fails over to
// another within seconds, not the client defaults' minutes.
func faultTimeouts() []kgo.Opt {
	return []kgo.Opt{
		kgo.ProduceRequestTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.DialTimeout(3 * time.Second),
	}
}

// StartWorkload creates nothing: the topic must exist. It starts the
// producers and the group's consumers.
func StartWorkload(ctx context.Context, c *cluster.Cluster, cfg WorkloadConfig) (*Workload, error) {
	if cfg.Producers == 0 {
		cfg.Producers = 3
	}
	if cfg.Rate == 0 {
		cfg.Rate = 300
	}
	if cfg.Consumers == 0 {
		cfg.Consumers = 2
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	w := &Workload{c: c, topic: cfg.Topic, partitions: cfg.Partitions, producers: cfg.Producers, rate: cfg.Rate,
		start: time.Now(), logf: cfg.Logf, ledger: map[string]Ack{}, ackTimes: make([][]time.Duration, cfg.Partitions),
		failures: map[string]int{}, seen: map[string]int{}, stopP: make(chan struct{})}
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range cfg.Consumers {
		cl, err := c.Client(
			kgo.ConsumerGroup(cfg.Topic+"-group"), kgo.ConsumeTopics(cfg.Topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(time.Second),
			kgo.AutoCommitInterval(time.Second),
			kgo.RequestTimeoutOverhead(3*time.Second), kgo.DialTimeout(3*time.Second),
			kgo.MetadataMinAge(250*time.Millisecond), kgo.MetadataMaxAge(5*time.Second),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID(fmt.Sprintf("faults-consumer-%d", i)))
		if err != nil {
			w.Close()
			return nil, err
		}
		w.clients = append(w.clients, cl)
		w.consWG.Add(1)
		go w.consume(ctx, cl)
	}
	for i := range cfg.Producers {
		cl, err := c.Client(append(producerOpts(cfg.Topic), kgo.ClientID(fmt.Sprintf("faults-producer-%d", i)),
			kgo.WithLogger(&producerLog{w: w, id: i}))...)
		if err != nil {
			w.Close()
			return nil, err
		}
		w.clients = append(w.clients, cl)
		w.prodWG.Add(1)
		go w.produce(ctx, cl, i)
	}
	return w, nil
}

// producerLog passes on what a producer client says about its producer id
// and sequence numbers: a reset (a new epoch, sequences from 0) is the one
// moment an idempotent producer may write a record twice, and the broker's
// error that caused it says why.
type producerLog struct {
	w  *Workload
	id int
}

func (l *producerLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *producerLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	// Only what concerns the producer id: connection errors during a
	// fault are expected, and retried.
	if !strings.Contains(msg, "producer ID") && !strings.Contains(msg, "sequence") {
		return
	}
	if strings.Contains(msg, "resetting") {
		l.w.resets.Add(1)
	}
	l.w.logf("producer %d (franz-go): %s %v", l.id, msg, keyvals)
}

// produce writes producer id's records at its rate, cycling through the
// partitions, until StopProducing; then it waits for every answer.
func (w *Workload) produce(ctx context.Context, cl *kgo.Client, id int) {
	defer w.prodWG.Done()
	const tick = 20 * time.Millisecond
	perTick := max(1, w.rate*int(tick)/int(time.Second))
	t := time.NewTicker(tick)
	defer t.Stop()
	seq := 0
	for {
		select {
		case <-w.stopP:
			// Wait for the answers of what was handed over: Flush
			// returns once every buffered record is acked or failed.
			if err := cl.Flush(ctx); err != nil {
				w.logf("producer %d: flush: %v", id, err)
			}
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range perTick {
			v := value(id, seq)
			r := &kgo.Record{Value: []byte(v), Partition: int32((seq + id) % w.partitions)}
			seq++
			w.sent.Add(1)
			w.pending.Add(1)
			// Produce blocks while the buffer is full (a long outage):
			// the loop slows down with the cluster, as a real
			// producer's caller would.
			cl.Produce(ctx, r, func(r *kgo.Record, err error) { w.answer(v, r, err) })
		}
	}
}

// answer records the cluster's answer for one record.
func (w *Workload) answer(v string, r *kgo.Record, err error) {
	w.pending.Add(-1)
	if err != nil {
		w.failed.Add(1)
		w.mu.Lock()
		w.failures[errText(err)]++
		w.mu.Unlock()
		return
	}
	w.acked.Add(1)
	w.mu.Lock()
	now := time.Since(w.start) // under mu: each partition's times stay sorted
	w.ledger[v] = Ack{Partition: r.Partition, Offset: r.Offset}
	w.ackTimes[r.Partition] = append(w.ackTimes[r.Partition], now)
	w.mu.Unlock()
}

func errText(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, kgo.ErrClientClosed):
		return "client closed"
	}
	return err.Error()
}

// consume records what the group delivers to one consumer.
func (w *Workload) consume(ctx context.Context, cl *kgo.Client) {
	defer w.consWG.Done()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		// Fetch errors (a leader gone, a coordinator moving) are
		// retried by the client; only the records matter here.
		w.gmu.Lock()
		fs.EachRecord(func(r *kgo.Record) { w.seen[string(r.Value)]++ })
		w.gmu.Unlock()
	}
}

// Since is how long the workload has run.
func (w *Workload) Since() time.Duration { return time.Since(w.start) }

// Acked is how many records the cluster acknowledged so far.
func (w *Workload) Acked() int64 { return w.acked.Load() }

// Progress is one line for the log: acked, failed, pending, group seen.
func (w *Workload) Progress() string {
	w.gmu.Lock()
	seen := len(w.seen)
	w.gmu.Unlock()
	return fmt.Sprintf("acked %d, failed %d, pending %d, group consumed %d", w.acked.Load(), w.failed.Load(), w.pending.Load(), seen)
}

// PartitionsAckedSince reports whether every partition had a record
// acknowledged after d (since the start): writes flow everywhere again.
func (w *Workload) PartitionsAckedSince(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ts := range w.ackTimes {
		if len(ts) == 0 || ts[len(ts)-1] <= d {
			return false
		}
	}
	return true
}

// Gap is the longest time without an acknowledged write that overlaps
// [from, to] (since the start): per partition, the worst one, and for the
// whole topic (no write acknowledged on any partition). A gap is counted
// from from at the earliest and runs to the next acknowledgement, which
// may come after to.
type Gap struct {
	Worst     time.Duration // the worst partition's longest gap
	Partition int32         // that partition
	Any       time.Duration // longest time with no acknowledgement anywhere
}

// Gap computes the gaps overlapping [from, to]; now closes a gap still
// open (no acknowledgement since).
func (w *Workload) Gap(from, to time.Duration) Gap {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Since(w.start)
	g := Gap{Partition: -1}
	var all []time.Duration
	for p, ts := range w.ackTimes {
		d := longestGap(ts, from, to, now)
		if d > g.Worst {
			g.Worst, g.Partition = d, int32(p)
		}
		all = append(all, ts...)
	}
	slices.Sort(all)
	g.Any = longestGap(all, from, to, now)
	return g
}

// longestGap is the longest interval between consecutive times of ts
// (sorted) that overlaps [from, to], clipped to start at from; the last
// acknowledgement before an open end runs to now.
func longestGap(ts []time.Duration, from, to, now time.Duration) time.Duration {
	var worst time.Duration
	prev := from
	for _, t := range ts {
		if t <= from {
			continue
		}
		if d := t - prev; d > worst {
			worst = d
		}
		if t > to {
			return worst
		}
		prev = t
	}
	if d := now - prev; d > worst {
		worst = d
	}
	return worst
}

// StopProducing stops the producers and waits until each has had an
// answer for every record it handed over (or ctx ends).
func (w *Workload) StopProducing() {
	close(w.stopP)
	w.prodWG.Wait()
}

// Ledger returns a copy of the acknowledged records.
func (w *Workload) Ledger() map[string]Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.ledger)
}

// Failures returns the failed records' counts by error.
func (w *Workload) Failures() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.failures)
}

// GroupMissing is how many of the acknowledged records the group has not
// delivered yet, and how many deliveries were repeats (allowed: a group
// delivers at least once across rebalances).
func (w *Workload) GroupMissing(ledger map[string]Ack) (missing int, redelivered int) {
	w.gmu.Lock()
	defer w.gmu.Unlock()
	for v := range ledger {
		if w.seen[v] == 0 {
			missing++
		}
	}
	for _, n := range w.seen {
		redelivered += n - 1
	}
	return missing, redelivered
}

// Close stops everything and closes the clients.
func (w *Workload) Close() {
	if w.cancel != nil {
		w.cancel()
	}
	for _, cl := range w.clients {
		cl.Close()
	}
	w.prodWG.Wait()
	w.consWG.Wait()
}
