package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// WaitStable waits until every partition of topic has its last stable
// offset (ListOffsets with isolation_level read_committed, which kadm
// calls the committed offsets) equal to its high watermark: every
// transaction that wrote to it has its marker. The coordinator writes
// the markers after it answered EndTxn, and a transaction left open by a
// writer that died is aborted only when its timeout passes, so this
// takes a while after the writers stop. The offsets are returned in
// either case, the error saying which partitions stayed unstable: a
// transaction no coordinator will ever end (a hanging transaction)
// holds back every read_committed consumer of its partitions.
func WaitStable(ctx context.Context, c *cluster.Cluster, topic string, timeout time.Duration) (map[int32]int64, error) {
	cl, err := c.Client(kgo.RequestTimeoutOverhead(3 * time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var (
		stable map[int32]int64
		last   error
	)
	ok := waitFor(ctx, timeout, func() bool {
		stable, last = stableOffsets(ctx, adm, topic)
		return last == nil
	})
	if !ok {
		return stable, fmt.Errorf("not stable within %v: %v", timeout, last)
	}
	return stable, nil
}

// stableOffsets lists every partition's last stable offset, and an error
// naming those still below their high watermark.
func stableOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("high watermarks: %w", err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lsos.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets: %w", err)
	}
	out := map[int32]int64{}
	var behind []string
	ends.Each(func(hw kadm.ListedOffset) {
		lso, ok := lsos.Lookup(topic, hw.Partition)
		if !ok {
			behind = append(behind, fmt.Sprintf("%s-%d: no last stable offset", topic, hw.Partition))
			return
		}
		out[hw.Partition] = lso.Offset
		if lso.Offset != hw.Offset {
			behind = append(behind, fmt.Sprintf("%s-%d: last stable offset %d, high watermark %d", topic, hw.Partition, lso.Offset, hw.Offset))
		}
	})
	if len(behind) > 0 {
		slices.Sort(behind)
		return out, fmt.Errorf("%s", strings.Join(behind, "; "))
	}
	return out, nil
}

// ReadCommitted reads every partition of topic from its start to end
// (each partition's last stable offset, from WaitStable) with a fresh
// read_committed consumer: the records of committed transactions, by
// partition, in offset order. The consumer keeps the control records
// (the markers) and drops them here: an aborted transaction's records
// are skipped, so the last one read may be far below the end, but a
// stable partition's last batch is a marker, which tells that the
// consumer got there.
func ReadCommitted(ctx context.Context, c *cluster.Cluster, topic string, end map[int32]int64, timeout time.Duration) (map[int32][]Read, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	for p := range end {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(16<<20), kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]Read{}
	next := map[int32]int64{} // past the last record or marker read
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			var at []string
			for _, p := range slices.Sorted(maps.Keys(end)) {
				at = append(at, fmt.Sprintf("p%d:%d/%d", p, next[p], end[p]))
			}
			return out, fmt.Errorf("faults: reading %s read_committed: %w (at %s)", topic, ctx.Err(), strings.Join(at, " "))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] {
				return
			}
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], Read{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	return out, nil
}

// TxnVerdict is what the read_committed read says about the transactions'
// ledger: Jepsen's checks of a transactional queue.
type TxnVerdict struct {
	Committed, Aborted, Unknown int // transactions, by the writer's outcome
	// UnknownCommitted and UnknownAborted are the unknown ones read whole
	// and not read at all.
	UnknownCommitted, UnknownAborted int
	Values                           int // values in the ledger
	Read                             int // records read

	AbortedRead []string // a value of an aborted transaction read
	Lost        []string // a value of a committed transaction not read
	Duplicated  []string // a value read more than once
	Partial     []string // a transaction read in part (atomicity)
	Unexpected  []string // a value read that no transaction wrote
}

// OK is true when no check failed.
func (v TxnVerdict) OK() bool {
	return len(v.AbortedRead) == 0 && len(v.Lost) == 0 && len(v.Duplicated) == 0 && len(v.Partial) == 0 && len(v.Unexpected) == 0
}

// Summary is the failures' counts, for the report's list of failures.
func (v TxnVerdict) Summary() string {
	return fmt.Sprintf("%d aborted read, %d lost, %d duplicated, %d transactions read in part, %d unexpected",
		len(v.AbortedRead), len(v.Lost), len(v.Duplicated), len(v.Partial), len(v.Unexpected))
}

// build 08.A: Jepsen's read_committed checks: no aborted read, no lost write, no duplicate, atomicity, nothing invented
// tests: TestCheckTxnsPassesWhatReadCommittedMayRead, TestCheckTxnsFindsEachViolation

// CheckTxns compares the transactions' ledger with what a read_committed
// consumer read:
//
//   - no aborted read: no value of a transaction the writer aborted;
//   - no lost write: every value of a transaction whose commit was
//     acknowledged;
//   - no duplicate: each value at most once;
//   - atomicity: each transaction's values all or none, whatever its
//     outcome (an unknown one may have gone either way, but not both);
//   - nothing read that no transaction wrote.
func CheckTxns(txns []Txn, read map[int32][]Read) TxnVerdict {
	var v TxnVerdict
	at := map[string][]string{} // value -> where it was read ("p-offset")
	for _, p := range slices.Sorted(maps.Keys(read)) {
		for _, r := range read[p] {
			v.Read++
			at[r.Value] = append(at[r.Value], fmt.Sprintf("%d-%d", p, r.Offset))
		}
	}
	written := map[string]bool{}
	for _, tx := range txns {
		var got, missing []string
		for _, val := range tx.Values {
			v.Values++
			written[val] = true
			if where := at[val]; len(where) > 0 {
				got = append(got, val+" at "+strings.Join(where, ", "))
				if len(where) > 1 {
					v.Duplicated = append(v.Duplicated, fmt.Sprintf("%s at %s", val, strings.Join(where, ", ")))
				}
			} else {
				missing = append(missing, val)
			}
		}
		switch tx.Outcome {
		case TxnCommitted:
			v.Committed++
			for _, val := range missing {
				v.Lost = append(v.Lost, fmt.Sprintf("%s (transaction %s committed)", val, tx.ID))
			}
		case TxnAborted:
			v.Aborted++
			for _, g := range got {
				v.AbortedRead = append(v.AbortedRead, fmt.Sprintf("%s (transaction %s aborted: %s)", g, tx.ID, tx.Why))
			}
		case TxnUnknown:
			v.Unknown++
			switch len(got) {
			case len(tx.Values):
				v.UnknownCommitted++
			case 0:
				v.UnknownAborted++
			}
		}
		if len(got) > 0 && len(missing) > 0 {
			v.Partial = append(v.Partial, fmt.Sprintf("transaction %s (%s): read %s; not read %s",
				tx.ID, tx.Outcome, shortList(got, 4), shortList(missing, 4)))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(read)) {
		for _, r := range read[p] {
			if !written[r.Value] {
				v.Unexpected = append(v.Unexpected, fmt.Sprintf("%q at %d-%d", r.Value, p, r.Offset))
			}
		}
	}
	return v
}

// TxnReport is the transactional workload's part of the report.
type TxnReport struct {
	Topic      string
	Partitions int
	Writers    int
	Verdict    TxnVerdict
	// Errors are the writers' errors, by step and text: each explains
	// an aborted or unknown transaction, or a client replaced.
	Errors map[string]int
	// Unstable says which partitions' last stable offsets stayed below
	// their high watermarks (a hanging transaction), if any.
	Unstable string
}

// end build
