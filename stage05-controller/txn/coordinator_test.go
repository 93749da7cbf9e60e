package txn

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage01-log/record"
)

// The coordinator against a real log per partition of
// __transaction_state, a counter for producer ids and leaders that write
// markers as the test says.

type logWriter struct {
	t    *testing.T
	mu   sync.Mutex
	logs map[int32]*commitlog.Log
	fail int16 // answer this code instead of appending, when set
}

func (w *logWriter) log(p int32) *commitlog.Log {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.logs[p]
	if !ok {
		var err error
		l, err = commitlog.Open(filepath.Join(w.t.TempDir(), fmt.Sprintf("%s-%d", Topic, p)), commitlog.DefaultConfig(), commitlog.Options{})
		require.NoError(w.t, err)
		w.t.Cleanup(func() { l.Close() })
		w.logs[p] = l
	}
	return l
}

func (w *logWriter) Append(p int32, batch []byte, _ time.Duration, done func(code int16)) {
	w.mu.Lock()
	fail := w.fail
	w.mu.Unlock()
	if fail != 0 {
		go done(fail)
		return
	}
	_, _, err := w.log(p).Append(batch)
	require.NoError(w.t, err)
	go done(0)
}

// states reads back the states written for an id, in order.
func (w *logWriter) states(id string, partitions int32) []State {
	w.t.Helper()
	var out []State
	l := w.log(PartitionFor(id, partitions))
	for offset := int64(0); offset < l.EndOffset(); { // segment by segment (a batch days later rolls the log)
		region, err := l.Read(offset, 1<<20)
		require.NoError(w.t, err)
		data, err := region.Bytes()
		require.NoError(w.t, err)
		for len(data) > 0 {
			h, err := record.ReadHeader(data)
			require.NoError(w.t, err)
			it := record.NewRecordIterator(data[record.HeaderSize:h.Size()], h.NumRecords)
			for it.Next() {
				got, m, err := decode(it.Record().Key, it.Record().Value)
				require.NoError(w.t, err)
				if got == id {
					if m == nil {
						out = append(out, Dead)
					} else {
						out = append(out, m.State)
					}
				}
			}
			data, offset = data[h.Size():], h.NextOffset()
		}
	}
	return out
}

type counter struct {
	mu   sync.Mutex
	next int64
}

func (c *counter) Next() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	return 1000 + c.next, nil
}

type markerCall struct {
	m     record.Marker
	parts []commitlog.TopicPartition
}

type leaders struct {
	mu       sync.Mutex
	calls    []markerCall
	failures int   // the next calls that fail
	code     int16 // and with what
	changed  chan struct{}
	hold     chan struct{} // when set, each call waits for it to be closed
}

func (l *leaders) Write(m record.Marker, parts []commitlog.TopicPartition, done func(map[commitlog.TopicPartition]int16)) {
	l.mu.Lock()
	hold := l.hold
	l.mu.Unlock()
	if hold != nil {
		<-hold
	}
	l.mu.Lock()
	l.calls = append(l.calls, markerCall{m, parts})
	codes := map[commitlog.TopicPartition]int16{}
	if l.failures > 0 {
		l.failures--
		for _, tp := range parts {
			codes[tp] = l.code
		}
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	go done(codes)
}

func (l *leaders) snapshot() []markerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]markerCall(nil), l.calls...)
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	t       *testing.T
	cfg     Config
	w       *logWriter
	ids     *counter
	leaders *leaders
	clock   *clock
	c       *Coordinator
}

const testPartitions = 4

func newHarness(t *testing.T) *harness {
	cfg := DefaultConfig()
	cfg.Partitions, cfg.AbortCheck, cfg.IDExpirationCheck, cfg.MarkerRetryBackoff = testPartitions, 0, 0, 5*time.Millisecond
	h := &harness{t: t, cfg: cfg, w: &logWriter{t: t, logs: map[int32]*commitlog.Log{}}, ids: &counter{},
		leaders: &leaders{changed: make(chan struct{}, 1)}, clock: &clock{now: time.UnixMilli(1_700_000_000_000)}}
	h.c = h.coordinator()
	for p := range int32(testPartitions) {
		h.elect(h.c, p, 0)
	}
	return h
}

func (h *harness) coordinator() *Coordinator {
	c := New(h.cfg, h.w, h.ids, h.leaders, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: h.clock.Now})
	h.t.Cleanup(c.Close)
	return c
}

// elect makes c the coordinator of partition p and waits for its load.
func (h *harness) elect(c *Coordinator, p, epoch int32) {
	h.t.Helper()
	c.Elected(p, epoch, h.w.log(p))
	require.Eventually(h.t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		o := c.owned[p]
		return o != nil && !o.loading
	}, 5*time.Second, time.Millisecond)
}

