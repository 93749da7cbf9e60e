package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// Read is one record read back: its place and value.
type Read struct {
	Offset int64
	Value  string
}

// ReadBack reads every partition of topic from its start to its high
// watermark with a fresh consumer (no group): what the log holds, by
// partition, in offset order.
func ReadBack(ctx context.Context, c *cluster.Cluster, topic string, timeout time.Duration) (map[int32][]Read, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admCl, err := c.Client()
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("faults: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("faults: end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl, err := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(16<<20), kgo.RequestTimeoutOverhead(3*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int32][]Read{}
	done := func() bool {
		for p, end := range want {
			rs := out[p]
			if end > 0 && (len(rs) == 0 || rs[len(rs)-1].Offset < end-1) {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("faults: reading %s back: %w (have %s)", topic, ctx.Err(), progressOf(out, want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				out[r.Partition] = append(out[r.Partition], Read{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	return out, nil
}

func progressOf(out map[int32][]Read, want map[int32]int64) string {
	s := ""
	for _, p := range slices.Sorted(maps.Keys(want)) {
		last := int64(-1)
		if rs := out[p]; len(rs) > 0 {
			last = rs[len(rs)-1].Offset
		}
		s += fmt.Sprintf(" p%d:%d/%d", p, last+1, want[p])
	}
	return s
}

// Verdict is what the read-back says about the ledger.
type Verdict struct {
	Acked      int      // acknowledged records
	Read       int      // records read back
	Lost       []string // acknowledged, not read back
	Moved      []string // acknowledged at one offset, read at another
	Duplicated []string // read more than once
	// Copies are the places of the first duplicated records (a few), for
	// the report to show the batches that hold them.
	Copies     [][2]Ack
	OutOfOrder []string // a producer's records in a partition not in its order
	Unacked    int      // read back but never acknowledged (a write whose answer was lost: allowed)
}

// OK is true when nothing acknowledged was lost, moved or duplicated, and
// every producer's order held.
func (v Verdict) OK() bool {
	return len(v.Lost) == 0 && len(v.Moved) == 0 && len(v.Duplicated) == 0 && len(v.OutOfOrder) == 0
}

// CheckLedger compares the acknowledged records with what was read back:
// acked - read = ∅, each at the offset it was acknowledged at, no value
// twice, and each producer's records in each partition in the order it
// sent them.
func CheckLedger(ledger map[string]Ack, read map[int32][]Read) Verdict {
	v := Verdict{Acked: len(ledger)}
	at := map[string]Ack{}
	for p, rs := range read {
		last := map[int]int{} // producer -> last sequence seen in p
		for _, r := range rs {
			v.Read++
			if prev, dup := at[r.Value]; dup {
				v.Duplicated = append(v.Duplicated, fmt.Sprintf("%s at %d-%d and %d-%d", r.Value, prev.Partition, prev.Offset, p, r.Offset))
				if len(v.Copies) < 3 {
					v.Copies = append(v.Copies, [2]Ack{prev, {Partition: p, Offset: r.Offset}})
				}
			}
			at[r.Value] = Ack{Partition: p, Offset: r.Offset}
			if _, ok := ledger[r.Value]; !ok {
				v.Unacked++
			}
			if prod, seq, ok := parseValue([]byte(r.Value)); ok {
				if prevSeq, seen := last[prod]; seen && seq <= prevSeq {
					v.OutOfOrder = append(v.OutOfOrder, fmt.Sprintf("%s at %d-%d after sequence %d", r.Value, p, r.Offset, prevSeq))
				}
				last[prod] = seq
			}
		}
	}
	// exercise 08.1: find the acknowledged records that were lost or moved
	// hint: walk the ledger, not the read-back: an acknowledged record must be read, and at the place it was acknowledged
	// tests: TestCheckLedgerFindsEachAnomaly
	for _, val := range slices.Sorted(maps.Keys(ledger)) {
		a := ledger[val]
		got, ok := at[val]
		switch {
		case !ok:
			v.Lost = append(v.Lost, fmt.Sprintf("%s (acked at %d-%d)", val, a.Partition, a.Offset))
		case got != a:
			v.Moved = append(v.Moved, fmt.Sprintf("%s acked at %d-%d, read at %d-%d", val, a.Partition, a.Offset, got.Partition, got.Offset))
		}
	}
	// end exercise
	return v
}
