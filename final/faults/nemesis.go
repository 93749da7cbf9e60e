package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/final/cluster"
	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Kind is a kind of fault the nemesis injects.
type Kind string

// The faults, each with the way it is healed.
const (
	LeaderKill     Kind = "leader-kill"     // kill -9 of a partition's leader; start it again
	ControllerKill Kind = "controller-kill" // kill -9 of the controller; start it again
	FollowerKill   Kind = "follower-kill"   // kill -9 of a follower of a partition; start it again
	Bounce         Kind = "bounce"          // SIGTERM to a leader (controlled shutdown), then start
	LeaderPause    Kind = "leader-pause"    // SIGSTOP to a leader past the ZooKeeper session timeout, then SIGCONT
	FollowerPause  Kind = "follower-pause"  // SIGSTOP to a follower past the ZooKeeper session timeout, then SIGCONT
	Disconnect     Kind = "disconnect"      // a leader off the network (from brokers, ZooKeeper and clients); back on
	LeaderCut      Kind = "leader-cut"      // a leader cut from its followers only (iptables); healed
	ZooKeeperKill  Kind = "zookeeper-kill"  // kill -9 of one ZooKeeper server; start it again
	QuorumLoss     Kind = "quorum-loss"     // kill -9 of two of three ZooKeeper servers; start both again
	FullRestart    Kind = "full-restart"    // every broker stopped (SIGTERM), then every one started
)

// Kinds are every kind of fault, in the order the chapter lists them.
var Kinds = []Kind{LeaderKill, ControllerKill, FollowerKill, Bounce, LeaderPause, FollowerPause, Disconnect, LeaderCut,
	ZooKeeperKill, QuorumLoss, FullRestart}

// Fault is one injected fault and what followed it. Times are since the
// workload started.
type Fault struct {
	Kind   Kind
	Target string // the container(s), and the partition it was chosen for
	// Observed says what the cluster was seen doing while the fault held
	// (a new leader, an ISR shrunk), or what it failed to do in time.
	Observed string
	Start    time.Duration // injected
	Heal     time.Duration // undone
	// Recovered is when every broker served again and every partition
	// had a leader and its full ISR (zero if that never came).
	Recovered time.Duration
	Gap       Gap   // the producers' longest wait for an acknowledgement, Start to Recovered
	Err       error // the fault could not be injected, or the cluster did not recover
}

// Nemesis injects faults into a cluster, one at a time, and heals each
// before the next.
type Nemesis struct {
	C     *cluster.Cluster
	W     *Workload
	Topic string
	Rand  *rand.Rand
	Logf  func(string, ...any)
	// Hold is how long a fault lasts at least, once the cluster was seen
	// reacting to it (default 4 s): long enough for the producers to
	// meet it.
	Hold time.Duration
	// SessionTimeout is the brokers' zookeeper.session.timeout.ms: a pause
	// lasts longer than it.
	SessionTimeout time.Duration
	// RecoverTimeout bounds the wait for a healthy cluster after a heal
	// (default 3 minutes).
	RecoverTimeout time.Duration
}

// observeTimeout bounds the wait for the cluster to react to a fault: a
// leader elected elsewhere, an ISR shrunk.
const observeTimeout = 60 * time.Second