func (h *harness) init(c *Coordinator, id string, pid int64, epoch int16) (int64, int16, int16) {
	h.t.Helper()
	type answer struct {
		pid   int64
		epoch int16
		code  int16
	}
	ch := make(chan answer, 1)
	c.InitProducerID(InitRequest{ID: id, Timeout: time.Minute, ProducerID: pid, Epoch: epoch}, func(pid int64, epoch int16, code int16) {
		ch <- answer{pid, epoch, code}
	})
	select {
	case a := <-ch:
		return a.pid, a.epoch, a.code
	case <-time.After(5 * time.Second):
		h.t.Fatal("InitProducerId was not answered")
		return 0, 0, 0
	}
}

func wait(t *testing.T, call func(respond func(int16))) int16 {
	t.Helper()
	ch := make(chan int16, 1)
	call(func(code int16) { ch <- code })
	select {
	case code := <-ch:
		return code
	case <-time.After(5 * time.Second):
		t.Fatal("not answered")
		return 0
	}
}

func (h *harness) add(c *Coordinator, id string, pid int64, epoch int16, parts ...commitlog.TopicPartition) int16 {
	h.t.Helper()
	return wait(h.t, func(r func(int16)) { c.AddPartitions(id, pid, epoch, parts, r) })
}

func (h *harness) end(c *Coordinator, id string, pid int64, epoch int16, commit bool) int16 {
	h.t.Helper()
	return wait(h.t, func(r func(int16)) { c.EndTxn(id, pid, epoch, commit, r) })
}

// state waits for id's state to settle (nothing under way) at want.
func (h *harness) state(c *Coordinator, id string, want State) Metadata {
	h.t.Helper()
	var m Metadata
	require.Eventually(h.t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		e := c.txns[id]
		if e == nil || e.pending != nil {
			return false
		}
		m = e.Metadata
		return m.State == want
	}, 5*time.Second, time.Millisecond, "%s settles in %s", id, want)
	return m
}

var (
	orders0 = commitlog.TopicPartition{Topic: "orders", Partition: 0}
	orders1 = commitlog.TopicPartition{Topic: "orders", Partition: 1}
	audit0  = commitlog.TopicPartition{Topic: "audit", Partition: 0}
)

// A transaction goes Empty, Ongoing, PrepareCommit, CompleteCommit, each
// state in the log before it is answered; the markers go to every
// partition added, with the producer's epoch and the coordinator epoch.
func TestATransactionCommitsThroughItsStates(t *testing.T) {
	h := newHarness(t)
	pid, epoch, code := h.init(h.c, "etl", -1, -1)
	require.Zero(t, code)
	require.Equal(t, int64(1001), pid)
	require.Equal(t, int16(0), epoch)
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders1, orders0))
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0), "already in: nothing written")
	require.Zero(t, h.add(h.c, "etl", pid, epoch, audit0))
	m, code := h.c.Describe("etl")
	require.Zero(t, code)
	require.Equal(t, Ongoing, m.State)
	require.Equal(t, []commitlog.TopicPartition{audit0, orders0, orders1}, m.Partitions)
	require.Equal(t, h.clock.Now().UnixMilli(), m.Start)

	require.Zero(t, h.end(h.c, "etl", pid, epoch, true))
	h.state(h.c, "etl", CompleteCommit)
	require.Equal(t, []markerCall{{record.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: 0},
		[]commitlog.TopicPartition{audit0, orders0, orders1}}}, h.leaders.snapshot())
	require.Equal(t, []State{Empty, Ongoing, Ongoing, PrepareCommit, CompleteCommit}, h.w.states("etl", testPartitions))

	require.Zero(t, h.end(h.c, "etl", pid, epoch, true), "a retry of the EndTxn that completed")
	require.Equal(t, codeInvalidTxnState, h.end(h.c, "etl", pid, epoch, false), "abort after commit")
	m, _ = h.c.Describe("etl")
	require.Empty(t, m.Partitions)
}

