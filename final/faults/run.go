package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// Config is one run of the suite against a running cluster.
type Config struct {
	Topic      string // created by Run (default "faults")
	Partitions int    // default 6
	// Faults are injected in this order. When empty, Count faults (or as
	// many as fit in Duration) are drawn with Seed from Kinds (default:
	// every kind).
	Faults   []Kind
	Kinds    []Kind
	Seed     uint64
	Count    int
	Duration time.Duration
	// Workload is the producers' and consumers' setup (Topic and
	// Partitions are filled in).
	Workload WorkloadConfig
	// Txn is the transactional workload, run beside the other on a topic
	// of its own (Topic, Logf and the defaults filled in).
	Txn TxnConfig
	// Hold is each fault's least duration (the nemesis's default if zero).
	Hold time.Duration
	// Progress is the period of the progress line (default 10 s).
	Progress time.Duration
	Logf     func(string, ...any)
}

// Run creates the topic, starts the workload, injects the faults one at a
// time, each healed and recovered from before the next, then stops the
// producers and checks the ledger, the group and the replicas. The report
// says what happened; its Failed lists what went wrong (an error is
// returned only when the run could not be carried out at all).
func Run(ctx context.Context, c *cluster.Cluster, cfg Config) (*Report, error) {
	if cfg.Topic == "" {
		cfg.Topic = "faults"
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 6
	}
	if cfg.Progress == 0 {
		cfg.Progress = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	logf := cfg.Logf
	rep := &Report{Cluster: c.Name(), Topic: cfg.Topic, Partitions: cfg.Partitions, Seed: cfg.Seed, Started: time.Now()}

	admCl, err := c.Client()
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	minISR := "2"
	res, err := adm.CreateTopic(ctx, int32(cfg.Partitions), 3, map[string]*string{"min.insync.replicas": &minISR}, cfg.Topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, fmt.Errorf("faults: create topic %s: %w", cfg.Topic, err)
	}
	if !cfg.Txn.Off {
		if cfg.Txn.Topic == "" {
			cfg.Txn.Topic = cfg.Topic + "-txn"
		}
		if cfg.Txn.Partitions == 0 {
			cfg.Txn.Partitions = 3
		}
		res, err := adm.CreateTopic(ctx, int32(cfg.Txn.Partitions), 3, map[string]*string{"min.insync.replicas": &minISR}, cfg.Txn.Topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return nil, fmt.Errorf("faults: create topic %s: %w", cfg.Txn.Topic, err)
		}
	}
	if err := Healthy(ctx, c, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("faults: before the workload: %w", err)
	}

	wcfg := cfg.Workload
	wcfg.Topic, wcfg.Partitions, wcfg.Logf = cfg.Topic, cfg.Partitions, logf
	w, err := StartWorkload(ctx, c, wcfg)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if !waitFor(ctx, 60*time.Second, func() bool { return w.PartitionsAckedSince(0) }) {
		return nil, fmt.Errorf("faults: the workload got no write acknowledged on some partition in 60 s (%s)", w.Progress())
	}
	logf("workload running: %s", w.Progress())
	var tw *TxnWorkload
	if !cfg.Txn.Off {
		tcfg := cfg.Txn
		tcfg.Logf = logf
		tw = StartTxnWorkload(ctx, c, tcfg)
		defer tw.Stop()
		// The first InitProducerId creates __transaction_state (50
		// partitions): the faults wait until its partitions have leaders,
		// else the first fault would meet the topic's creation.
		if !waitFor(ctx, 60*time.Second, func() bool { return tw.Committed() > 0 }) {
			rep.fail("the transactional workload got no commit acknowledged in 60 s (%s)", tw.Progress())
		} else if err := Healthy(ctx, c, 2*time.Minute); err != nil {
			return nil, fmt.Errorf("faults: after the first transaction: %w", err)
		}
		logf("transactional workload running: %s", tw.Progress())
	}
	progress := w.Progress
	if tw != nil {
		progress = func() string { return w.Progress() + ", " + tw.Progress() }
	}

	var (
		mu      sync.Mutex
		current string // the fault in progress, for the progress line. Protected by mu.
	)
	setCurrent := func(s string) { mu.Lock(); current = s; mu.Unlock() }
	progressDone := make(chan struct{})
	stopProgress := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(cfg.Progress)
		defer t.Stop()
		last, lastAt := w.Acked(), time.Now()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
			}
			now, acked := time.Now(), w.Acked()
			rate := float64(acked-last) / now.Sub(lastAt).Seconds()
			last, lastAt = acked, now
			mu.Lock()
			cur := current
			mu.Unlock()
			logf("t=%-5s %6.0f acked/s | %s | %s", w.Since().Truncate(time.Second), rate, progress(), cur)
		}
	}()

	nem := &Nemesis{C: c, W: w, Topic: cfg.Topic, Logf: logf, Hold: cfg.Hold,
		Rand: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	schedule := slices.Clone(cfg.Faults)
	random := len(schedule) == 0
	kinds := cfg.Kinds
	if len(kinds) == 0 {
		kinds = Kinds
	}
	deadline := time.Now().Add(cfg.Duration)
	for i := 0; ; i++ {
		var kind Kind
		if random {
			if (cfg.Count > 0 && i >= cfg.Count) || (cfg.Duration > 0 && time.Now().After(deadline)) || (cfg.Count == 0 && cfg.Duration == 0) {
				break
			}
			kind = kinds[nem.Rand.IntN(len(kinds))]
		} else {
			if i >= len(schedule) {
				break
			}
			kind = schedule[i]
		}
		setCurrent(fmt.Sprintf("fault %d: %s", i+1, kind))
		logf("fault %d: %s", i+1, kind)
		f := nem.Inject(ctx, kind)
		rep.Faults = append(rep.Faults, f)
		logf("fault %d: %s %s: healed at %v, recovered at %v, longest wait for an ack %v (partition %d), err %v",
			i+1, kind, f.Target, f.Heal.Truncate(time.Millisecond), f.Recovered.Truncate(time.Millisecond), f.Gap.Worst.Truncate(time.Millisecond), f.Gap.Partition, f.Err)
		if f.Err != nil {
			rep.fail("fault %d (%s): %v", i+1, kind, f.Err)
			if f.Recovered == 0 {
				break // the cluster did not recover: the next fault would mean nothing
			}
		}
		setCurrent("")
	}

	setCurrent("stopping the producers")
	stopCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	stopped := make(chan struct{})
	go func() {
		// The writers end the transactions they are in, each bounded by
		// its timeouts, while the producers wait for their answers.
		var txnStopped chan struct{}
		if tw != nil {
			txnStopped = make(chan struct{})
			go func() { tw.Stop(); close(txnStopped) }()
		}
		w.StopProducing()
		if tw != nil {
			<-txnStopped
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-stopCtx.Done():
		rep.fail("the producers still had unanswered records after 2 minutes (%s)", progress())
	}
	cancel()
	close(stopProgress)
	<-progressDone
	rep.Duration = w.Since()
	rep.Failures = w.Failures()
	rep.Sent, rep.FailedRecords, rep.Resets = w.sent.Load(), w.failed.Load(), w.resets.Load()

	if err := Healthy(ctx, c, 2*time.Minute); err != nil {
		rep.fail("after the last fault: %v", err)
	}
	ledger := w.Ledger()
	read, err := ReadBack(ctx, c, cfg.Topic, 3*time.Minute)
	if err != nil {
		rep.fail("read back: %v", err)
	}
	rep.Verdict = CheckLedger(ledger, read)
	if !rep.Verdict.OK() {
		rep.fail("ledger: %d lost, %d moved, %d duplicated, %d out of order", len(rep.Verdict.Lost), len(rep.Verdict.Moved), len(rep.Verdict.Duplicated), len(rep.Verdict.OutOfOrder))
	}
	for _, pair := range rep.Verdict.Copies {
		rep.Explain = append(rep.Explain, explainCopies(ctx, c, adm, cfg.Topic, pair))
	}
	logf("read back %d records: %d acked, %d lost, %d duplicated, %d out of order", rep.Verdict.Read, rep.Verdict.Acked, len(rep.Verdict.Lost), len(rep.Verdict.Duplicated), len(rep.Verdict.OutOfOrder))

	if tw != nil {
		rep.Txn = checkTxns(ctx, c, tw, cfg.Txn, rep, logf)
	}

	// The group: every acknowledged record delivered, after a drain.
	var missing int
	waitFor(ctx, 2*time.Minute, func() bool {
		missing, rep.GroupRedelivered = w.GroupMissing(ledger)
		return missing == 0
	})
	rep.GroupMissing = missing
	if missing > 0 {
		rep.fail("the consumer group never delivered %d acknowledged records", missing)
	}

	// The replicas, byte for byte up to the high watermark.
	rep.Replicas, err = compareAll(ctx, c, adm, cfg.Topic)
	if err != nil {
		rep.fail("replicas: %v", err)
	}
	for _, rc := range rep.Replicas {
		if rc.Err != "" {
			rep.fail("replicas of %s-%d: %s", cfg.Topic, rc.Partition, rc.Err)
		}
	}
	return rep, nil
}

// checkTxns waits until the transactional topic is stable, reads it
// read_committed and checks the writers' ledger against it.
func checkTxns(ctx context.Context, c *cluster.Cluster, tw *TxnWorkload, cfg TxnConfig, rep *Report, logf func(string, ...any)) *TxnReport {
	tr := &TxnReport{Topic: cfg.Topic, Partitions: cfg.Partitions, Writers: tw.cfg.Writers, Errors: tw.Errors()}
	start := time.Now()
	ledger := tw.Ledger()
	// A writer's client replaced while a transaction was open leaves it to
	// the coordinator's timeout (20 s) and its next check (10 s).
	stable, err := WaitStable(ctx, c, cfg.Topic, 90*time.Second)
	if err != nil {
		tr.Unstable = err.Error()
		rep.fail("transactions: %s: %v", cfg.Topic, err)
	}
	if stable == nil {
		return tr
	}
	read, err := ReadCommitted(ctx, c, cfg.Topic, stable, 3*time.Minute)
	if err != nil {
		rep.fail("transactions: read back: %v", err)
	}
	tr.Verdict = CheckTxns(ledger, read)
	if !tr.Verdict.OK() {
		rep.fail("transactions: %s", tr.Verdict.Summary())
	}
	v := tr.Verdict
	logf("read %d records read_committed in %v (stable and read): %d transactions committed, %d aborted, %d unknown (%d read whole, %d not at all); %s",
		v.Read, time.Since(start).Truncate(time.Millisecond), v.Committed, v.Aborted, v.Unknown, v.UnknownCommitted, v.UnknownAborted, v.Summary())
	return tr
}

// compareAll compares every partition's replicas, retrying a partition
// for a while: a follower may still be fetching the last batches.
func compareAll(ctx context.Context, c *cluster.Cluster, adm *kadm.Client, topic string) ([]ReplicaComparison, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	var out []ReplicaComparison
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		end, ok := ends.Lookup(topic, p.Partition)
		if !ok || end.Err != nil {
			return out, fmt.Errorf("no high watermark for partition %d: %v", p.Partition, end.Err)
		}
		var rc ReplicaComparison
		waitFor(ctx, 60*time.Second, func() bool {
			rc = CompareReplicas(ctx, c, topic, p.Partition, sorted(p.Replicas), p.Leader, end.Offset)
			return rc.Err == ""
		})
		out = append(out, rc)
	}
	return out, nil
}