// Inject injects one fault of kind, holds it, heals it, and waits for the
// cluster to recover.
func (n *Nemesis) Inject(ctx context.Context, kind Kind) Fault {
	if n.Hold == 0 {
		n.Hold = 4 * time.Second
	}
	if n.SessionTimeout == 0 {
		n.SessionTimeout = 6 * time.Second
	}
	if n.RecoverTimeout == 0 {
		n.RecoverTimeout = 3 * time.Minute
	}
	f := Fault{Kind: kind}
	md, err := n.metadata(ctx, "")
	if err != nil {
		f.Err = fmt.Errorf("metadata before the fault: %w", err)
		return f
	}
	p := int32(n.Rand.IntN(len(md.Topics[n.Topic].Partitions)))
	part := md.Topics[n.Topic].Partitions[p]
	leader := n.C.Broker(int(part.Leader))
	var followers []cluster.Node
	for _, r := range part.Replicas {
		if r != part.Leader {
			followers = append(followers, n.C.Broker(int(r)))
		}
	}
	zks := n.C.ZooKeepers()

	f.Start = n.W.Since()
	var heal func() error
	switch kind {
	case LeaderKill, Bounce, LeaderPause, Disconnect:
		f.Target = fmt.Sprintf("%s (leader of %s-%d)", leader.Name, n.Topic, p)
		inject := map[Kind]func(context.Context, string) error{LeaderKill: n.C.Kill, Bounce: n.C.Stop, LeaderPause: n.C.Pause, Disconnect: n.C.Disconnect}[kind]
		undo := map[Kind]func(context.Context, string) error{LeaderKill: n.C.Start, Bounce: n.C.Start, LeaderPause: n.C.Resume, Disconnect: n.C.Connect}[kind]
		if err = inject(ctx, leader.Name); err != nil {
			break
		}
		heal = func() error { return undo(ctx, leader.Name) }
		hold := n.Hold
		if kind == LeaderPause {
			// A GC pause longer than the session: the ensemble expires the
			// session and the controller moves the leaderships away.
			hold = max(hold, n.SessionTimeout+2*time.Second)
		}
		f.Observed, err = n.observe(ctx, hold, "a new leader of partition "+fmt.Sprint(p), func() (string, error) {
			md, err := n.metadata(ctx, leader.Name)
			if err != nil {
				return "", err
			}
			l := md.Topics[n.Topic].Partitions[p].Leader
			if l < 0 || l == part.Leader {
				return "", fmt.Errorf("leader is %d", l)
			}
			return fmt.Sprintf("leader %d -> %d", part.Leader, l), nil
		})
	case FollowerKill, FollowerPause:
		fo := followers[n.Rand.IntN(len(followers))]
		f.Target = fmt.Sprintf("%s (follower of %s-%d)", fo.Name, n.Topic, p)
		inject, undo, hold := n.C.Kill, n.C.Start, n.Hold
		if kind == FollowerPause {
			// Its session expires: the controller drops it from the ISRs.
			inject, undo, hold = n.C.Pause, n.C.Resume, max(hold, n.SessionTimeout+2*time.Second)
		}
		if err = inject(ctx, fo.Name); err != nil {
			break
		}
		heal = func() error { return undo(ctx, fo.Name) }
		f.Observed, err = n.observe(ctx, hold, "the ISR without the follower", func() (string, error) {
			md, err := n.metadata(ctx, fo.Name)
			if err != nil {
				return "", err
			}
			isr := md.Topics[n.Topic].Partitions[p].ISR
			if slices.Contains(isr, int32(fo.ID)) {
				return "", fmt.Errorf("ISR %v", isr)
			}
			return fmt.Sprintf("ISR %v -> %v", sorted(part.ISR), sorted(isr)), nil
		})
	case ControllerKill:
		ctrl := md.Controller
		if ctrl < 0 {
			err = errors.New("no controller")
			break
		}
		b := n.C.Broker(int(ctrl))
		f.Target = b.Name + " (controller)"
		if err = n.C.Kill(ctx, b.Name); err != nil {
			break
		}
		heal = func() error { return n.C.Start(ctx, b.Name) }
		f.Observed, err = n.observe(ctx, n.Hold, "a new controller", func() (string, error) {
			md, err := n.metadata(ctx, b.Name)
			if err != nil {
				return "", err
			}
			if md.Controller < 0 || md.Controller == ctrl {
				return "", fmt.Errorf("controller is %d", md.Controller)
			}
			return fmt.Sprintf("controller %d -> %d", ctrl, md.Controller), nil
		})
	case LeaderCut:
		var names []string
		for _, fo := range followers {
			names = append(names, fo.Name)
		}
		f.Target = fmt.Sprintf("%s (leader of %s-%d) cut from %s", leader.Name, n.Topic, p, strings.Join(names, ", "))
		if err = n.C.Cut(ctx, leader.Name, names...); err != nil {
			break
		}
		heal = func() error { return n.C.Heal(ctx) }
		// The leader still holds its ZooKeeper session: it stays leader
		// and, as records keep coming that its followers cannot fetch,
		// shrinks the ISR to itself after replica.lag.time.max.ms. With
		// min.insync.replicas=2 it then refuses acks=all writes
		// (NOT_ENOUGH_REPLICAS) until the heal: nothing acknowledged can
		// be lost with it. Read from the partition's state znode, where
		// the leader writes its ISR: the brokers' metadata learns it from
		// the controller, which may be on the other side of the cut.
		f.Observed, err = n.observe(ctx, n.Hold, "the ISR shrunk to the leader", func() (string, error) {
			leaderNow, isr, err := zkPartitionState(n.C, n.Topic, p)
			if err != nil {
				return "", err
			}
			if leaderNow != part.Leader || len(isr) != 1 {
				return "", fmt.Errorf("leader %d, ISR %v", leaderNow, isr)
			}
			return fmt.Sprintf("leader %d kept, ISR %v -> %v", leaderNow, sorted(part.ISR), isr), nil
		})
	case ZooKeeperKill, QuorumLoss:
		victims := []cluster.Node{zks[n.Rand.IntN(len(zks))]}
		if kind == QuorumLoss {
			perm := n.Rand.Perm(len(zks))
			victims = []cluster.Node{zks[perm[0]], zks[perm[1]]}
		}
		var names []string
		for _, z := range victims {
			names = append(names, z.Name)
		}
		f.Target = strings.Join(names, ", ")
		for _, z := range victims {
			if err = n.C.Kill(ctx, z.Name); err != nil {
				break
			}
		}
		heal = func() error {
			for _, z := range victims {
				if err := n.C.Start(ctx, z.Name); err != nil {
					return err
				}
			}
			return n.C.WaitZooKeeper(ctx)
		}
		if err != nil {
			break
		}
		var rest []cluster.Node
		for _, z := range zks {
			if !slices.ContainsFunc(victims, func(v cluster.Node) bool { return v.Name == z.Name }) {
				rest = append(rest, z)
			}
		}
		f.Observed, err = n.observe(ctx, max(n.Hold, n.SessionTimeout+2*time.Second), "the ensemble's answer", func() (string, error) {
			var modes []string
			for _, z := range rest {
				mode, err := zktest.ServerMode(ctx, z.Addr)
				if err != nil {
					mode = "not serving"
				}
				modes = append(modes, fmt.Sprintf("%s %s", z.Name, mode))
			}
			s := strings.Join(modes, ", ")
			serving := !strings.Contains(s, "not serving")
			if serving != (kind == ZooKeeperKill) {
				return "", errors.New(s)
			}
			return s, nil
		})
	case FullRestart:
		f.Target = "every broker"
		var wg sync.WaitGroup
		errs := make([]error, len(n.C.Brokers()))
		for i, b := range n.C.Brokers() {
			wg.Go(func() { errs[i] = n.C.Stop(ctx, b.Name) })
		}
		wg.Wait()
		if err = errors.Join(errs...); err != nil {
			break
		}
		heal = func() error {
			for _, b := range n.C.Brokers() {
				if err := n.C.Start(ctx, b.Name); err != nil {
					return err
				}
			}
			return nil
		}
		f.Observed, err = n.observe(ctx, n.Hold, "every broker stopped", func() (string, error) {
			for _, b := range n.C.Brokers() {
				if up, err := n.C.Running(ctx, b.Name); err != nil || up {
					return "", fmt.Errorf("%s running", b.Name)
				}
			}
			return "every broker stopped", nil
		})
	default:
		err = fmt.Errorf("unknown fault %q", kind)
	}
	n.logf("fault %s: %s: %s", kind, f.Target, f.Observed)
	if heal != nil {
		if herr := heal(); herr != nil {
			err = errors.Join(err, fmt.Errorf("heal: %w", herr))
		}
	}
	f.Heal = n.W.Since()
	if err != nil {
		f.Err = err
	}
	if rerr := n.WaitHealthy(ctx, n.RecoverTimeout); rerr != nil {
		f.Err = errors.Join(f.Err, rerr)
		return f
	}
	f.Recovered = n.W.Since()
	// Writes acknowledged again on every partition: the gap after the
	// fault is closed (bounded: a partition that never recovers shows as
	// a gap as long as the wait).
	waitFor(ctx, 60*time.Second, func() bool { return n.W.PartitionsAckedSince(f.Recovered) })
	f.Gap = n.W.Gap(f.Start, f.Recovered)
	return f
}

