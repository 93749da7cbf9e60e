package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// The demo's topic: three partitions, each on all three brokers, and a
// write acknowledged only once two replicas have it.
const (
	demoTopic  = "orders"
	demoRate   = 1000 // records a second
	demoGroup  = "order-readers"
	partitions = 3
)

// ledger is what the demo's producer had acknowledged and its consumer
// read, by value.
type ledger struct {
	mu        sync.Mutex
	acked     map[string]bool
	consumed  map[string]bool
	failed    atomic.Int64 // produce errors (retried by franz-go first)
	redeliver atomic.Int64 // records the consumer read a second time
}

// demo is `make run`: the cluster, a producer and a consumer, the kill of
// a partition leader, and the proof that nothing acknowledged was lost.
func demo(ctx context.Context, o options, out io.Writer) (err error) {
	out = &lockedWriter{w: out} // the progress line comes from its own goroutine
	c, err := up(ctx, o, out)
	if err != nil {
		return err
	}
	defer func() {
		if o.wait && err == nil {
			tryThis(out, c)
			fmt.Fprintln(out, "\nPress Ctrl-C to stop the cluster and remove it.")
			<-ctx.Done()
		}
		fmt.Fprintf(out, "\nRemoving cluster %s.\n", c.Name())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if derr := cluster.Down(ctx, c.Name()); derr != nil && err == nil {
			err = derr
		}
	}()
	step := func(format string, args ...any) { fmt.Fprintf(out, "\n== "+format+"\n", args...) }

	admCl, err := c.Client()
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	step("Create topic %s: %d partitions, replication factor 3, min.insync.replicas=2", demoTopic, partitions)
	created, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, demoTopic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", demoTopic, err)
	}
	w := newWatcher(c, out)
	// Settled asks every broker: each must see a leader and a full ISR.
	settled := func() bool { ok, _ := c.Settled(ctx, demoTopic); return ok }
	w.watch(ctx, 30*time.Second, settled)
	if !settled() {
		return fmt.Errorf("the partitions of %s did not all get a leader and a full ISR in 30s", demoTopic)
	}
	w.print()

	step("Produce %d records/s (idempotent, acks=all) and consume them in group %s", demoRate, demoGroup)
	l := &ledger{acked: map[string]bool{}, consumed: map[string]bool{}}
	prodCtx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	var producing sync.WaitGroup
	producing.Add(1)
	go func() { defer producing.Done(); produce(prodCtx, c, l) }()
	consCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	go consume(consCtx, c, l)
	progressCtx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go progress(progressCtx, out, l)
	if !sleep(ctx, o.act) {
		return ctx.Err()
	}

	leader := w.leader(demoTopic, 0)
	victim := c.Broker(int(leader))
	step("kill -9 %s, the leader of %s-0 (docker kill)", victim.Name, demoTopic)
	if err := c.Kill(ctx, victim.Name); err != nil {
		return err
	}
	w.watch(ctx, 2*o.act, func() bool { return w.leader(demoTopic, 0) != leader && w.leader(demoTopic, 0) >= 0 })
	step("Start %s again: it truncates to the new leader's epoch, catches up and rejoins the ISR", victim.Name)
	if err := c.Start(ctx, victim.Name); err != nil {
		return err
	}
	w.watch(ctx, 6*o.act, settled)

	step("Stop producing; wait until the consumer has read every acknowledged record")
	stopProducing()
	producing.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for missing(l) > 0 && time.Now().Before(deadline) && sleep(ctx, 200*time.Millisecond) {
	}
	stopProgress()
	stopConsuming()
	l.mu.Lock()
	acked, consumed := len(l.acked), len(l.consumed)
	l.mu.Unlock()
	lost := missing(l)
	fmt.Fprintf(out, "acknowledged %d, consumed %d distinct (%d read twice after a rebalance: at least once), produce errors %d\n",
		acked, consumed, l.redeliver.Load(), l.failed.Load())
	if lost > 0 {
		return fmt.Errorf("%d acknowledged records were not consumed", lost)
	}
	fmt.Fprintf(out, "every acknowledged record was consumed: nothing lost\n")
	w.print()
	return nil
}

// produce writes demoRate records a second until ctx ends, then waits for
// every answer.
func produce(ctx context.Context, c *cluster.Cluster, l *ledger) {
	cl, err := c.Client(kgo.DefaultProduceTopic(demoTopic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		l.failed.Add(1)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			cl.Flush(context.Background())
			return
		case <-tick.C:
		}
		for range demoRate / 100 {
			v := fmt.Sprintf("order-%07d", n)
			n++
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err != nil {
					l.failed.Add(1)
					return
				}
				l.mu.Lock()
				l.acked[string(r.Value)] = true
				l.mu.Unlock()
			})
		}
	}
}

