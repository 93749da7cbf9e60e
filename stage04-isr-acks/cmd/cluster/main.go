// Command cluster starts three stage 04 brokers on 127.0.0.1 with one
// topic of one partition, and plays the controller for them, so that you
// can watch a follower leave the ISR and rejoin it, and see acks and
// min.insync.replicas decide what a producer is told.
//
//	cluster [-brokers 3] [-port 19092] [-dir DIR] [-topic demo -rf 3] [-lag 3000]
//	        [-min-isr 1] [-unclean=false] [-script "cmd; cmd"] [-v]
//
// -lag, -min-isr and -unclean are Kafka's replica.lag.time.max.ms,
// min.insync.replicas and unclean.leader.election.enable, for every broker.
// It creates the topic, then reads commands from stdin (or -script,
// separated by ';'):
//
//	state               the partition as stored (leader, leader epoch, ISR, state
//	                    version) and each broker's log end and high watermark; the
//	                    leader's view of each follower (its log end offset, and how
//	                    long ago it last caught up)
//	pause <broker>      stop the broker's fetcher: its followers fall behind
//	resume <broker>     start it again: they catch up and rejoin the ISR
//	produce <n> [acks]  produce n records, acks all (default), 1 or 0; print how
//	                    many were acknowledged, the first error, and the time
//	wait-isr <ids...>   wait until the stored ISR is exactly these brokers
//	history             every write of the partition's state, with its version
//	stop <broker>       stop a broker cleanly; if it led, the controller elects the
//	                    next live ISR member (with -unclean and none left, any
//	                    live replica)
//	start <broker>      start it again: it follows, catches up and rejoins the ISR
//	sleep <ms>
//	quit
//
// produce sends each record in a Produce request of its own to the leader
// the state names, through a franz-go client, and prints the broker's answer
// as it is: a producer's retries would hide NOT_ENOUGH_REPLICAS_AFTER_APPEND
// (franz-go retries a batch it is unsure of until its deadline).
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage03-replication/repl"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/cluster"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/server"
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
	port := flag.Int("port", 19092, "broker i listens on 127.0.0.1:port+i (0: ports the kernel picks)")
	dir := flag.String("dir", "", "log directories go here (default: a new temporary directory)")
	topic := flag.String("topic", "demo", "topic to create, with one partition")
	rf := flag.Int("rf", 3, "its replication factor")
	lag := flag.Int("lag", 3000, server.KeyLagTimeMax)
	minISR := flag.Int("min-isr", 1, server.KeyMinInsyncReplicas)
	unclean := flag.Bool("unclean", false, server.KeyUncleanLeaderElection)
	script := flag.String("script", "", "commands separated by ';' instead of stdin")
	verbose := flag.Bool("v", false, "show the brokers' logs (the ISR manager's decisions among them)")
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
	props := map[string]string{
		server.KeyLagTimeMax:            strconv.Itoa(*lag),
		server.KeyMinInsyncReplicas:     strconv.Itoa(*minISR),
		server.KeyUncleanLeaderElection: strconv.FormatBool(*unclean),
	}
	c, err := cluster.Start(*brokers, cluster.Options{Dir: *dir, Props: props, BasePort: *port, Logger: logger})
	if err != nil {
		return err
	}
	defer c.Close()
	d := newDemo(c, out, commitlog.TopicPartition{Topic: *topic, Partition: 0}, time.Duration(*lag)*time.Millisecond)
	if err := c.Controller.CreateTopic(*topic, 1, *rf); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d brokers on %s, logs in %s\n", *brokers, strings.Join(c.Addrs(), " "), *dir)
	fmt.Fprintf(out, "created topic %q: 1 partition, replication factor %d\n", *topic, *rf)
	for _, k := range []string{server.KeyLagTimeMax, server.KeyMinInsyncReplicas, server.KeyUncleanLeaderElection} {
		fmt.Fprintf(out, "%s=%s\n", k, props[k])
	}
	fmt.Fprintf(out, "try:  kcat -b %s -L  (Metadata shows the ISR)\n", c.Addrs()[0])

	return repl.Loop(stdin, out, *script, d.run)
}

// demo runs the commands against one partition of a cluster.
type demo struct {
	c   *cluster.Cluster
	out io.Writer
	tp  commitlog.TopicPartition
	lag time.Duration // replica.lag.time.max.ms: wait-isr's deadline grows with it

	// stateWritten is signalled after every write of the partition's state
	// znode (a MemoryStore watch), so that wait-isr wakes when the ISR
	// changes instead of polling.
	stateWritten chan struct{}
	paused       map[int32]bool // brokers whose fetcher the demo paused
	sent         int            // records produced so far, to name the next one
}

func newDemo(c *cluster.Cluster, out io.Writer, tp commitlog.TopicPartition, lag time.Duration) *demo {
	d := &demo{c: c, out: out, tp: tp, lag: lag, stateWritten: make(chan struct{}, 1), paused: map[int32]bool{}}
	path := isr.StatePath(tp)
	c.States.Watch(func(p string) {
		if p == path {
			select {
			case d.stateWritten <- struct{}{}:
			default:
			}
		}
	})
	return d
}

