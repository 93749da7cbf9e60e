package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkaworkbook/workbook/stage06-performance/wire"
)

// ErrClosed is returned by the calls made after Close.
var ErrClosed = errors.New("consumer: closed")

// Consumer reads records from the partitions assigned to it, by a group
// (Subscribe) or by hand (Assign). Its methods are safe for concurrent
// use; Poll calls are serialized (see Poll).
type Consumer struct {
	cfg  Config       // immutable after New
	log  *slog.Logger // immutable after New
	pool *wire.Pool   // one connection per broker and the metadata; safe for concurrent use

	// assigned is the current assignment, swapped whole (swapAssignment);
	// its partition states are read and written with atomics only.
	assigned atomic.Pointer[assignment]
	// changed wakes the fetchers when the assignment or the leaders change.
	changed broadcaster
	// fetched carries fetch responses from the fetchers to Poll; its
	// capacity (BufferedFetches) is how far the fetchers run ahead.
	fetched chan *fetch
	// errs carries partition errors no fetcher can handle (a reset with
	// auto.offset.reset=none) to Poll; sends never block.
	errs chan error
	// refresh asks the metadata loop for a refresh now; sends never block.
	refresh chan struct{}

	group *member // nil without group.id

	poller poller // Poll's state; see poll.go

	ctx    context.Context // cancelled by Close: stops every goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup

	fetchersMu sync.Mutex         // guards fetchers (not offsets: brokers come and go)
	fetchers   map[int32]*fetcher // by broker id, started on first need, run until Close
	closed     atomic.Bool        // set once by Close
}

// New starts a consumer with nothing assigned: call Subscribe (with a
// group.id) or Assign.
func New(cfg Config, log *slog.Logger) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BufferedFetches <= 0 {
		cfg.BufferedFetches = 4
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg: cfg, log: log,
		pool:     wire.NewPool(cfg.BootstrapServers, wire.Options{ClientID: cfg.ClientID, RequestTimeout: cfg.RequestTimeout + cfg.FetchMaxWait}),
		fetched:  make(chan *fetch, cfg.BufferedFetches),
		errs:     make(chan error, 16),
		refresh:  make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		fetchers: map[int32]*fetcher{},
	}
	c.changed.init()
	c.assigned.Store(newAssignment(nil))
	c.poller.init(c)
	c.wg.Go(c.metadataLoop)
	if cfg.GroupID != "" {
		c.group = newMember(c)
		c.wg.Go(c.group.commitLoop)
	}
	return c, nil
}

// Subscribe joins the consumer's group (group.id) for topics; the
// coordinator's rebalances decide which partitions it reads. It returns
// at once: the first assignment arrives in the background.
func (c *Consumer) Subscribe(topics ...string) error {
	if c.group == nil {
		return fmt.Errorf("%w: Subscribe needs %s", ErrConfig, KeyGroupID)
	}
	if !c.group.subscribe(topics) {
		return errors.New("consumer: already subscribed")
	}
	c.wg.Go(c.group.run)
	return nil
}

// Assign reads parts, without a group's rebalances (Kafka's
// assign()), replacing what was assigned. Each starts at its committed
// offset when the consumer has a group.id and one was committed, else
// where auto.offset.reset says.
func (c *Consumer) Assign(ctx context.Context, parts ...TopicPartition) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.group != nil && c.group.subscribed() {
		return errors.New("consumer: Assign after Subscribe")
	}
	committed := map[TopicPartition]int64{}
	if c.group != nil {
		var err error
		if committed, err = c.group.fetchCommitted(ctx, parts); err != nil {
			return err
		}
	}
	c.publish(parts, committed)
	return nil
}

// publish makes parts the assignment, each starting at its committed
// offset if it has one.
func (c *Consumer) publish(parts []TopicPartition, committed map[TopicPartition]int64) {
	states := make(map[TopicPartition]*partitionState, len(parts))
	for _, tp := range parts {
		off, ok := committed[tp]
		if !ok {
			off = unknown
		}
		states[tp] = newPartitionState(tp, off, off, c.leaderOf(tp))
	}
	c.swapAssignment(func(*assignment) *assignment { return newAssignment(states) })
	c.refreshSoon()
}

// Seek makes Poll continue tp at offset; what was fetched beyond is
// dropped. It fails if tp is not assigned.
func (c *Consumer) Seek(tp TopicPartition, offset int64) error {
	for {
		s := c.assigned.Load().parts[tp]
		if s == nil {
			return fmt.Errorf("consumer: seek %s[%d]: not assigned", tp.Topic, tp.Partition)
		}
		if c.replaceState(s, offset) {
			return nil
		}
	}
}

// Assignment lists the partitions the consumer reads now, sorted.
func (c *Consumer) Assignment() []TopicPartition {
	a := c.assigned.Load()
	out := make([]TopicPartition, len(a.list))
	for i, s := range a.list {
		out[i] = s.tp
	}
	return out
}

// Position is the next offset Poll returns for tp, and false if tp is not
// assigned or its start is not known yet.
func (c *Consumer) Position(tp TopicPartition) (int64, bool) {
	s := c.assigned.Load().parts[tp]
	if s == nil {
		return 0, false
	}
	p := s.position.Load()
	return p, p != unknown
}

// Committed is the last offset committed for tp by this consumer or
// found committed when tp was assigned, and false if none is known.
func (c *Consumer) Committed(tp TopicPartition) (int64, bool) {
	s := c.assigned.Load().parts[tp]
	if s == nil {
		return 0, false
	}
	o := s.committed.Load()
	return o, o != unknown
}

// Close commits the positions (everything Poll returned: the application
// is done with it), leaves the group and stops.
func (c *Consumer) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return ErrClosed
	}
	var err error
	if c.group != nil {
		err = c.group.close(ctx)
	}
	c.cancel()
	c.wg.Wait()
	c.pool.Close()
	return err
}

// sleep waits d or until Close.
func (c *Consumer) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}