// consume reads the topic in a consumer group until ctx ends.
func consume(ctx context.Context, c *cluster.Cluster, l *ledger) {
	cl, err := c.Client(kgo.ConsumerGroup(demoGroup), kgo.ConsumeTopics(demoTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			l.mu.Lock()
			if l.consumed[string(r.Value)] {
				l.redeliver.Add(1)
			}
			l.consumed[string(r.Value)] = true
			l.mu.Unlock()
		})
	}
}

// progress prints a line every two seconds: records acknowledged a
// second, acknowledged, consumed.
func progress(ctx context.Context, out io.Writer, l *ledger) {
	start := time.Now()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		acked, consumed := len(l.acked), len(l.consumed)
		l.mu.Unlock()
		fmt.Fprintf(out, "  %3.0fs  %5d acked/s  acked %6d  consumed %6d  errors %d\n",
			time.Since(start).Seconds(), (acked-last)/2, acked, consumed, l.failed.Load())
		last = acked
	}
}

// missing counts acknowledged records the consumer has not read.
func missing(l *ledger) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for v := range l.acked {
		if !l.consumed[v] {
			n++
		}
	}
	return n
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// watcher follows the topic's leaders and ISRs and prints each change.
// It asks every broker alone (a client's metadata may come from its own
// cache, or from a broker the controller has not told yet) and believes,
// for each partition, its leader's view: the leader is where an ISR
// shrinks and expands.
type watcher struct {
	c    *cluster.Cluster
	out  io.Writer
	last map[int32]cluster.Partition
}

func newWatcher(c *cluster.Cluster, out io.Writer) *watcher {
	return &watcher{c: c, out: out, last: map[int32]cluster.Partition{}}
}

// refresh reads the topic's partitions; it keeps the last view of a
// partition no broker answers for.
func (w *watcher) refresh(ctx context.Context) (changes []string) {
	views := w.c.Views(ctx, demoTopic)
	current := map[int32]cluster.Partition{}
	for _, v := range views { // the newest leader epoch any broker knows
		for p, s := range v {
			if cur, ok := current[p]; !ok || s.LeaderEpoch > cur.LeaderEpoch {
				current[p] = s
			}
		}
	}
	for p, s := range current { // and that leader's own view, if it answers
		if lv, ok := views[int(s.Leader)]; ok && lv[p].LeaderEpoch == s.LeaderEpoch {
			current[p] = lv[p]
		}
	}
	for _, p := range slices.Sorted(maps.Keys(current)) {
		s := current[p]
		old, seen := w.last[p]
		if seen && old.Leader != s.Leader {
			changes = append(changes, fmt.Sprintf("%s-%d: leader %d -> %d (epoch %d)", demoTopic, p, old.Leader, s.Leader, s.LeaderEpoch))
		}
		if seen && !slices.Equal(old.ISR, s.ISR) {
			what := "shrinks"
			if len(s.ISR) > len(old.ISR) {
				what = "expands"
			}
			changes = append(changes, fmt.Sprintf("%s-%d: ISR %s %v -> %v", demoTopic, p, what, old.ISR, s.ISR))
		}
		w.last[p] = s
	}
	return changes
}

// watch prints every change until done reports true or d passes.
func (w *watcher) watch(ctx context.Context, d time.Duration, done func() bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, ch := range w.refresh(ctx) {
			fmt.Fprintln(w.out, "  "+ch)
		}
		if done() {
			// Once it holds, one more look: the view read before may
			// have been a moment older.
			for _, ch := range w.refresh(ctx) {
				fmt.Fprintln(w.out, "  "+ch)
			}
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

func (w *watcher) leader(topic string, p int32) int32 {
	if d, ok := w.last[p]; ok {
		return d.Leader
	}
	return -1
}

// print shows each partition's leader, replicas and ISR.
func (w *watcher) print() {
	for _, p := range slices.Sorted(maps.Keys(w.last)) {
		d := w.last[p]
		fmt.Fprintf(w.out, "  %s-%d  leader %d  replicas %v  ISR %v\n", demoTopic, p, d.Leader, d.Replicas, d.ISR)
	}
}

// lockedWriter serializes writes from the demo's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
