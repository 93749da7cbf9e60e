package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
	"github.com/kafkaworkbook/workbook/stage04-isr-acks/isr"
	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// BenchmarkFailover measures how long the cluster is without leaders
// after it loses a broker, on three broker processes and a three-node
// ZooKeeper ensemble, with 100, 1,000 and 10,000 partitions (replication
// factor 3: every broker holds a replica of every partition and leads
// about a third), in three scenarios:
//
//   - controller-kill: kill -9 of the controller's process. Its session
//     expires after zookeeper.session.timeout.ms (brokertest.Defaults:
//     zktest.SessionTimeout); another broker is elected and gives the
//     partitions the dead one led new leaders.
//   - broker-kill: kill -9 of another broker, which leads about a third.
//   - controlled-shutdown: SIGTERM of a broker (not the controller) that
//     leads about a third: it asks the controller to move its
//     leaderships away, then exits.
//
// Each iteration starts its own ensemble and brokers (brokertest.Defaults:
// 4 s sessions), creates the topics (CreateTopics through kadm, up to
// 1,000 partitions a topic) and waits until every partition is led by its
// full ISR and the cluster is idle, all with the timer stopped; the timer
// runs from the kill (or SIGTERM) until the last moved partition names a
// live leader in ZooKeeper (and, for controlled-shutdown, until the
// process has exited). Setting up 10,000 partitions takes minutes: run
// one iteration per scenario.
//
// At 10,000 partitions every broker holds 10,000 replicas. A broker
// refuses replicas past store.DefaultMaxPartitions: half its RLIMIT_NOFILE
// (10,000 under a 20,000 limit; a replica costs one descriptor, its active
// segment's .log, the indexes being mapped and their files closed), and
// at most what vm.max_map_count allows for two mapped indexes a replica.
// On a machine with a lower limit the benchmark fails at once, quoting
// the broker.
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 1x -timeout 60m ./server/
//	go test -run '^$' -bench 'BenchmarkFailover/^1000$/' -benchtime 1x ./server/
//
// (A bare "100" in -bench also matches 1000 and 10000: anchor it.)
//
// $FAILOVER_PARTITIONS replaces the three sizes (a comma-separated list);
// $FAILOVER_LOGS names a directory to keep the brokers' logs in.
//
// The metrics, in seconds from the kill or SIGTERM unless said otherwise:
//
//	s-to-leaders       the last moved partition's state znode names a live
//	                   leader (its mtime, ZooKeeper's clock: the containers
//	                   share the host's)
//	s-failover-work    s-to-leaders minus the session timeout (kills). It
//	                   can be negative: ZooKeeper expires a session a
//	                   timeout after it last heard from the client, and
//	                   the last ping may precede the kill by a third of it
//	s-after-expiry     s-to-leaders minus s-to-expiry: the controller's
//	                   own work once the dead session's ephemeral znodes
//	                   are gone (kills); a few ms low, as the watch that
//	                   sees the deletion is notified after it happened
//	s-to-expiry        the dead broker's /brokers/ids znode seen deleted by
//	                   a watch (kills)
//	s-to-controller    the new /controller's ctime (controller-kill)
//	s-to-applied       the last "became leader" in the surviving brokers'
//	                   logs: they have applied the LeaderAndIsr
//	s-to-metadata      every surviving broker's Metadata answer names a
//	                   live leader for every moved partition
//	s-to-exit          the process has exited (controlled-shutdown)
//	s-session-timeout  the session timeout the brokers run with
//	moved              partitions whose leader moved
//	fds/broker         most file descriptors a broker process holds once
//	                   every partition is led (/proc/<pid>/fd)
//	fd-limit           its RLIMIT_NOFILE (/proc/<pid>/limits)
//	vmas/broker        most memory mappings of a broker (/proc/<pid>/maps;
//	                   the kernel allows vm.max_map_count)
//	rss-MiB/broker     most resident memory of a broker
func BenchmarkFailover(b *testing.B) {
	scenarios := []struct {
		name string
		run  func(f *failoverBench) map[string]float64
	}{
		{"controller-kill", (*failoverBench).controllerKill},
		{"broker-kill", (*failoverBench).brokerKill},
		{"controlled-shutdown", (*failoverBench).controlledShutdown},
	}
	for _, partitions := range failoverSizes(b) {
		b.Run(strconv.Itoa(partitions), func(b *testing.B) {
			for _, sc := range scenarios {
				b.Run(sc.name, func(b *testing.B) {
					sums := map[string]float64{}
					for range b.N {
						for k, v := range failoverIteration(b, partitions, sc.run) {
							sums[k] += v
						}
					}
					for _, k := range slices.Sorted(maps.Keys(sums)) {
						b.ReportMetric(sums[k]/float64(b.N), k)
					}
				})
			}
		})
	}
}