// A second InitProducerId for the id fences the first producer: it bumps
// the epoch; a transaction left open is aborted first under the bumped
// epoch, and the caller, told CONCURRENT_TRANSACTIONS, gets the epoch
// after. The old producer's next request is PRODUCER_FENCED.
func TestInitProducerIDFencesAZombieAndAbortsItsTransaction(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init(h.c, "etl", -1, -1)
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0))

	_, _, code := h.init(h.c, "etl", -1, -1)
	require.Equal(t, codeConcurrent, code)
	h.state(h.c, "etl", CompleteAbort)
	require.Equal(t, []markerCall{{record.Marker{ProducerID: pid, ProducerEpoch: 1, Commit: false}, []commitlog.TopicPartition{orders0}}},
		h.leaders.snapshot(), "ABORT at the bumped epoch")
	pid2, epoch2, code := h.init(h.c, "etl", -1, -1)
	require.Zero(t, code)
	require.Equal(t, pid, pid2)
	require.Equal(t, int16(2), epoch2)

	require.Equal(t, codeFenced, h.add(h.c, "etl", pid, epoch, orders0), "the zombie")
	require.Equal(t, codeFenced, h.end(h.c, "etl", pid, epoch, true))
	require.Equal(t, codeInvalidMapping, h.add(h.c, "etl", pid+1, epoch2, orders0))
	_, _, code = h.init(h.c, "etl", pid, 1)
	require.Equal(t, codeFenced, code, "a KIP-360 InitProducerId from an epoch neither current nor last")
	p3, e3, code := h.init(h.c, "etl", pid, 2)
	require.Zero(t, code, "from the current epoch: bumped")
	require.Equal(t, int16(3), e3)
	p4, e4, code := h.init(h.c, "etl", pid, 2)
	require.Zero(t, code, "a retry of that call is answered the same")
	require.Equal(t, [2]int64{p3, int64(e3)}, [2]int64{p4, int64(e4)})
}

// While the markers of a decided transaction are being written, the next
// transaction waits (CONCURRENT_TRANSACTIONS); markers that fail are sent
// again until written.
func TestMarkersAreSentAgainUntilWritten(t *testing.T) {
	h := newHarness(t)
	h.leaders.failures, h.leaders.code = 3, kerr.NotLeaderForPartition.Code
	pid, epoch, _ := h.init(h.c, "etl", -1, -1)
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0))
	require.Zero(t, h.end(h.c, "etl", pid, epoch, false))
	h.state(h.c, "etl", CompleteAbort)
	require.Len(t, h.leaders.snapshot(), 4, "three failures, then written")
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders1), "the next transaction")
}

func TestRequestsAreChecked(t *testing.T) {
	h := newHarness(t)
	for name, req := range map[string]InitRequest{
		"no id":            {ID: "", Timeout: time.Second, ProducerID: -1, Epoch: -1},
		"half a producer":  {ID: "x", Timeout: time.Second, ProducerID: 5, Epoch: -1},
		"timeout 0":        {ID: "x", Timeout: 0, ProducerID: -1, Epoch: -1},
		"timeout too long": {ID: "x", Timeout: 16 * time.Minute, ProducerID: -1, Epoch: -1},
	} {
		ch := make(chan int16, 1)
		h.c.InitProducerID(req, func(_ int64, _ int16, code int16) { ch <- code })
		want := codeInvalidRequest
		if req.ID != "" && req.ProducerID < 0 {
			want = codeInvalidTimeout
		}
		require.Equal(t, want, <-ch, name)
	}
	pid, epoch, _ := h.init(h.c, "etl", -1, -1)
	require.Equal(t, codeInvalidTxnState, h.end(h.c, "etl", pid, epoch, true), "nothing to end")
	require.Equal(t, codeInvalidMapping, h.add(h.c, "unknown", pid, epoch, orders0))

	other := h.coordinator() // owns nothing
	require.Equal(t, codeNotCoordinator, other.Owns("etl"))
	_, _, code := h.init(other, "etl", -1, -1)
	require.Equal(t, codeNotCoordinator, code)
	h.c.Resigned(PartitionFor("etl", testPartitions))
	require.Equal(t, codeNotCoordinator, h.add(h.c, "etl", pid, epoch, orders0))

	h.w.fail = kerr.NotEnoughReplicas.Code
	h.elect(h.c, PartitionFor("etl", testPartitions), 1)
	require.Equal(t, codeNotAvailable, h.add(h.c, "etl", pid, epoch, orders0), "the log is short of replicas")
	m, _ := h.c.Describe("etl")
	require.Equal(t, Empty, m.State, "nothing changed")
}

// A coordinator elected for the partition later (a new leader) reads the
// ids back and finishes what the old one decided: a transaction found in
// PrepareCommit has its markers sent again, under the new coordinator
// epoch, and is completed; the producer goes on with its id and epoch.
func TestANewCoordinatorCompletesAPreparedTransaction(t *testing.T) {
	h := newHarness(t)
	h.leaders.failures, h.leaders.code = 1<<30, kerr.NotEnoughReplicas.Code // the old coordinator never gets its markers written
	pid, epoch, _ := h.init(h.c, "etl", -1, -1)
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0, orders1))
	require.Zero(t, h.end(h.c, "etl", pid, epoch, true))
	p := PartitionFor("etl", testPartitions)
	h.c.Resigned(p)

	h.leaders.mu.Lock()
	h.leaders.failures = 0
	h.leaders.mu.Unlock()
	next := h.coordinator()
	h.elect(next, p, 7)
	h.state(next, "etl", CompleteCommit)
	// (The old coordinator may have sent once more as it resigned: its
	// markers carry epoch 0, which the partitions would refuse once the
	// new one's are written.)
	require.Contains(t, h.leaders.snapshot(), markerCall{record.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: 7},
		[]commitlog.TopicPartition{orders0, orders1}})
	require.Zero(t, h.add(next, "etl", pid, epoch, orders0), "the producer goes on")
}

