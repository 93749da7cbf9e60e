package server_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaworkbook/workbook/stage05-controller/brokertest"
	"github.com/kafkaworkbook/workbook/stage05-controller/zktest"
)

// Transactions end to end: franz-go's transactional producer and
// GroupTransactSession, Sarama's transactional producer, kadm's
// DescribeTransactions and ListTransactions, against three brokers (whose
// transaction coordinator is package txn) on a real ZooKeeper.

// txnProps: the coordinator looks for timed-out transactions often, and
// groups rebalance at once.
var txnProps = map[string]string{"group.initial.rebalance.delay.ms": "0",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}

// txnClient is a transactional franz-go producer.
func txnClient(t *testing.T, c *brokertest.Cluster, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return client(t, c, append([]kgo.Opt{kgo.TransactionalID(id), kgo.TransactionTimeout(10 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// readTopic reads a topic from its start at an isolation level until it
// has read every record below each partition's high watermark (for
// read_committed, once no transaction is open), and returns the values
// by partition.
func readTopic(t *testing.T, c *brokertest.Cluster, topic string, level kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	adm := kadm.NewClient(client(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	if level == kgo.ReadCommitted() {
		// EndTxn is answered once the decision is in the log; the markers
		// follow. Read once every transaction is decided and marked: the
		// LSO is the high watermark.
		require.Eventually(t, func() bool {
			if ends, err = adm.ListEndOffsets(ctx, topic); err != nil {
				return false
			}
			stable, err := adm.ListCommittedOffsets(ctx, topic)
			if err != nil {
				return false
			}
			same := true
			ends.Each(func(o kadm.ListedOffset) {
				s, ok := stable.Lookup(topic, o.Partition)
				same = same && ok && o.Err == nil && s.Err == nil && s.Offset == o.Offset
			})
			return same
		}, 30*time.Second, 20*time.Millisecond, "%s: every transaction decided and marked", topic)
	}
	cl := client(t, c, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	out := map[int32][]string{}
	done := map[int32]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		done[o.Partition] = o.Offset == 0
	})
	empty := 0
	for {
		all := true
		for _, d := range done {
			all = all && d
		}
		// franz-go moves past markers and aborted records without
		// returning them: a partition whose last records are such is done
		// once polls come back empty.
		if all || empty >= 10 {
			return out
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		require.NoError(t, ctx.Err(), "reading %s: %v so far", topic, out)
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			out[r.Partition] = append(out[r.Partition], string(r.Value))
			if end, ok := ends.Lookup(topic, r.Partition); ok && r.Offset+1 >= end.Offset {
				done[r.Partition] = true
			}
		})
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
}

// Transactions committed and aborted in turn: read_committed consumers
// read only the committed ones, read_uncommitted every record, and kadm
// describes the producer's transactional id.
func TestFranzGoTransactionsCommitAndAbort(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "txn-out", 3, nil)
	p := txnClient(t, c, "writer-1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var committed, all []string
	for i := range 10 {
		require.NoError(t, p.BeginTransaction())
		for j := range 3 {
			v := fmt.Sprintf("txn-%d-%d", i, j)
			require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "txn-out", Partition: int32(j), Value: []byte(v)}).FirstErr())
			all = append(all, v)
			if i%3 != 2 {
				committed = append(committed, v)
			}
		}
		require.NoError(t, p.EndTransaction(ctx, kgo.TransactionEndTry(i%3 != 2)), "transaction %d", i)
	}
	flat := func(byPartition map[int32][]string) []string {
		var out []string
		for _, vs := range byPartition {
			out = append(out, vs...)
		}
		slices.Sort(out)
		return out
	}
	slices.Sort(committed)
	slices.Sort(all)
	require.Equal(t, committed, flat(readTopic(t, c, "txn-out", kgo.ReadCommitted())))
	require.Equal(t, all, flat(readTopic(t, c, "txn-out", kgo.ReadUncommitted())))

	adm := kadm.NewClient(client(t, c))
	described, err := adm.DescribeTransactions(ctx, "writer-1")
	require.NoError(t, err)
	d, ok := described["writer-1"]
	require.True(t, ok)
	require.NoError(t, d.Err)
	require.Contains(t, []string{"CompleteCommit", "CompleteAbort"}, d.State)
	require.Equal(t, int32(10_000), d.TimeoutMillis)
	listed, err := adm.ListTransactions(ctx, nil, nil)
	require.NoError(t, err)
	require.Contains(t, listed.TransactionalIDs(), "writer-1")
}

// A second producer with the same transactional id fences the first: the
// first's transaction is aborted, its next commit fails as fenced, and
// only the second's records are read committed.
func TestAZombieProducerIsFenced(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "fenced", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zombie := txnClient(t, c, "same-id")
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Topic: "fenced", Value: []byte("zombie")}).FirstErr())

	live := txnClient(t, c, "same-id")
	require.NoError(t, live.BeginTransaction())
	require.NoError(t, live.ProduceSync(ctx, &kgo.Record{Topic: "fenced", Value: []byte("live")}).FirstErr())
	require.NoError(t, live.EndTransaction(ctx, kgo.TryCommit))

	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	require.Error(t, err, "the zombie cannot commit")
	require.True(t, errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch), "%v", err)
	require.Equal(t, map[int32][]string{0: {"live"}}, readTopic(t, c, "fenced", kgo.ReadCommitted()))
}