func (d *demo) run(f []string) error {
	arg := func(i int) (int32, error) {
		if i >= len(f) {
			return 0, fmt.Errorf("%s needs %d argument(s)", f[0], i)
		}
		n, err := strconv.ParseInt(f[i], 10, 32)
		return int32(n), err
	}
	switch f[0] {
	case "state":
		return d.state()
	case "pause", "resume":
		b, err := arg(1)
		if err != nil {
			return err
		}
		return d.pause(b, f[0] == "pause")
	case "produce":
		n, err := arg(1)
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("produce %d: at least one record", n)
		}
		acks := "all"
		if len(f) > 2 {
			acks = f[2]
		}
		return d.produce(int(n), acks)
	case "wait-isr":
		if len(f) < 2 {
			return fmt.Errorf("wait-isr needs the brokers the ISR should hold")
		}
		var want []int32
		for i := 1; i < len(f); i++ {
			id, err := arg(i)
			if err != nil {
				return err
			}
			want = append(want, id)
		}
		return d.waitISR(want)
	case "history":
		return d.history()
	case "stop":
		b, err := arg(1)
		if err != nil {
			return err
		}
		if err := d.c.StopBroker(b); err != nil {
			return err
		}
		delete(d.paused, b) // a broker starts with its fetcher running
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
	case "sleep":
		ms, err := arg(1)
		if err != nil {
			return err
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return nil
	}
	return fmt.Errorf("unknown command %q (state, pause, resume, produce, wait-isr, history, stop, start, sleep, quit)", f[0])
}

// pause stops or restarts a broker's fetcher: as if the network between
// it and its leaders were cut, with its connections left open.
func (d *demo) pause(id int32, pause bool) error {
	s, ok := d.c.Server(id)
	if !ok {
		return fmt.Errorf("broker %d is not running", id)
	}
	s.Replicas.PauseFetching(pause)
	d.paused[id] = pause
	if pause {
		fmt.Fprintf(d.out, "broker %d stopped fetching\n", id)
	} else {
		fmt.Fprintf(d.out, "broker %d fetches again\n", id)
	}
	return nil
}

// waitISR waits until the stored ISR holds exactly want (in any order: the
// ISR lists its members in the order they joined), printing it every
// second. The deadline leaves room for a follower to leave (up to 1.5 ×
// replica.lag.time.max.ms after it last caught up) or to catch up.
func (d *demo) waitISR(want []int32) error {
	want = slices.Sorted(slices.Values(want))
	timeout := max(30*time.Second, 3*d.lag)
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		got, version, err := d.c.ISR(d.tp)
		if err != nil {
			return err
		}
		if slices.Equal(slices.Sorted(slices.Values(got)), want) {
			fmt.Fprintf(d.out, "ISR %v, state version %d, after %v\n", got, version, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-d.stateWritten:
		case <-tick.C:
			fmt.Fprintf(d.out, "  %v: ISR %v, state version %d\n", time.Since(start).Round(time.Second), got, version)
		case <-deadline.C:
			return fmt.Errorf("the ISR is %v after %v, not %v", got, timeout, want)
		}
	}
}

// history prints every write of the partition's state znode: created by
// the controller at version 0, then each ISR change of the leader and
// each decision of the controller at the next version.
func (d *demo) history() error {
	path := isr.StatePath(d.tp)
	writes := d.c.States.History(path)
	if len(writes) == 0 {
		return fmt.Errorf("no writes of %s", path)
	}
	fmt.Fprintln(d.out, path)
	for _, w := range writes {
		fmt.Fprintf(d.out, "  version %d: %s\n", w.Version, w.Data)
	}
	return nil
}

// state prints the partition as the store holds it, then each replica as
// its broker holds it, and under the leader what it knows of each
// follower: the ISR manager's input.
func (d *demo) state() error {
	s, version, err := d.c.States.PartitionState(d.tp)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "%s: leader %d, leader epoch %d, ISR %v, state version %d\n", d.tp, s.Leader, s.LeaderEpoch, s.ISR, version)
	cs, ok := d.c.Controller.State(d.tp)
	if !ok {
		return fmt.Errorf("the controller does not know %s", d.tp)
	}
	now := time.Now()
	for _, id := range cs.Replicas {
		srv, ok := d.c.Server(id)
		if !ok {
			fmt.Fprintf(d.out, "  broker %d: stopped\n", id)
			continue
		}
		p, ok := srv.Replicas.Partition(d.tp.Topic, d.tp.Partition)
		if !ok {
			fmt.Fprintf(d.out, "  broker %d: no replica yet\n", id)
			continue
		}
		paused := ""
		if d.paused[id] {
			paused = ", fetching paused"
		}
		fmt.Fprintf(d.out, "  broker %d: %-8s log end %d, high watermark %d%s\n", id, p.Role(), p.Log.EndOffset(), p.HighWatermark(), paused)
		v, leads := p.LeaderView()
		if !leads {
			continue
		}
		for _, f := range slices.Sorted(maps.Keys(v.Followers)) {
			r := v.Followers[f]
			if r.LogEndOffset < 0 {
				fmt.Fprintf(d.out, "    follower %d: has not fetched yet, last caught up %v ago\n", f, now.Sub(r.LastCaughtUpTime).Round(time.Millisecond))
				continue
			}
			fmt.Fprintf(d.out, "    follower %d: log end %d, last caught up %v ago\n", f, r.LogEndOffset, now.Sub(r.LastCaughtUpTime).Round(time.Millisecond))
		}
	}
	return nil
}