// explainCopies describes the batches holding two copies of a record, in
// the partition leader's log: their producer ids, epochs and sequences
// say whether the producer sent it twice as new (a new producer id or
// epoch) or the broker took a retry as new (the same ones).
func explainCopies(ctx context.Context, c *cluster.Cluster, adm *kadm.Client, topic string, pair [2]Ack) string {
	p := pair[0].Partition
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err.Error()
	}
	leader := md.Topics[topic].Partitions[p].Leader
	ds, err := ReplicaLog(ctx, c, c.Broker(int(leader)), topic, p)
	if err != nil {
		return err.Error()
	}
	var found []string
	for _, a := range pair {
		for _, d := range ds {
			if d.BaseOffset <= a.Offset && a.Offset <= d.LastOffset {
				found = append(found, fmt.Sprintf("offset %d in %v", a.Offset, d))
			}
		}
	}
	return fmt.Sprintf("%s-%d on broker %d: %s", topic, p, leader, strings.Join(found, "; "))
}

// ParseKinds parses a comma-separated list of fault kinds.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(Kinds, Kind(f)) {
			return nil, fmt.Errorf("faults: unknown fault %q (kinds: %v)", f, Kinds)
		}
		out = append(out, Kind(f))
	}
	return out, nil
}

// SeedFrom parses a seed, or makes one from the clock when s is empty.
func SeedFrom(s string) (uint64, error) {
	if s == "" {
		return uint64(time.Now().UnixNano() % 1e6), nil
	}
	return strconv.ParseUint(s, 10, 64)
}