// A transaction left open past its timeout is aborted by the coordinator:
// the LSO, stuck at its first record, moves on, and what it wrote is
// never read committed.
func TestAnOpenTransactionTimesOutAndIsAborted(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "stalled", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := txnClient(t, c, "stalls", kgo.TransactionTimeout(1500*time.Millisecond))
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "stalled", Value: []byte("never")}).FirstErr())
	plain := client(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Topic: "stalled", Value: []byte("after")}).FirstErr())

	adm := kadm.NewClient(client(t, c))
	lso := func() int64 {
		o, err := adm.ListCommittedOffsets(ctx, "stalled")
		require.NoError(t, err)
		got, _ := o.Lookup("stalled", 0)
		return got.Offset
	}
	require.Equal(t, int64(0), lso(), "the LSO waits at the open transaction's first record")
	require.Eventually(t, func() bool { return lso() == 3 }, 20*time.Second, 50*time.Millisecond,
		"aborted after its timeout: the marker at offset 2, the LSO after it")
	require.Equal(t, map[int32][]string{0: {"after"}}, readTopic(t, c, "stalled", kgo.ReadCommitted()))
	described, err := adm.DescribeTransactions(ctx, "stalls")
	require.NoError(t, err)
	require.Equal(t, "CompleteAbort", described["stalls"].State)
}

// The consume-transform-produce loop of KIP-98, with franz-go's
// GroupTransactSession: two workers in a group read etl-in, write each
// record transformed to etl-out and commit their offsets in the same
// transaction, while a broker is killed (kill -9) and restarted. Output
// read committed must equal input: every record once, none twice, none
// aborted.
func TestGroupTransactSessionIsExactlyOnceAcrossABrokerKill(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "etl-in", 3, nil)
	createTopic(t, c, "etl-out", 3, nil)
	const n = 900
	in := client(t, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	want := make([]string, n)
	for i := range n {
		want[i] = "out-in-" + strconv.Itoa(i)
		in.Produce(ctx, &kgo.Record{Topic: "etl-in", Value: []byte("in-" + strconv.Itoa(i))}, nil)
	}
	require.NoError(t, in.Flush(ctx))

	stop := make(chan struct{})
	errs := make(chan error, 2)
	var workers sync.WaitGroup
	t.Cleanup(func() { cancel(); workers.Wait() }) // no worker logs after the test ends
	for w := range 2 {
		workers.Go(func() { errs <- runETL(ctx, c, fmt.Sprintf("etl-worker-%d", w), stop, t.Logf) })
	}
	adm := kadm.NewClient(client(t, c))
	committedOut := func() int64 {
		o, err := adm.ListCommittedOffsets(ctx, "etl-out")
		if err != nil {
			return -1
		}
		var total int64
		o.Each(func(l kadm.ListedOffset) { total += l.Offset })
		return total
	}
	require.Eventually(t, func() bool { return committedOut() > n/4 }, 90*time.Second, 20*time.Millisecond, "the workers commit")
	victim, before := c.Broker(2), committedOut()
	victim.Kill()
	t.Logf("killed broker %d with %d of %d records committed in etl-out", victim.ID, before, n)
	require.Eventually(t, func() bool { return committedOut() > n/2 }, 90*time.Second, 50*time.Millisecond, "the workers go on without it")
	victim.Start()
	// Done when the group's committed offsets cover the input.
	require.Eventually(t, func() bool {
		lag, err := adm.Lag(ctx, "etl")
		if err != nil {
			return false
		}
		var total int64
		lag.Each(func(l kadm.DescribedGroupLag) {
			for _, ps := range l.Lag {
				for _, p := range ps {
					if p.Err != nil || p.Commit.At < 0 {
						total += 1 << 30
					}
					total += p.Lag
				}
			}
		})
		return total == 0
	}, 120*time.Second, 100*time.Millisecond, "the group consumes all of etl-in")
	close(stop)
	for range 2 {
		require.NoError(t, <-errs)
	}

	got := map[string]int{}
	for _, vs := range readTopic(t, c, "etl-out", kgo.ReadCommitted()) {
		for _, v := range vs {
			got[v]++
		}
	}
	var missing, twice []string
	for _, v := range want {
		switch got[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			twice = append(twice, v)
		}
		delete(got, v)
	}
	require.Empty(t, missing, "every input record is in the output")
	require.Empty(t, twice, "none twice")
	require.Empty(t, got, "nothing else")
}