// BenchmarkZooKeeperStateWrites is the floor under the failover figures:
// the same three-node ensemble, no broker, one session writing partition
// state znodes as the controller does (kafkazk.UpdatePartitionStates:
// one fenced multi per partition, kafkazk's pipelining) and reading them
// back as a new controller loads them (kafkazk.PartitionStates), and what
// batching the writes (100 to a fenced multi) or keeping more reads in
// flight (1,024) would give.
//
//	go test -run '^$' -bench BenchmarkZooKeeperStateWrites -benchtime 1x ./server/
func BenchmarkZooKeeperStateWrites(b *testing.B) {
	for _, partitions := range failoverSizes(b) {
		b.Run(strconv.Itoa(partitions), func(b *testing.B) {
			b.StopTimer()
			ens := zktest.StartEnsemble(b, 3)
			zkc, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(zkc.Close)
			if err := zkc.CreateTopLevelPaths(); err != nil {
				b.Fatal(err)
			}
			epoch, err := zkc.ElectController(0, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			created := map[commitlog.TopicPartition]isr.PartitionState{}
			var tps []commitlog.TopicPartition
			for i := 0; i*1000 < partitions; i++ {
				topic := fmt.Sprintf("bench-%d", i)
				if _, err := zkc.Conn().Create(kafkazk.TopicPath(topic), []byte("{}"), 0, zk.WorldACL(zk.PermAll)); err != nil {
					b.Fatal(err)
				}
				for p := range int32(min(1000, partitions-i*1000)) {
					tp := commitlog.TopicPartition{Topic: topic, Partition: p}
					tps = append(tps, tp)
					created[tp] = isr.PartitionState{ControllerEpoch: epoch.Epoch, Leader: 0, ISR: []int32{0, 1, 2}}
				}
			}
			if err := zkc.CreatePartitionStates(epoch, created); err != nil {
				b.Fatal(err)
			}
			var write, read, wide, batched time.Duration
			for i := range b.N {
				states, err := zkc.PartitionStates(tps...)
				if err != nil || len(states) != len(tps) {
					b.Fatalf("read %d of %d states: %v", len(states), len(tps), err)
				}
				for tp, s := range states {
					s.Leader, s.LeaderEpoch, s.ISR = int32(1+i%2), s.LeaderEpoch+1, []int32{1, 2}
					states[tp] = s
				}
				b.StartTimer()
				began := time.Now()
				written, failed, err := zkc.UpdatePartitionStates(epoch, states)
				write += time.Since(began)
				began = time.Now()
				_, rerr := zkc.PartitionStates(tps...)
				read += time.Since(began)
				began = time.Now()
				_, werr := readStatesN(zkc.Conn(), tps, 1024)
				wide += time.Since(began)
				b.StopTimer()
				if werr != nil {
					b.Fatal(werr)
				}
				if err != nil || len(failed) > 0 || len(written) != len(tps) || rerr != nil {
					b.Fatalf("wrote %d of %d states: %v %v %v", len(written), len(tps), err, failed, rerr)
				}
				// What batching would give: the same writes, 100 to a
				// fenced multi, 16 multis in flight.
				for tp, v := range written {
					s := states[tp]
					s.ZkVersion, s.LeaderEpoch = v, s.LeaderEpoch+1
					states[tp] = s
				}
				b.StartTimer()
				began = time.Now()
				err = multiWrite(zkc.Conn(), epoch, states, 100, 16)
				batched += time.Since(began)
				b.StopTimer()
				if err != nil {
					b.Fatalf("batched writes: %v", err)
				}
			}
			b.ReportMetric(batched.Seconds()/float64(b.N), "s-write-all-multi100")
			b.ReportMetric(write.Seconds()/float64(b.N), "s-write-all")
			b.ReportMetric(read.Seconds()/float64(b.N), "s-read-all")
			b.ReportMetric(wide.Seconds()/float64(b.N), "s-read-all-1024")
			b.ReportMetric(float64(len(tps)*b.N)/write.Seconds(), "writes/s")
			b.ReportMetric(float64(len(tps)*b.N)/read.Seconds(), "reads/s")
		})
	}
}

// multiWrite writes states as fenced multis of per ops each, inflight at
// a time: what the controller's writes would cost batched.
func multiWrite(conn *zk.Conn, e kafkazk.ControllerEpoch, states map[commitlog.TopicPartition]kafkazk.VersionedState, per, inflight int) error {
	var batches [][]any
	var ops []any
	for tp, s := range states {
		if len(ops) == 0 {
			ops = append(ops, &zk.CheckVersionRequest{Path: kafkazk.ControllerEpochPath, Version: e.ZkVersion})
		}
		ops = append(ops, &zk.SetDataRequest{Path: kafkazk.PartitionStatePath(tp), Data: s.Encode(), Version: s.ZkVersion})
		if len(ops) == per+1 {
			batches = append(batches, ops)
			ops = nil
		}
	}
	if len(ops) > 0 {
		batches = append(batches, ops)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, inflight)
	)
	for _, ops := range batches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := conn.Multi(ops...); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// failoverSizes are the partition counts: 100, 1,000 and 10,000, or
// those listed in $FAILOVER_PARTITIONS (e.g. "5000", to see how the
// figures grow below a broker's partition budget).
func failoverSizes(b *testing.B) []int {
	env := os.Getenv("FAILOVER_PARTITIONS")
	if env == "" {
		return []int{100, 1000, 10000}
	}
	var out []int
	for f := range strings.SplitSeq(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("FAILOVER_PARTITIONS=%q: %q is not a partition count", env, f)
		}
		out = append(out, n)
	}
	return out
}