// A transaction open past its timeout is aborted by the coordinator under
// a bumped epoch: the producer is fenced.
func TestATimedOutTransactionIsAbortedAndItsProducerFenced(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init(h.c, "etl", -1, -1) // a minute's timeout
	require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0))
	h.clock.Advance(59 * time.Second)
	h.c.AbortTimedOut()
	m, _ := h.c.Describe("etl")
	require.Equal(t, Ongoing, m.State, "not yet")
	h.clock.Advance(2 * time.Second)
	h.c.AbortTimedOut()
	h.state(h.c, "etl", CompleteAbort)
	require.Equal(t, []markerCall{{record.Marker{ProducerID: pid, ProducerEpoch: epoch + 1}, []commitlog.TopicPartition{orders0}}}, h.leaders.snapshot())
	require.Equal(t, codeFenced, h.end(h.c, "etl", pid, epoch, true))
}

// An id idle for transactional.id.expiration.ms is removed with a
// tombstone; ListTransactions filters by state, producer and age.
func TestIdleIDsExpireAndListFilters(t *testing.T) {
	h := newHarness(t)
	pa, ea, _ := h.init(h.c, "a", -1, -1)
	pb, eb, _ := h.init(h.c, "b", -1, -1)
	require.Zero(t, h.add(h.c, "b", pb, eb, orders0))
	h.clock.Advance(10 * time.Second)

	all, code := h.c.List(nil, nil, -1)
	require.Zero(t, code)
	require.Len(t, all, 2)
	open, _ := h.c.List([]State{Ongoing}, nil, -1)
	require.Equal(t, "b", open[0].ID)
	require.Len(t, open, 1)
	old, _ := h.c.List(nil, nil, 5*time.Second)
	require.Len(t, old, 1, "open for more than 5 s")
	byPID, _ := h.c.List(nil, []int64{pa}, -1)
	require.Equal(t, "a", byPID[0].ID)

	h.clock.Advance(7 * 24 * time.Hour)
	h.c.ExpireIDs()
	require.Eventually(t, func() bool { _, code := h.c.Describe("a"); return code == kerr.TransactionalIDNotFound.Code }, 5*time.Second, time.Millisecond)
	_, code = h.c.Describe("b")
	require.Zero(t, code, "an open transaction is not expired")
	require.Equal(t, []State{Empty, Dead}, h.w.states("a", testPartitions))
	_ = ea

	// Loaded again, the tombstone keeps it removed.
	next := h.coordinator()
	h.elect(next, PartitionFor("a", testPartitions), 1)
	_, code = next.Describe("a")
	require.Equal(t, kerr.TransactionalIDNotFound.Code, code)
}

// The next transaction's first AddPartitions, sent while the last one's
// markers are still being written, waits for them and succeeds, instead
// of CONCURRENT_TRANSACTIONS and a client's 20 ms backoff; if the markers
// take longer than a second, it answers CONCURRENT_TRANSACTIONS.
func TestAddPartitionsWaitsForTheLastTransactionsMarkers(t *testing.T) {
	h := newHarness(t)
	pid, epoch, _ := h.init(h.c, "etl", -1, -1)
	for _, wait := range []time.Duration{50 * time.Millisecond, 1500 * time.Millisecond} {
		require.Zero(t, h.add(h.c, "etl", pid, epoch, orders0))
		hold := make(chan struct{})
		h.leaders.mu.Lock()
		h.leaders.hold = hold
		h.leaders.mu.Unlock()
		require.Zero(t, h.end(h.c, "etl", pid, epoch, true))
		start := time.Now()
		time.AfterFunc(wait, func() { close(hold) })
		code := h.add(h.c, "etl", pid, epoch, orders1)
		took := time.Since(start)
		if wait < parkWait {
			require.Zero(t, code, "answered once the markers are written")
			require.GreaterOrEqual(t, took, wait)
		} else {
			require.Equal(t, codeConcurrent, code)
			require.Less(t, took, wait)
			h.state(h.c, "etl", CompleteCommit)
			require.Zero(t, h.add(h.c, "etl", pid, epoch, orders1), "the retry")
		}
		h.leaders.mu.Lock()
		h.leaders.hold = nil
		h.leaders.mu.Unlock()
		require.Zero(t, h.end(h.c, "etl", pid, epoch, true))
		h.state(h.c, "etl", CompleteCommit)
	}
}
