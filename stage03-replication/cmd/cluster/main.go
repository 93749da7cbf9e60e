// Command cluster starts three stage 03 brokers on 127.0.0.1 and plays the
// controller for them, so that you can watch replication with kcat and
// dumplog while you move leaders, stop and start brokers.
//
//	cluster [-brokers 3] [-port 19092] [-dir DIR] [-topic demo -partitions 1 -rf 3] [-script "cmd; cmd"]
//
// It creates the topic, then reads commands from stdin (or -script):
//
//	state                   every partition: leader, epoch, replicas, each replica's offsets
//	leader <p> <broker>     move partition p's leadership (the leader epoch goes up)
//	stop <broker>           stop a broker cleanly; the controller moves its leaderships
//	start <broker>          start it again; it truncates by epoch and catches up
//	produce <n>             produce n records with acks=all (franz-go)
//	wait                    wait until every running replica has caught up
//	quit
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/cluster"
	"github.com/kafkaworkbook/workbook/stage03-replication/repl"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, out io.Writer) error {
	flag := flag.NewFlagSet("cluster", flag.ContinueOnError)
	brokers := flag.Int("brokers", 3, "number of brokers")
	port := flag.Int("port", 19092, "broker i listens on 127.0.0.1:port+i")
	dir := flag.String("dir", "", "log directories go here (default: a new temporary directory)")
	topic := flag.String("topic", "demo", "topic to create")
	partitions := flag.Int("partitions", 1, "its partitions")
	rf := flag.Int("rf", 3, "its replication factor")
	script := flag.String("script", "", "commands separated by ';' instead of stdin")
	verbose := flag.Bool("v", false, "show the brokers' logs")
	if err := flag.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "cluster-")
		if err != nil {
			return err
		}
		*dir = d
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	d := &demo{out: out, topic: *topic}
	c, err := cluster.Start(*brokers, cluster.Options{Dir: *dir, BasePort: *port, Logger: logger})
	if err != nil {
		return err
	}
	d.c = c
	defer c.Close()
	if err := c.Controller.CreateTopic(*topic, *partitions, *rf); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d brokers on 127.0.0.1:%d..%d, logs in %s\n", *brokers, *port, *port+*brokers-1, *dir)
	fmt.Fprintf(out, "created topic %q: %d partition(s), replication factor %d\n", *topic, *partitions, *rf)
	fmt.Fprintf(out, "try:  kcat -b 127.0.0.1:%d -L    kcat -b 127.0.0.1:%d -C -t %s -o beginning\n", *port, *port, *topic)

	return repl.Loop(stdin, out, *script, d.run)
}

type demo struct {
	c     *cluster.Cluster
	out   io.Writer
	topic string
	sent  int
}

func (d *demo) run(f []string) error {
	arg := func(i int) (int32, error) {
		if i >= len(f) {
			return 0, fmt.Errorf("%s needs %d argument(s)", f[0], i)
		}
		n, err := strconv.Atoi(f[i])
		return int32(n), err
	}
	switch f[0] {
	case "state":
		d.state()
		return nil
	case "leader":
		p, err := arg(1)
		if err != nil {
			return err
		}
		b, err := arg(2)
		if err != nil {
			return err
		}
		return d.c.Controller.ElectLeader(commitlog.TopicPartition{Topic: d.topic, Partition: p}, b)
	case "stop":
		b, err := arg(1)
		if err != nil {
			return err
		}
		if err := d.c.StopBroker(b); err != nil {
			return err
		}
		return d.c.Controller.BrokerStopped(b)
	case "start":
		b, err := arg(1)
		if err != nil {
			return err
		}
		if err := d.c.StartBroker(b); err != nil {
			return err
		}
		return d.c.Controller.BrokerStarted(b)
	case "produce":
		n, err := arg(1)
		if err != nil {
			return err
		}
		return d.produce(int(n))
	case "wait":
		return d.wait()
	}
	return fmt.Errorf("unknown command %q (state, leader, stop, start, produce, wait, quit)", f[0])
}

func (d *demo) produce(n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.c.Addrs()...), kgo.DefaultProduceTopic(d.topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	// In this stage acks=all waits for every replica: with one stopped it
	// cannot be answered, so give up after a few seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range n {
		d.sent++
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record-%d", d.sent))}).FirstErr(); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.out, "produced %d records with acks=all\n", n)
	return nil
}

// wait polls until every running replica has the leader's log end and high
// watermark, for at most 30 s.
func (d *demo) wait() error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if d.inSync() {
			fmt.Fprintln(d.out, "every running replica is in sync")
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("replicas did not catch up within 30 s")
}

func (d *demo) inSync() bool {
	for p := int32(0); ; p++ {
		st, ok := d.c.Controller.State(commitlog.TopicPartition{Topic: d.topic, Partition: p})
		if !ok {
			return true
		}
		leader, ok := d.c.Broker(st.Leader)
		if !ok {
			return false
		}
		lp, ok := leader.Replicas.Partition(d.topic, p)
		if !ok {
			return false
		}
		for _, id := range st.Replicas {
			b, ok := d.c.Broker(id)
			if !ok {
				continue
			}
			rp, ok := b.Replicas.Partition(d.topic, p)
			if !ok || rp.Log.EndOffset() != lp.Log.EndOffset() || rp.HighWatermark() != lp.Log.EndOffset() {
				return false
			}
		}
	}
}

func (d *demo) state() {
	for p := int32(0); ; p++ {
		tp := commitlog.TopicPartition{Topic: d.topic, Partition: p}
		st, ok := d.c.Controller.State(tp)
		if !ok {
			return
		}
		fmt.Fprintf(d.out, "%s: leader %d, leader epoch %d, replicas %v\n", tp, st.Leader, st.LeaderEpoch, st.Replicas)
		for _, id := range st.Replicas {
			b, ok := d.c.Broker(id)
			if !ok {
				fmt.Fprintf(d.out, "  broker %d: stopped\n", id)
				continue
			}
			rp, ok := b.Replicas.Partition(d.topic, p)
			if !ok {
				fmt.Fprintf(d.out, "  broker %d: no replica yet\n", id)
				continue
			}
			var epochs []string
			for _, e := range rp.Epochs.Entries() {
				epochs = append(epochs, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
			}
			fmt.Fprintf(d.out, "  broker %d: %-8s log end %d, high watermark %d, epochs [%s], %s\n", id, rp.Role(),
				rp.Log.EndOffset(), rp.HighWatermark(), strings.Join(epochs, " "), rp.Log.Dir())
		}
	}
}