// failoverIteration sets a cluster up with the timer stopped, runs one
// measurement with it running, and tears the cluster down.
func failoverIteration(b *testing.B, partitions int, run func(*failoverBench) map[string]float64) map[string]float64 {
	b.StopTimer()
	s := &scope{TB: b}
	defer s.close()
	f := setupFailover(s, partitions)
	f.b = b
	defer f.keepLogs() // before s.close removes them, also after a failure
	m := f.resources()
	b.StartTimer()
	maps.Copy(m, run(f))
	b.StopTimer()
	m["s-session-timeout"] = zktest.SessionTimeout.Seconds()
	f.checkAllLed()
	return m
}

// scope is a testing.TB whose cleanups run when the iteration ends
// (close) rather than when the benchmark does, so that a second
// iteration does not run next to the first one's ensemble and brokers.
type scope struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (s *scope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *scope) close() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// failoverBench is one iteration's cluster, its topics led and idle.
type failoverBench struct {
	b          *testing.B // its timer
	tb         testing.TB // the iteration's scope
	c          *brokertest.Cluster
	zk         *kafkazk.Client
	topics     []string
	tps        []commitlog.TopicPartition
	states     map[commitlog.TopicPartition]partitionState // as the measurement starts
	controller int32
	pids       map[int32]int
}

// partitionState is a state znode as the benchmark reads it.
type partitionState struct {
	isr.PartitionState
	version int32
}