// runETL is one consume-transform-produce worker, until stop. A
// transaction whose End fails (its EndTxn went to the broker just
// killed, say) has an outcome the client cannot know: franz-go would
// abort it by bumping the epoch and rewind to the offsets it remembers,
// which are stale if the commit did land. The worker does what Kafka's
// documentation asks of an application after such an error: close the
// session and start a new one with the same transactional.id. The new
// InitProducerId settles the old transaction (completes or aborts it,
// fencing the old producer), and the rejoined member reads the group's
// committed offsets from the coordinator (require_stable waits for the
// outcome), so nothing is lost and nothing repeated.
func runETL(ctx context.Context, c *brokertest.Cluster, id string, stop <-chan struct{}, logf func(string, ...any)) error {
	for restarts := 0; ; restarts++ {
		done, err := runETLSession(ctx, c, id, stop)
		if done || ctx.Err() != nil {
			return err
		}
		if restarts == 10 {
			return fmt.Errorf("%s: restarted 10 times, last: %w", id, err)
		}
		logf("%s: %v; a new session", id, err)
	}
}

// runETLSession runs one GroupTransactSession: done once stop is closed,
// or the error that ended the session.
func runETLSession(ctx context.Context, c *brokertest.Cluster, id string, stop <-chan struct{}) (done bool, err error) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.Addrs()...), kgo.TransactionalID(id),
		kgo.TransactionTimeout(10*time.Second), kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("etl-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	if err != nil {
		return true, err
	}
	defer sess.Close()
	for {
		select {
		case <-stop:
			return true, nil
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, &kgo.Record{Topic: "etl-out", Value: append([]byte("out-"), r.Value...)})
		})
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return false, fmt.Errorf("begin: %w", err)
		}
		for _, r := range recs {
			sess.Produce(ctx, r, nil) // a failure makes End abort
		}
		if _, err := sess.End(ctx, kgo.TryCommit); err != nil {
			return false, fmt.Errorf("end: %w", err)
		}
	}
}

// The coordinator of a transaction in progress is killed (kill -9): its
// partition of __transaction_state gets a new leader, which loads the
// open transaction from the log; the producer's commit finds it there,
// the markers reach every partition (those the dead broker led have new
// leaders too) and the transaction's records are read committed.
func TestACommitFindsTheNewCoordinatorAfterTheOldOneIsKilled(t *testing.T) {
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "moved", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := txnClient(t, c, "moves")
	require.NoError(t, p.BeginTransaction())
	for i := range 3 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "moved", Partition: int32(i), Value: []byte("v" + strconv.Itoa(i))}).FirstErr())
	}
	adm := kadm.NewClient(client(t, c))
	found := adm.FindTxnCoordinators(ctx, "moves")
	require.NoError(t, found.Error())
	coordinator := found["moves"].NodeID
	c.Broker(coordinator).Kill()
	t.Logf("killed broker %d, the coordinator of the open transaction", coordinator)
	// franz-go gives up on a coordinator it cannot dial after a second or
	// two; the controller elects a new leader once ZooKeeper expires the
	// dead broker's session. Commit once it has.
	require.Eventually(t, func() bool {
		found := adm.FindTxnCoordinators(ctx, "moves")
		return found.Error() == nil && found["moves"].NodeID != coordinator
	}, 60*time.Second, 100*time.Millisecond, "a new coordinator")

	require.NoError(t, p.EndTransaction(ctx, kgo.TryCommit))
	require.Equal(t, map[int32][]string{0: {"v0"}, 1: {"v1"}, 2: {"v2"}}, readTopic(t, c, "moved", kgo.ReadCommitted()))
	require.Eventually(t, func() bool { // this admin client may still know the old coordinator
		described, err := adm.DescribeTransactions(ctx, "moves")
		return err == nil && described["moves"].State == "CompleteCommit"
	}, 30*time.Second, 100*time.Millisecond, "the new coordinator completed the commit")
}

// Sarama's transactional producer commits and aborts; kcat
// (librdkafka) and franz-go read committed only what it committed.
func TestSaramaTransactionsReadByKcat(t *testing.T) {
	kcat := kcatBinary(t)
	ens := zktest.StartStandalone(t)
	c := brokertest.Start(t, ens, 3, txnProps)
	createTopic(t, c, "sarama-txn", 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-txn"
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
	require.NoError(t, err)
	defer p.Close()
	var committed []string
	for i := range 6 {
		require.NoError(t, p.BeginTxn())
		for j := range 2 {
			v := fmt.Sprintf("sarama-%d-%d", i, j)
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-txn", Partition: 0, Value: sarama.StringEncoder(v)})
			require.NoError(t, err)
			if i%2 == 0 {
				committed = append(committed, v)
			}
		}
		if i%2 == 0 {
			require.NoError(t, p.CommitTxn())
		} else {
			require.NoError(t, p.AbortTxn())
		}
	}
	require.Equal(t, map[int32][]string{0: committed}, readTopic(t, c, "sarama-txn", kgo.ReadCommitted()))

	cmd := exec.Command(kcat, "-b", strings.Join(c.Addrs(), ","), "-C", "-q", "-t", "sarama-txn", "-o", "beginning", "-e",
		"-X", "isolation.level=read_committed", "-f", "%s\\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	require.Equal(t, committed, strings.Fields(string(out)), "kcat read_committed")
}
