package faults

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a run did and found, printed as Markdown (ready to paste
// into a chapter) by WriteTo.
type Report struct {
	Cluster    string
	Topic      string
	Partitions int
	Seed       uint64
	Command    string // how to run it again, when the caller knows
	Started    time.Time
	Duration   time.Duration // the workload's life, first record to last answer

	Faults []Fault

	Sent          int64          // records handed to the producers
	FailedRecords int64          // records whose produce failed for good (not acknowledged)
	Failures      map[string]int // failed records by error
	// Resets counts the producer clients' producer id resets (an epoch
	// bumped and sequences restarted after a broker's OUT_OF_ORDER_SEQUENCE
	// or UNKNOWN_PRODUCER_ID): after one, a retried record can be written
	// twice.
	Resets  int64
	Verdict Verdict // the ledger against the read-back

	GroupMissing     int // acknowledged records the group never delivered
	GroupRedelivered int // deliveries beyond the first (allowed: at least once)

	// Explain shows the batches that hold a few duplicated records.
	Explain []string

	Replicas []ReplicaComparison

	// Txn is the transactional workload's result (nil when it did not run).
	Txn *TxnReport

	// Failed lists every check that failed; empty means the run passed.
	Failed []string
}

func (r *Report) fail(format string, args ...any) {
	r.Failed = append(r.Failed, fmt.Sprintf(format, args...))
}

// OK is true when every check passed.
func (r *Report) OK() bool { return len(r.Failed) == 0 }

// secs prints a duration in seconds with one decimal, or "-" for zero.
func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// WriteTo writes the report as Markdown.
func (r *Report) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "## Fault suite report: %s\n\n", verdict)
	fmt.Fprintf(&b, "Cluster %s: 3 ZooKeeper servers, 3 brokers; topic %s, %d partitions, replication factor 3, min.insync.replicas=2.\n",
		r.Cluster, r.Topic, r.Partitions)
	fmt.Fprintf(&b, "Seed %d, started %s, workload ran %s.\n", r.Seed, r.Started.UTC().Format(time.RFC3339), r.Duration.Truncate(time.Second))
	if r.Command != "" {
		fmt.Fprintf(&b, "Run it again: `%s`\n", r.Command)
	}
	b.WriteString("\n### Faults\n\n")
	b.WriteString("Times are since the workload started. *Longest wait* is the longest a producer waited for an acknowledgement ")
	b.WriteString("from the fault until the cluster had recovered (every broker serving, every partition with a leader and a full ISR), ")
	b.WriteString("on the worst partition and on the topic as a whole (no partition acknowledging anything).\n\n")
	b.WriteString("| # | fault | target | seen | start | healed | recovered | longest wait (partition) | longest wait (topic) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, f := range r.Faults {
		seen := f.Observed
		if f.Err != nil {
			seen += " **error: " + f.Err.Error() + "**"
		}
		part := "-"
		if f.Gap.Partition >= 0 && f.Gap.Worst > 0 {
			part = fmt.Sprintf("%s (p%d)", secs(f.Gap.Worst), f.Gap.Partition)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", i+1, f.Kind, f.Target, escape(seen),
			secs(f.Start), secs(f.Heal), secs(f.Recovered), part, secs(f.Gap.Any))
	}
	if len(r.Faults) > 0 {
		b.WriteString("\nLongest wait per kind of fault (partition; worst of its injections):\n\n")
		worst := map[Kind]time.Duration{}
		count := map[Kind]int{}
		for _, f := range r.Faults {
			count[f.Kind]++
			worst[f.Kind] = max(worst[f.Kind], f.Gap.Worst)
		}
		for _, k := range Kinds {
			if count[k] > 0 {
				fmt.Fprintf(&b, "- %s ×%d: %s\n", k, count[k], secs(worst[k]))
			}
		}
	}

	v := r.Verdict
	b.WriteString("\n### Records\n\n")
	b.WriteString("| sent | acknowledged | failed (not acknowledged) | read back | lost | moved | duplicated | out of order | read, never acknowledged |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d |\n\n", r.Sent, v.Acked, r.FailedRecords, v.Read,
		len(v.Lost), len(v.Moved), len(v.Duplicated), len(v.OutOfOrder), v.Unacked)
	for _, e := range slices.Sorted(maps.Keys(r.Failures)) {
		fmt.Fprintf(&b, "- failed produce: %d × %s\n", r.Failures[e], e)
	}
	for _, list := range []struct {
		name string
		vals []string
	}{{"lost", v.Lost}, {"moved", v.Moved}, {"duplicated", v.Duplicated}, {"out of order", v.OutOfOrder}} {
		for i, s := range list.vals {
			if i == 10 {
				fmt.Fprintf(&b, "- … %d more %s\n", len(list.vals)-10, list.name)
				break
			}
			fmt.Fprintf(&b, "- %s: %s\n", list.name, s)
		}
	}
	for _, e := range r.Explain {
		fmt.Fprintf(&b, "- copies: %s\n", e)
	}
	fmt.Fprintf(&b, "\nProducer id resets logged by the producers: %d.\n", r.Resets)
	fmt.Fprintf(&b, "Consumer group: %d acknowledged records never delivered; %d redeliveries (at least once across rebalances).\n",
		r.GroupMissing, r.GroupRedelivered)

	if r.Txn != nil {
		r.Txn.writeTo(&b)
	}

	b.WriteString("\n### Replicas\n\n")
	b.WriteString("Each partition's batches below the high watermark, read from each replica's segment files on its data volume, compared by SHA-256 of every byte.\n\n")
	b.WriteString("| partition | high watermark | batches | replicas | identical |\n|---|---|---|---|---|\n")
	for _, rc := range r.Replicas {
		same := "yes"
		if rc.Err != "" {
			same = "**no: " + escape(rc.Err) + "**"
		}
		fmt.Fprintf(&b, "| %s-%d | %d | %d | %v | %s |\n", r.Topic, rc.Partition, rc.HighWatermark, rc.Batches, rc.Replicas, same)
	}

	fmt.Fprintf(&b, "\n### Verdict: %s\n\n", verdict)
	if r.OK() {
		b.WriteString("Every acknowledged record was read back once, at the offset it was acknowledged at, in its producer's order; ")
		b.WriteString("the group delivered every one; every replica holds the same batches.\n")
		if r.Txn != nil {
			b.WriteString("A read_committed consumer read no aborted transaction's record, every committed one's, each once, and every transaction whole or not at all.\n")
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// writeTo writes the transactions' section of the report.
func (t *TxnReport) writeTo(b *strings.Builder) {
	v := t.Verdict
	b.WriteString("\n### Transactions\n\n")
	fmt.Fprintf(b, "%d franz-go producers with a transactional.id each wrote to topic %s (%d partitions, replication factor 3, min.insync.replicas=2), ", t.Writers, t.Topic, t.Partitions)
	b.WriteString("a few records per transaction over several partitions, aborting some on purpose. ")
	b.WriteString("*Committed*: EndTxn(commit) acknowledged; *aborted*: the writer never asked to commit; ")
	b.WriteString("*unknown*: the commit returned an error. After the faults, once every partition's last stable offset reached its high watermark, ")
	b.WriteString("a consumer read the topic with isolation_level=read_committed.\n\n")
	b.WriteString("| committed | aborted | unknown (read whole / not read) | values | read | aborted read | lost | duplicated | read in part | unexpected |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| %d | %d | %d (%d / %d) | %d | %d | %d | %d | %d | %d | %d |\n\n", v.Committed, v.Aborted, v.Unknown,
		v.UnknownCommitted, v.UnknownAborted, v.Values, v.Read, len(v.AbortedRead), len(v.Lost), len(v.Duplicated), len(v.Partial), len(v.Unexpected))
	for _, e := range slices.Sorted(maps.Keys(t.Errors)) {
		fmt.Fprintf(b, "- writer error: %d × %s\n", t.Errors[e], escape(e))
	}
	if t.Unstable != "" {
		fmt.Fprintf(b, "- **unstable**: %s\n", escape(t.Unstable))
	}
	for _, list := range []struct {
		name string
		vals []string
	}{{"aborted read", v.AbortedRead}, {"lost", v.Lost}, {"duplicated", v.Duplicated}, {"read in part", v.Partial}, {"unexpected", v.Unexpected}} {
		for i, s := range list.vals {
			if i == 10 {
				fmt.Fprintf(b, "- … %d more %s\n", len(list.vals)-10, list.name)
				break
			}
			fmt.Fprintf(b, "- %s: %s\n", list.name, escape(s))
		}
	}
}

func escape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