// setupFailover starts the ensemble and three brokers, creates the
// topics and waits until every partition is led by its full ISR and the
// cluster is idle (see idle).
func setupFailover(tb testing.TB, partitions int) *failoverBench {
	tb.Helper()
	ens := zktest.StartEnsemble(tb, 3)
	c := brokertest.Start(tb, ens, 3, nil)
	zkc, err := kafkazk.Connect(strings.Join(ens.Addrs(), ","), kafkazk.Options{SessionTimeout: zktest.SessionTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatalf("observer session: %v", err)
	}
	tb.Cleanup(zkc.Close)
	f := &failoverBench{tb: tb, c: c, zk: zkc, pids: map[int32]int{}}

	// Up to 1,000 partitions a topic, all created by one request.
	perTopic := min(partitions, 1000)
	for i := 0; i*perTopic < partitions; i++ {
		f.topics = append(f.topics, fmt.Sprintf("bench-%d", i))
	}
	for _, t := range f.topics {
		for p := range int32(perTopic) {
			f.tps = append(f.tps, commitlog.TopicPartition{Topic: t, Partition: p})
		}
	}
	setupTimeout := 3*time.Minute + time.Duration(partitions)*60*time.Millisecond
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RequestTimeoutOverhead(time.Minute))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(setupTimeout.Milliseconds()))
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout+time.Minute)
	defer cancel()
	began := time.Now()
	created, err := adm.CreateTopics(ctx, int32(perTopic), 3, nil, f.topics...)
	if err != nil {
		tb.Fatalf("CreateTopics: %v", err)
	}
	for _, t := range f.topics {
		// REQUEST_TIMED_OUT: answered before every partition was led on
		// the broker that took the request; the wait below covers it.
		if err := created[t].Err; err != nil && !errors.Is(err, kerr.RequestTimedOut) {
			tb.Fatalf("CreateTopics %s: %v", t, err)
		}
	}
	tb.Logf("%d partitions in %d topics: CreateTopics answered after %v", partitions, len(f.topics), time.Since(began).Round(time.Millisecond))

	// Every partition led by its full ISR, and the cluster idle: no state
	// znode changes, no ISR change notification waits for the controller,
	// the controller's event queue is empty (a request that goes through
	// it is answered at once), and every broker's metadata says what the
	// state znodes say. Otherwise the measurement would start behind the
	// setup's backlog (at 10,000 partitions the followers lag while their
	// brokers create the logs, leaders shrink and expand ISRs, and the
	// controller works through the notifications for a minute or more).
	deadline := time.Now().Add(setupTimeout)
	var last string
	for {
		if time.Now().After(deadline) {
			tb.Fatalf("the cluster is not idle with every partition led by a full ISR after %v: %s", setupTimeout, last)
		}
		f.failOnRefusedReplicas()
		time.Sleep(time.Second)
		if last = f.idle(ctx); last == "" {
			break
		}
	}
	tb.Logf("every partition led by a full ISR and the cluster idle %v after CreateTopics", time.Since(began).Round(time.Millisecond))
	for id := range int32(3) {
		f.pids[id] = brokerPid(c.Broker(id))
	}
	return f
}

// idle returns "" if every partition is led by its full ISR and the
// cluster is idle (see setupFailover), and what is not so otherwise. It
// sets f.states and f.controller.
func (f *failoverBench) idle(ctx context.Context) string {
	conn := f.zk.Conn()
	before, err := readStates(conn, f.tps)
	if err != nil {
		return err.Error()
	}
	for tp, s := range before {
		if s.Leader < 0 || len(s.ISR) != 3 {
			return fmt.Sprintf("%s: leader %d, ISR %v", tp, s.Leader, s.ISR)
		}
	}
	pending, _, err := conn.Children(kafkazk.IsrChangeNotificationPath)
	if err != nil || len(pending) > 0 {
		return fmt.Sprintf("%d ISR change notifications pending (%v)", len(pending), err)
	}
	id, ok, err := f.zk.ControllerID()
	if err != nil || !ok {
		return fmt.Sprintf("no controller (%v)", err)
	}
	if d, err := f.controllerBarrier(ctx, id); err != nil || d > 500*time.Millisecond {
		return fmt.Sprintf("controller %d's event queue answered after %v (%v)", id, d.Round(time.Millisecond), err)
	}
	for b := range int32(3) {
		meta := f.metadataStates(ctx, f.c.Broker(b).Addr())
		for tp, s := range before {
			if m, ok := meta[tp]; !ok || m.Leader != s.Leader || !slices.Equal(m.ISR, s.ISR) {
				return fmt.Sprintf("broker %d's metadata for %s is leader %d ISR %v, the state znode's leader %d ISR %v",
					b, tp, m.Leader, m.ISR, s.Leader, s.ISR)
			}
		}
	}
	after, err := readStates(conn, f.tps)
	if err != nil {
		return err.Error()
	}
	if !sameVersions(before, after) {
		return "state znodes still changing"
	}
	f.states, f.controller = after, id
	return ""
}

// controllerBarrier sends the controller a ControlledShutdown for a
// broker that does not exist: harmless (STALE_BROKER_EPOCH), but it is
// answered only once the controller's event queue has reached it, so its
// latency is the queue's backlog.
func (f *failoverBench) controllerBarrier(ctx context.Context, id int32) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := protocol.Dial(rctx, f.c.Broker(id).Addr(), "failover-bench")
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrControlledShutdownRequest()
	req.BrokerID, req.BrokerEpoch = 1000, 0
	began := time.Now()
	resp, err := cl.Request(rctx, req)
	d := time.Since(began)
	if err != nil {
		return d, err
	}
	if code := resp.(*kmsg.ControlledShutdownResponse).ErrorCode; code != kerr.StaleBrokerEpoch.Code {
		return d, fmt.Errorf("error code %d, want STALE_BROKER_EPOCH", code)
	}
	return d, nil
}