// observe polls check until it succeeds and hold has passed since the
// call; it returns check's description, or an error naming what was
// awaited after observeTimeout.
func (n *Nemesis) observe(ctx context.Context, hold time.Duration, what string, check func() (string, error)) (string, error) {
	start := time.Now()
	var seen string
	var last error
	for {
		if seen == "" {
			if s, err := check(); err == nil {
				seen = s
			} else {
				last = err
			}
		}
		if seen != "" && time.Since(start) >= hold {
			return seen, nil
		}
		if seen == "" && time.Since(start) > observeTimeout {
			return fmt.Sprintf("no %s in %v (last: %v)", what, observeTimeout, last), fmt.Errorf("no %s within %v: %v", what, observeTimeout, last)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// metadata asks the brokers other than skip (the one the fault hit) for
// every topic's metadata: the first that answers.
func (n *Nemesis) metadata(ctx context.Context, skip string) (kadm.Metadata, error) {
	var last error
	for _, b := range n.C.Brokers() {
		if b.Name == skip {
			continue
		}
		md, err := askBroker(ctx, b)
		if err == nil {
			return md, nil
		}
		last = err
	}
	return kadm.Metadata{}, last
}

// zkPartitionState reads a partition's leader and ISR from its state
// znode (/brokers/topics/<topic>/partitions/<p>/state).
func zkPartitionState(c *cluster.Cluster, topic string, p int32) (int32, []int32, error) {
	zc, err := kafkazk.Connect(strings.Join(c.ZooKeeperConnect(), ","), kafkazk.Options{
		SessionTimeout: 6 * time.Second, ConnectionTimeout: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return -1, nil, err
	}
	defer zc.Close()
	s, _, err := zc.PartitionState(commitlog.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		return -1, nil, err
	}
	return s.Leader, sorted(s.ISR), nil
}

// askBroker asks broker b alone for every topic's metadata, within a few
// seconds: a fresh client's first request goes to its only seed.
func askBroker(ctx context.Context, b cluster.Node) (kadm.Metadata, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return md, fmt.Errorf("%s: %w", b.Name, err)
	}
	return md, nil
}

// WaitHealthy waits until every broker answers Metadata listing every
// broker, and in each one's answer every partition of every topic has a
// leader and its full ISR (ISR = replicas).
func (n *Nemesis) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	return Healthy(ctx, n.C, timeout)
}

// Healthy is WaitHealthy for any cluster.
func Healthy(ctx context.Context, c *cluster.Cluster, timeout time.Duration) error {
	var last error
	ok := waitFor(ctx, timeout, func() bool {
		last = unhealthy(ctx, c)
		return last == nil
	})
	if !ok {
		return fmt.Errorf("not healthy within %v: %v", timeout, last)
	}
	return nil
}

// unhealthy says what is not yet healthy, or nil.
func unhealthy(ctx context.Context, c *cluster.Cluster) error {
	for _, b := range c.Brokers() {
		md, err := askBroker(ctx, b)
		if err != nil {
			return err
		}
		if len(md.Brokers) != len(c.Brokers()) {
			return fmt.Errorf("%s lists %d brokers", b.Name, len(md.Brokers))
		}
		for _, t := range md.Topics.Sorted() {
			if t.Err != nil {
				return fmt.Errorf("%s: topic %s: %w", b.Name, t.Topic, t.Err)
			}
			for _, p := range t.Partitions.Sorted() {
				if p.Err != nil || p.Leader < 0 || !slices.Equal(sorted(p.ISR), sorted(p.Replicas)) {
					return fmt.Errorf("%s: %s-%d: leader %d, ISR %v of replicas %v (%v)", b.Name, t.Topic, p.Partition, p.Leader, p.ISR, p.Replicas, p.Err)
				}
			}
		}
	}
	return nil
}

// waitFor polls cond every 250 ms until it holds (true) or timeout
// passes (false).
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func (n *Nemesis) logf(format string, args ...any) {
	if n.Logf != nil {
		n.Logf(format, args...)
	}
}
