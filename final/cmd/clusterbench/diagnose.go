package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkaworkbook/workbook/final/cluster"
)

// diagnose writes what a failed measurement leaves to look at, before its
// topic is deleted and the cluster removed: every broker's view of the
// topic's partitions (leader, epoch, ISR, and the log end offset each
// broker answers as leader), and the last lines of each broker's log. It
// goes to a file of its own (its name is printed), since a stall that
// fails a run once in many is gone by the next.
func (b *bench) diagnose(topic string, cause error) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("clusterbench-failure-%d-%s.txt", os.Getpid(), time.Now().UTC().Format("150405")))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "diagnose: %v\n", err)
		return ""
	}
	defer f.Close()
	fmt.Fprintf(f, "clusterbench failure at %s: %v\ntopic %s\n\n", time.Now().UTC().Format(time.RFC3339), cause, topic)
	for i, addr := range b.servers {
		solo, err := cluster.SoloClient(addr)
		if err != nil {
			fmt.Fprintf(f, "broker at %s: %v\n", addr, err)
			continue
		}
		cl := kadm.NewClient(solo)
		md, err := cl.Metadata(ctx, topic)
		if err != nil {
			fmt.Fprintf(f, "broker %d (%s): metadata: %v\n", i, addr, err)
			cl.Close()
			continue
		}
		fmt.Fprintf(f, "broker %d (%s) sees controller %d:\n", i, addr, md.Controller)
		for _, p := range md.Topics[topic].Partitions.Sorted() {
			fmt.Fprintf(f, "  %s-%d: leader %d epoch %d replicas %v isr %v err %v\n", topic, p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR, p.Err)
		}
		if ends, err := cl.ListEndOffsets(ctx, topic); err == nil {
			ends.Each(func(o kadm.ListedOffset) {
				fmt.Fprintf(f, "  %s-%d: high watermark %d, leader epoch %d, err %v\n", o.Topic, o.Partition, o.Offset, o.LeaderEpoch, o.Err)
			})
		}
		cl.Close()
	}
	for i := range b.servers {
		fmt.Fprintf(f, "\n--- broker %d, last 300 lines ---\n%s\n", i, b.brokerLog(ctx, i, 300))
	}
	fmt.Fprintf(stderr, "clusterbench: the failed run's partitions and broker logs are in %s\n", path)
	return path
}

// brokerLog is the last lines of broker i's log: its container's, or its
// process's output file.
func (b *bench) brokerLog(ctx context.Context, i, lines int) string {
	if b.procs != nil {
		return tail(b.procs.outputs[i], lines)
	}
	if b.c == nil {
		return "(no logs: not a cluster of ours)"
	}
	out, err := b.c.Logs(ctx, b.c.Broker(i).Name, lines)
	if err != nil {
		return fmt.Sprintf("(logs: %v)", err)
	}
	return out
}