// failOnRefusedReplicas fails the benchmark at once if a broker refused
// to create replicas because of its partition budget
// (store.ErrTooManyPartitions): the wait for full ISRs would never end.
func (f *failoverBench) failOnRefusedReplicas() {
	for id := range int32(3) {
		b := f.c.Broker(id)
		if line := firstLine(b.Log(), "store: too many partitions"); line != "" {
			f.tb.Fatalf("broker %d refuses replicas past its partition budget (store.DefaultMaxPartitions: half of "+
				"RLIMIT_NOFILE, %s here, within vm.max_map_count): %s", id, fdLimit(brokerPid(b)), line)
		}
	}
}

// sameVersions reports whether no state znode changed between two reads.
func sameVersions(a, b map[commitlog.TopicPartition]partitionState) bool {
	if len(a) != len(b) {
		return false
	}
	for tp, s := range a {
		if b[tp].version != s.version {
			return false
		}
	}
	return true
}

// ledBy lists the partitions broker id leads as the measurement starts.
func (f *failoverBench) ledBy(id int32) []commitlog.TopicPartition {
	var out []commitlog.TopicPartition
	for _, tp := range f.tps {
		if f.states[tp].Leader == id {
			out = append(out, tp)
		}
	}
	return out
}

// otherThanController returns a broker that is not the controller.
func (f *failoverBench) otherThanController() int32 {
	for id := range int32(3) {
		if id != f.controller {
			return id
		}
	}
	panic("unreachable")
}

