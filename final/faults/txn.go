package faults

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// TxnOutcome is what a transactional writer knows of how one of its
// transactions ended.
type TxnOutcome int

const (
	// TxnUnknown: EndTransaction(commit) returned an error (or the writer
	// stopped before it returned). The coordinator may have written
	// PrepareCommit before the error, so the transaction may be committed
	// or aborted, but it must be one or the other, whole.
	TxnUnknown TxnOutcome = iota
	// TxnCommitted: EndTransaction(commit) returned nil.
	TxnCommitted
	// TxnAborted: the writer never asked to commit: it aborted on purpose,
	// or because a produce of the transaction failed. Whether the abort
	// itself was answered does not matter: without an EndTxn(commit) no
	// coordinator may commit it.
	TxnAborted
)

func (o TxnOutcome) String() string {
	return [...]string{"unknown", "committed", "aborted"}[o]
}

// Txn is one transaction a writer began: the values it produced in it
// (unique in the run) and how it ended.
type Txn struct {
	ID      string // writer and transaction number, "w1-000042"
	Values  []string
	Outcome TxnOutcome
	// Why says why an aborted or unknown transaction ended so: "on
	// purpose", or the error.
	Why string
}

// txnValue is the i-th value of transaction id: "w1-000042-3".
func txnValue(id string, i int) string { return fmt.Sprintf("%s-%d", id, i) }

// TxnConfig is the transactional workload: writers with a
// transactional.id each, on a topic of their own.
type TxnConfig struct {
	Off        bool   // no transactional workload
	Topic      string // created by Run (default: the run's topic + "-txn")
	Partitions int    // default 3
	Writers    int    // transactional producers (default 2)
	Records    int    // records per transaction, spread over the partitions (default 4)
	Rate       int    // transactions begun per second per writer, at most (default 10)
	// AbortEvery makes every n-th transaction of a writer one it aborts on
	// purpose (default 4).
	AbortEvery int
	Logf       func(string, ...any)
}

// TxnWorkload writes records in transactions with franz-go's
// transactional producers (KIP-98: InitProducerId with a
// transactional.id, AddPartitionsToTxn, EndTxn), committing most and
// aborting some on purpose, and keeps a ledger of every transaction with
// its values and outcome, to be checked against what a read_committed
// consumer reads once the faults are over.
type TxnWorkload struct {
	c        *cluster.Cluster
	cfg      TxnConfig
	logf     func(string, ...any)
	stop     chan struct{} // closed by Stop, once, to stop beginning transactions
	stopOnce sync.Once
	wg       sync.WaitGroup
	ended    atomic.Int64 // transactions ended, any outcome
	// committed counts the transactions whose commit was acknowledged;
	// Run waits for the first before injecting faults.
	committed atomic.Int64

	mu sync.Mutex
	// txns is every transaction begun, in each writer's order. Protected
	// by mu (a Txn is written by its writer only until it ends).
	txns []*Txn
	// errors counts the writers' errors by step and text ("commit:
	// ..."). Protected by mu.
	errors map[string]int
}

// txnOpts are the transactional producers' settings. Unlike the
// idempotent producers, a transaction cannot wait out a fault: its
// records must be acknowledged, and the transaction ended, before the
// coordinator's transaction timeout aborts it; so records time out
// (RecordDeliveryTimeout) and the writer ends the transaction with what
// it knows. The transaction timeout is short enough that a fault
// longer than it (a leader paused past its session) has the coordinator
// abort the open transaction and fence the writer, which the writer then
// sees as an error, as a real application would.
func txnOpts(topic, txnID string) []kgo.Opt {
	return append(faultTimeouts(),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(15*time.Second),
		kgo.ClientID(txnID),
	)
}

// StartTxnWorkload starts the writers; the topic must exist.
func StartTxnWorkload(ctx context.Context, c *cluster.Cluster, cfg TxnConfig) *TxnWorkload {
	if cfg.Partitions == 0 {
		cfg.Partitions = 3
	}
	if cfg.Writers == 0 {
		cfg.Writers = 2
	}
	if cfg.Records == 0 {
		cfg.Records = 4
	}
	if cfg.Rate == 0 {
		cfg.Rate = 10
	}
	if cfg.AbortEvery == 0 {
		cfg.AbortEvery = 4
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	w := &TxnWorkload{c: c, cfg: cfg, logf: cfg.Logf, stop: make(chan struct{}), errors: map[string]int{}}
	for i := range cfg.Writers {
		w.wg.Add(1)
		go w.write(ctx, i)
	}
	return w
}

// write runs writer id's transactions one after another until Stop. A
// transaction that went wrong in any way leaves the client behind: a new
// client with the same transactional.id starts with InitProducerId, which
// bumps the epoch, fences the old one, and has the coordinator finish
// what the old one left open (roll a PrepareCommit forward, abort an
// Ongoing transaction). Reusing the client would rely on franz-go's
// recovery of its producer id instead, and a mistake there could carry
// an aborted transaction's partitions into the next commit, which would
// be reported as the broker's aborted read.
func (w *TxnWorkload) write(ctx context.Context, id int) {
	defer w.wg.Done()
	txnID := fmt.Sprintf("faults-txn-%d", id)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	t := time.NewTicker(time.Second / time.Duration(w.cfg.Rate))
	defer t.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cl == nil {
			var err error
			if cl, err = w.c.Client(txnOpts(w.cfg.Topic, txnID)...); err != nil {
				w.count("new client", err)
				continue
			}
		}
		tx := &Txn{ID: fmt.Sprintf("w%d-%06d", id, seq), Why: "unfinished"}
		if !w.transact(ctx, cl, tx, seq%w.cfg.AbortEvery == w.cfg.AbortEvery-1) {
			cl.Close()
			cl = nil
		}
	}
}