// controllerKill: kill -9 of the controller.
func (f *failoverBench) controllerKill() map[string]float64 {
	victim := f.controller
	moved := f.ledBy(victim)
	live := func(id int32) bool { return id >= 0 && id != victim }
	w := f.watchMoves(moved, live)
	expired := watchDeletion(f.zk.Conn(), kafkazk.BrokerPath(victim))

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	meta := f.watchMetadata(ctx, moved, victim)
	f.c.Broker(victim).Kill()

	// The new controller: /controller names another broker.
	var ctime time.Time
	var newController int32
	for {
		data, stat, err := f.zk.Conn().Get(kafkazk.ControllerPath)
		if err == nil {
			if info, err := kafkazk.DecodeControllerInfo(data); err == nil && info.BrokerID != victim {
				ctime, newController = time.UnixMilli(stat.Ctime), info.BrokerID
				break
			}
		}
		if ctx.Err() != nil {
			f.tb.Fatalf("no new controller within 10 minutes of the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	last := f.waitMoves(ctx, w, "the kill")
	f.b.StopTimer()
	m := f.killMetrics(ctx, start, last, expired, moved, meta)
	m["s-to-controller"] = ctime.Sub(start).Seconds()
	f.tb.Logf("kill -9 of controller %d: broker %d elected %.3f s after (session timeout %v), %d partitions led elsewhere after %.3f s "+
		"(%.3f s after the session's ephemeral znodes went); brokers applied it after %.3f s, their metadata after %.3f s",
		victim, newController, m["s-to-controller"], zktest.SessionTimeout, len(moved), m["s-to-leaders"], m["s-after-expiry"],
		m["s-to-applied"], m["s-to-metadata"])
	return m
}

// brokerKill: kill -9 of a broker that is not the controller.
func (f *failoverBench) brokerKill() map[string]float64 {
	victim := f.otherThanController()
	moved := f.ledBy(victim)
	live := func(id int32) bool { return id >= 0 && id != victim }
	w := f.watchMoves(moved, live)
	expired := watchDeletion(f.zk.Conn(), kafkazk.BrokerPath(victim))

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	meta := f.watchMetadata(ctx, moved, victim)
	f.c.Broker(victim).Kill()
	last := f.waitMoves(ctx, w, "the kill")
	f.b.StopTimer()
	m := f.killMetrics(ctx, start, last, expired, moved, meta)
	f.tb.Logf("kill -9 of broker %d (controller %d): its %d partitions led elsewhere after %.3f s (session timeout %v; %.3f s after its "+
		"registration went); brokers applied it after %.3f s, their metadata after %.3f s",
		victim, f.controller, len(moved), m["s-to-leaders"], zktest.SessionTimeout, m["s-after-expiry"], m["s-to-applied"], m["s-to-metadata"])
	return m
}

// killMetrics gathers a kill's figures once the state znodes are done.
func (f *failoverBench) killMetrics(ctx context.Context, start, last time.Time, expired func() time.Time,
	moved []commitlog.TopicPartition, meta func() time.Time) map[string]float64 {
	m := map[string]float64{"moved": float64(len(moved))}
	m["s-to-leaders"] = last.Sub(start).Seconds()
	m["s-failover-work"] = m["s-to-leaders"] - zktest.SessionTimeout.Seconds()
	if e := expired(); !e.IsZero() {
		m["s-to-expiry"] = e.Sub(start).Seconds()
		m["s-after-expiry"] = last.Sub(e).Seconds()
	}
	m["s-to-metadata"] = waitTime(ctx, f.tb, meta, "every survivor's metadata").Sub(start).Seconds()
	m["s-to-applied"] = f.lastBecameLeader(start).Sub(start).Seconds()
	return m
}

// controlledShutdown: SIGTERM of a broker, not the controller, that
// leads about a third.
func (f *failoverBench) controlledShutdown() map[string]float64 {
	victim := f.otherThanController()
	moved := f.ledBy(victim)
	live := func(id int32) bool { return id >= 0 && id != victim }
	w := f.watchMoves(moved, live)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	meta := f.watchMetadata(ctx, moved, victim)
	f.c.Broker(victim).Stop(5 * time.Minute)
	exited := time.Now()
	last := f.waitMoves(ctx, w, "SIGTERM")
	f.b.StopTimer()
	m := map[string]float64{"moved": float64(len(moved))}
	m["s-to-leaders"] = last.Sub(start).Seconds()
	m["s-to-exit"] = exited.Sub(start).Seconds()
	m["s-to-metadata"] = waitTime(ctx, f.tb, meta, "every survivor's metadata").Sub(start).Seconds()
	m["s-to-applied"] = f.lastBecameLeader(start).Sub(start).Seconds()
	f.tb.Logf("SIGTERM to broker %d (controller %d): its %d partitions led elsewhere after %.3f s, brokers applied it after %.3f s, "+
		"their metadata after %.3f s; the process exited after %.3f s",
		victim, f.controller, len(moved), m["s-to-leaders"], m["s-to-applied"], m["s-to-metadata"], m["s-to-exit"])
	return m
}

// moveWatch follows state znodes with data watches until each names a
// leader that ok accepts.
type moveWatch struct {
	mu    sync.Mutex
	left  int
	last  time.Time // the latest mtime among the accepted states
	done  chan struct{}
	err   error
	armed sync.WaitGroup
}

// watchMoves starts following tps and returns once every watch is armed
// (so that arming does not load ZooKeeper during the measurement).
func (f *failoverBench) watchMoves(tps []commitlog.TopicPartition, ok func(leader int32) bool) *moveWatch {
	w := &moveWatch{left: len(tps), done: make(chan struct{})}
	if len(tps) == 0 {
		close(w.done)
		return w
	}
	conn := f.zk.Conn()
	sem := make(chan struct{}, 256)
	w.armed.Add(len(tps))
	for _, tp := range tps {
		go func() {
			p := kafkazk.PartitionStatePath(tp)
			first := true
			arm := func() {
				if first {
					first = false
					w.armed.Done()
				}
			}
			defer arm()
			for {
				sem <- struct{}{}
				data, stat, ch, err := conn.GetW(p)
				<-sem
				if err != nil {
					if errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrConnectionClosed) {
						return
					}
					w.fail(fmt.Errorf("%s: %w", p, err))
					return
				}
				arm()
				s, err := isr.DecodePartitionState(data)
				if err != nil {
					w.fail(err)
					return
				}
				if ok(s.Leader) {
					w.accepted(time.UnixMilli(stat.Mtime))
					return
				}
				<-ch // a change, or the watch was lost with the connection: read again
			}
		}()
	}
	w.armed.Wait()
	return w
}

func (w *moveWatch) accepted(mtime time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if mtime.After(w.last) {
		w.last = mtime
	}
	w.left--
	if w.left == 0 {
		close(w.done)
	}
}

func (w *moveWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// waitMoves waits until every followed partition is accepted and returns
// the mtime of the last state written.
func (f *failoverBench) waitMoves(ctx context.Context, w *moveWatch, since string) time.Time {
	for {
		select {
		case <-w.done:
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.last
		case <-ctx.Done():
			w.mu.Lock()
			defer w.mu.Unlock()
			f.tb.Fatalf("%d partitions still without a new leader long after %s (err %v)", w.left, since, w.err)
		case <-time.After(100 * time.Millisecond):
			w.mu.Lock()
			err := w.err
			w.mu.Unlock()
			if err != nil {
				f.tb.Fatalf("following the state znodes: %v", err)
			}
		}
	}
}

// watchDeletion returns when path was seen deleted (zero until then).
func watchDeletion(conn *zk.Conn, path string) func() time.Time {
	var mu sync.Mutex
	var at time.Time
	go func() {
		for {
			exists, _, ch, err := conn.ExistsW(path)
			if err != nil {
				return
			}
			if !exists {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
			if ev := <-ch; ev.Type == zk.EventNodeDeleted {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// watchMetadata polls every broker but victim with Metadata requests
// until each names a live leader (not victim) for every one of tps, and
// returns when that was first seen (zero until then).
func (f *failoverBench) watchMetadata(ctx context.Context, tps []commitlog.TopicPartition, victim int32) func() time.Time {
	var mu sync.Mutex
	var at time.Time
	var addrs []string
	for id := range int32(3) {
		if id != victim {
			addrs = append(addrs, f.c.Broker(id).Addr())
		}
	}
	pause := 20 * time.Millisecond
	if len(f.tps) > 1000 {
		pause = 100 * time.Millisecond // a 10,000-partition answer costs the broker too
	}
	go func() {
		for ctx.Err() == nil {
			all := true
			for _, addr := range addrs {
				states := f.metadataStates(ctx, addr)
				for _, tp := range tps {
					s, ok := states[tp]
					all = all && ok && s.Leader >= 0 && s.Leader != victim
				}
			}
			if all {
				mu.Lock()
				at = time.Now()
				mu.Unlock()
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// waitTime waits until get returns a time, or fails.
func waitTime(ctx context.Context, tb testing.TB, get func() time.Time, what string) time.Time {
	for {
		if t := get(); !t.IsZero() {
			return t
		}
		if ctx.Err() != nil {
			tb.Fatalf("%s: not seen in time", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metadataStates asks the broker at addr for the benchmark's topics and
// returns each partition's leader and ISR (none on error).
func (f *failoverBench) metadataStates(ctx context.Context, addr string) map[commitlog.TopicPartition]isr.PartitionState {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := protocol.Dial(rctx, addr, "failover-bench")
	if err != nil {
		return nil
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range f.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.Request(rctx, req)
	if err != nil {
		return nil
	}
	out := map[commitlog.TopicPartition]isr.PartitionState{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 {
				out[commitlog.TopicPartition{Topic: *t.Topic, Partition: p.Partition}] = isr.PartitionState{Leader: p.Leader, ISR: p.ISR}
			}
		}
	}
	return out
}

// lastBecameLeader is the time of the last "became leader" a running
// broker logged after since: when the survivors had applied the
// controller's LeaderAndIsr for the moved partitions.
func (f *failoverBench) lastBecameLeader(since time.Time) time.Time {
	last := since
	for id := range int32(3) {
		b := f.c.Broker(id)
		if !b.Running() {
			continue
		}
		var first, end time.Time
		n := 0
		sc := bufio.NewScanner(strings.NewReader(b.Log()))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, `msg="became leader"`) || !strings.HasPrefix(line, "time=") {
				continue
			}
			stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			t, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil || !t.After(since) {
				continue
			}
			if n == 0 {
				first = t
			}
			n++
			end = t
		}
		if n > 0 {
			f.tb.Logf("broker %d became leader of %d partitions from %.3f s to %.3f s", id, n,
				first.Sub(since).Seconds(), end.Sub(since).Seconds())
			if end.After(last) {
				last = end
			}
		}
	}
	return last
}

// keepLogs copies the brokers' logs to $FAILOVER_LOGS, if set, before
// the iteration's temporary directory goes.
func (f *failoverBench) keepLogs() {
	dir := os.Getenv("FAILOVER_LOGS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.tb.Logf("FAILOVER_LOGS: %v", err)
		return
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(f.b.Name())
	for id := range int32(3) {
		p := filepath.Join(dir, fmt.Sprintf("%s-broker-%d.log", name, id))
		if err := os.WriteFile(p, []byte(f.c.Broker(id).Log()), 0o644); err != nil {
			f.tb.Logf("FAILOVER_LOGS: %v", err)
		}
	}
}

// checkAllLed checks, after the measurement, that every partition (not
// only the moved ones) names a running broker as its leader.
func (f *failoverBench) checkAllLed() {
	states, err := readStates(f.zk.Conn(), f.tps)
	if err != nil {
		f.tb.Fatalf("reading the states after the measurement: %v", err)
	}
	for tp, s := range states {
		if s.Leader < 0 || !f.c.Broker(s.Leader).Running() {
			f.tb.Fatalf("%s is led by %d after the measurement", tp, s.Leader)
		}
	}
}

// readStates reads the state znodes of tps, many requests in flight on
// the one session.
func readStates(conn *zk.Conn, tps []commitlog.TopicPartition) (map[commitlog.TopicPartition]partitionState, error) {
	return readStatesN(conn, tps, 256)
}

// readStatesN is readStates with inflight requests in flight.
func readStatesN(conn *zk.Conn, tps []commitlog.TopicPartition, inflight int) (map[commitlog.TopicPartition]partitionState, error) {
	var (
		mu   sync.Mutex
		out  = make(map[commitlog.TopicPartition]partitionState, len(tps))
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, inflight)
	)
	for _, tp := range tps {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			data, stat, err := conn.Get(kafkazk.PartitionStatePath(tp))
			var s isr.PartitionState
			if err == nil {
				s, err = isr.DecodePartitionState(data)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if len(errs) < 3 {
					errs = append(errs, fmt.Errorf("%s: %w", tp, err))
				}
				return
			}
			out[tp] = partitionState{PartitionState: s, version: stat.Version}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// resources reports the brokers' descriptors, mappings and memory once
// every partition is led, and logs what the descriptors are.
func (f *failoverBench) resources() map[string]float64 {
	m := map[string]float64{}
	for id := range int32(3) {
		pid := f.pids[id]
		kinds, total := fdKinds(pid)
		vmas := countLines(fmt.Sprintf("/proc/%d/maps", pid))
		rss := statusKB(pid, "VmRSS") / 1024
		limit := fdLimit(pid)
		f.tb.Logf("broker %d (pid %d): %d descriptors (%s), limit %s; %d mappings (vm.max_map_count %s); %.0f MiB resident",
			id, pid, total, kinds, limit, vmas, strings.TrimSpace(readFile("/proc/sys/vm/max_map_count")), rss)
		m["fds/broker"] = max(m["fds/broker"], float64(total))
		m["vmas/broker"] = max(m["vmas/broker"], float64(vmas))
		m["rss-MiB/broker"] = max(m["rss-MiB/broker"], rss)
		if n, err := strconv.Atoi(strings.Fields(limit + " 0")[0]); err == nil {
			m["fd-limit"] = float64(n)
		}
	}
	return m
}

// brokerPid finds a broker's process by its log directory on its command
// line (brokertest does not expose the pid).
func brokerPid(b *brokertest.Broker) int {
	want := "log.dirs=" + b.LogDir()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(cmdline), "\x00"), want) {
			return pid
		}
	}
	return -1
}

// fdKinds counts a process's descriptors by what they are.
func fdKinds(pid int) (string, int) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error(), 0
	}
	counts := map[string]int{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		kind := "other"
		switch {
		case err != nil:
			kind = "gone"
		case strings.HasSuffix(target, ".log"):
			kind = "segment .log"
		case strings.HasSuffix(target, ".index"), strings.HasSuffix(target, ".timeindex"):
			kind = "index"
		case strings.HasPrefix(target, "socket:"):
			kind = "socket"
		case strings.HasPrefix(target, "pipe:"):
			kind = "pipe"
		case strings.HasPrefix(target, "anon_inode:"):
			kind = target
		case strings.HasSuffix(target, ".lock"):
			kind = ".lock"
		}
		counts[kind]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", "), len(entries)
}

// fdLimit is a process's "Max open files" soft and hard limits.
func fdLimit(pid int) string {
	for line := range strings.Lines(readFile(fmt.Sprintf("/proc/%d/limits", pid))) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " (hard " + f[1] + ")"
			}
		}
	}
	return "?"
}

// statusKB reads a "kB" field of /proc/<pid>/status.
func statusKB(pid int, key string) float64 {
	for line := range strings.Lines(readFile(fmt.Sprintf("/proc/%d/status", pid))) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseFloat(f[0], 64)
				return v
			}
		}
	}
	return 0
}

func countLines(path string) int { return strings.Count(readFile(path), "\n") }

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// firstLine returns the first line of text that contains s.
func firstLine(text, s string) string {
	i := strings.Index(text, s)
	if i < 0 {
		return ""
	}
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		return text[start:]
	}
	return text[start : i+end]
}