// transact runs one transaction on cl: begin, produce its records (each
// to the next partition, so that a transaction spans several), and
// commit, or abort when abort is set or a produce failed. It reports
// whether cl is still fit for the next transaction.
func (w *TxnWorkload) transact(ctx context.Context, cl *kgo.Client, tx *Txn, abort bool) bool {
	if err := cl.BeginTransaction(); err != nil {
		w.count("begin", err)
		return false // nothing produced: not in the ledger
	}
	start := int(w.ended.Load()) // any rotation will do: spreads the first partitions
	recs := make([]*kgo.Record, w.cfg.Records)
	for i := range recs {
		tx.Values = append(tx.Values, txnValue(tx.ID, i))
		recs[i] = &kgo.Record{Value: []byte(tx.Values[i]), Partition: int32((start + i) % w.cfg.Partitions)}
	}
	// In the ledger before any record is handed over: a record may be
	// written even if its produce then fails.
	w.mu.Lock()
	w.txns = append(w.txns, tx)
	w.mu.Unlock()

	// The calls are bounded by the record timeout and the request
	// timeouts; the context is only a backstop, and never the run's
	// cancellation: an EndTxn cancelled mid-flight is an unknown outcome
	// for no reason.
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	defer cancel()
	why := "on purpose"
	if err := cl.ProduceSync(opCtx, recs...).FirstErr(); err != nil {
		w.count("produce", err)
		abort, why = true, "produce: "+errText(err)
	}
	sound := why == "on purpose"
	if abort {
		if err := cl.EndTransaction(opCtx, kgo.TryAbort); err != nil {
			w.count("abort", err)
			sound = false
		}
		w.end(tx, TxnAborted, why)
		return sound
	}
	if err := cl.EndTransaction(opCtx, kgo.TryCommit); err != nil {
		w.count("commit", err)
		w.end(tx, TxnUnknown, "commit: "+errText(err))
		// franz-go's documented follow-up to a failed commit; the
		// client is dropped whatever it answers.
		if err := cl.EndTransaction(opCtx, kgo.TryAbort); err != nil {
			w.count("abort after a failed commit", err)
		}
		return false
	}
	w.end(tx, TxnCommitted, "")
	w.committed.Add(1)
	return true
}

func (w *TxnWorkload) end(tx *Txn, o TxnOutcome, why string) {
	w.mu.Lock()
	tx.Outcome, tx.Why = o, why
	w.mu.Unlock()
	w.ended.Add(1)
}

// count notes a writer's error, and logs its first occurrences.
func (w *TxnWorkload) count(step string, err error) {
	key := step + ": " + errText(err)
	w.mu.Lock()
	w.errors[key]++
	n := w.errors[key]
	w.mu.Unlock()
	if n <= 3 {
		w.logf("txn writer: %s", key)
	}
}

// Committed is how many transactions' commits were acknowledged so far.
func (w *TxnWorkload) Committed() int64 { return w.committed.Load() }

// Progress is one line for the log.
func (w *TxnWorkload) Progress() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n [3]int
	for _, tx := range w.txns {
		if tx.Why != "unfinished" {
			n[tx.Outcome]++
		}
	}
	return fmt.Sprintf("txns committed %d, aborted %d, unknown %d", n[TxnCommitted], n[TxnAborted], n[TxnUnknown])
}

// Stop stops beginning transactions and waits for the writers to end the
// ones they are in.
func (w *TxnWorkload) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// Ledger returns a copy of every transaction begun.
func (w *TxnWorkload) Ledger() []Txn {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Txn, len(w.txns))
	for i, tx := range w.txns {
		out[i] = *tx
	}
	return out
}

// Errors returns the writers' errors, counted by step and text.
func (w *TxnWorkload) Errors() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.errors)
}

// shortList prints at most n of vals, and how many more.
func shortList(vals []string, n int) string {
	if len(vals) <= n {
		return strings.Join(vals, ", ")
	}
	return fmt.Sprintf("%s, … %d more", strings.Join(vals[:n], ", "), len(vals)-n)
}
