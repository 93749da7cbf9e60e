// Package controller is Kafka's controller on ZooKeeper (seed §1.1): one
// broker of the cluster, elected through the ephemeral /controller znode,
// that decides which replica leads each partition and tells the brokers.
//
// This file holds the election and the controller's life: every broker
// runs a Controller; the one that wins the election is active until its
// session ends or it resigns, and every other watches /controller to run
// again when it goes. What the active controller does is in the files
// after it.
package controller

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
	"github.com/kafkaworkbook/workbook/stage05-controller/kafkazk"
)

// Options configure a Controller.
type Options struct {
	Logger *slog.Logger
	// OnElected runs on the event goroutine when this broker becomes the
	// controller, with the epoch it won (Kafka's onControllerFailover);
	// OnResigned when it stops being the controller
	// (onControllerResignation). Both may be nil.
	OnElected  func(epoch kafkazk.ControllerEpoch)
	OnResigned func()
	// Now is the clock for /controller's timestamp; time.Now if nil.
	Now func() time.Time
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable; a topic's config overrides it.
	UncleanLeaderElection bool
	// AutoLeaderRebalance (auto.leader.rebalance.enable, default true),
	// LeaderImbalanceCheckInterval
	// (leader.imbalance.check.interval.seconds, default 300 s) and
	// LeaderImbalancePerBrokerPercentage
	// (leader.imbalance.per.broker.percentage, default 10): the preferred
	// leader election (rebalance.go).
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int
	// InterBrokerListener is the listener the controller reaches brokers
	// on, and tells them to reach each other on (LeaderAndIsr's live
	// leaders, where followers fetch): inter.broker.listener.name, the
	// same on every broker. "" means each broker's PLAINTEXT endpoint.
	InterBrokerListener string
}

// DefaultOptions are Kafka's defaults.
func DefaultOptions() Options {
	return Options{AutoLeaderRebalance: true, LeaderImbalanceCheckInterval: 300 * time.Second, LeaderImbalancePerBrokerPercentage: 10}
}

// Controller is one broker's controller: active when the broker won the
// election, standing by otherwise.
type Controller struct {
	zk       *kafkazk.Client
	brokerID int32
	opts     Options
	logger   *slog.Logger

	queue   *eventQueue
	stopped chan struct{} // closed when the event goroutine ends
	done    chan struct{} // closed by Close: the watchers stop
	wg      sync.WaitGroup

	// epoch is the epoch this broker won, while it is the controller; the
	// zero ControllerEpoch otherwise. Written on the event goroutine only,
	// read anywhere.
	epoch atomic.Pointer[kafkazk.ControllerEpoch]
	// activeID is the controller this broker last saw in /controller (-1:
	// none). Event goroutine only.
	activeID int32

	// While active (event goroutine only): what the controller knows,
	// its connections to the brokers, and the term, which grows at each
	// election and resignation so that an event queued in an earlier term
	// is ignored.
	state    *clusterState
	channels *channels
	term     int
	// termDone is closed when the term ends (resigned): the goroutines
	// the term started (its watches, its timers) select on it and end
	// with it, instead of waiting for a watch that may never fire. Nil
	// while standing by. Event goroutine only; each goroutine holds its
	// own copy.
	termDone chan struct{}
	// controllerWatchDone ends the goroutine waiting on the last
	// /controller watch when elect arms a newer one (the newer watch
	// fires for the same change). Event goroutine only.
	controllerWatchDone chan struct{}
	// beforeStateWrite, when set (by a test, through export_test.go),
	// runs before each write of partition states, with the partitions
	// about to be written: a test changes a state under the controller
	// there. Event goroutine only.
	beforeStateWrite func([]commitlog.TopicPartition)
}

// New returns a controller for brokerID on the session zk; nothing runs
// until Start.
func New(zk *kafkazk.Client, brokerID int32, opts Options) *Controller {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Controller{zk: zk, brokerID: brokerID, opts: opts, queue: newEventQueue(),
		stopped: make(chan struct{}), done: make(chan struct{}), activeID: -1,
		logger: opts.Logger.With("controller_candidate", brokerID)}
	return c
}

// Start runs the event goroutine and the first election (Kafka's Startup
// event: watch /controller, then elect). A new ZooKeeper session (the old
// one expired) resigns and runs again.
func (c *Controller) Start() {
	go c.run()
	c.zk.OnNewSession(func() { c.queue.put(event{"Expire", (*Controller).expire}) })
	c.queue.put(event{"Startup", (*Controller).elect})
	c.wg.Go(c.watchSession)
}

// Close stops the controller: it resigns if active (the broker's
// session, closed after, deletes /controller) and its goroutines end.
func (c *Controller) Close() {
	c.queue.put(event{"Shutdown", func(c *Controller) { c.resign("shutting down") }})
	c.queue.put(event{"Stop", func(c *Controller) { c.queue.close() }})
	<-c.stopped
	close(c.done)
	c.wg.Wait()
}

// IsActive reports whether this broker is the controller.
func (c *Controller) IsActive() bool { return c.epoch.Load() != nil }

// Epoch is the epoch this broker won, and whether it is the controller.
func (c *Controller) Epoch() (kafkazk.ControllerEpoch, bool) {
	if e := c.epoch.Load(); e != nil {
		return *e, true
	}
	return kafkazk.ControllerEpoch{}, false
}

// elect is Kafka's KafkaController.elect: watch /controller; if a
// controller is there, remember it and wait for the watch; otherwise run.
// The watch is armed before the attempt, so a controller that goes
// between the attempt and the watch still wakes this broker.
func (c *Controller) elect() {
	id, ok, changed, err := c.zk.ControllerW()
	if err != nil {
		c.logger.Warn("cannot watch /controller; retrying", "err", err)
		c.retryLater()
		return
	}
	c.watchController(changed)
	if ok {
		c.activeID = id
		if id == c.brokerID && !c.IsActive() {
			// Our own registration from before a failover we do not
			// remember (a restart within the session timeout): it must go
			// before anyone, us included, can be elected cleanly.
			c.logger.Info("found /controller from an earlier run of this broker; deleting it")
			if err := c.zk.ResignController(); err != nil {
				c.logger.Warn("delete stale /controller", "err", err)
			}
		}
		return
	}
	epoch, err := c.zk.ElectController(c.brokerID, c.opts.Now())
	switch {
	case errors.Is(err, kafkazk.ErrControllerExists):
		c.activeID, _, _ = c.zk.ControllerID()
		c.logger.Info("another broker won the controller election", "controller", c.activeID)
		return
	case err != nil:
		c.logger.Warn("controller election failed; retrying", "err", err)
		c.retryLater()
		return
	}
	c.activeID = c.brokerID
	c.epoch.Store(&epoch)
	c.logger.Info("elected controller", "epoch", epoch.Epoch, "epoch_zk_version", epoch.ZkVersion)
	c.failover(epoch)
	if !c.IsActive() {
		return // the failover failed and resigned
	}
	if c.opts.OnElected != nil {
		c.opts.OnElected(epoch)
	}
}

// watchController queues a ControllerChange event when the watch fires.
// Only the newest watch has a goroutine: elect runs again without the
// last watch having fired (after an expiry, a lost session, a failed
// attempt), and ZooKeeper tells every watch of /controller of the same
// change, so the older goroutine ends here instead of waiting for it.
func (c *Controller) watchController(changed <-chan zk.Event) {
	if c.controllerWatchDone != nil {
		close(c.controllerWatchDone)
	}
	superseded := make(chan struct{})
	c.controllerWatchDone = superseded
	c.wg.Go(func() {
		select {
		case <-c.done:
		case <-superseded:
		case ev := <-changed:
			c.queue.put(event{"ControllerChange(" + ev.Type.String() + ")", (*Controller).controllerChange})
		}
	})
}

// controllerChange: /controller was created, changed or deleted. If this
// broker was the controller and is no longer named there, it resigns;
// then, as every broker does, it runs if the office is empty (Kafka's
// Reelect after ControllerChange).
func (c *Controller) controllerChange() {
	id, ok, err := c.zk.ControllerID()
	if err == nil && c.IsActive() && (!ok || id != c.brokerID) {
		c.resign("another broker's /controller, or none")
	}
	c.elect()
}

// expire: the ZooKeeper session expired and a new one began. /controller,
// if it was ours, is gone with the old session: resign, then run again.
func (c *Controller) expire() {
	c.resign("ZooKeeper session expired")
	c.elect()
}

// resign stops acting as the controller. Idempotent.
func (c *Controller) resign(why string) {
	if c.state == nil && !c.IsActive() {
		return
	}
	c.epoch.Store(nil)
	c.logger.Warn("resigning as controller", "why", why)
	c.resigned()
	if c.opts.OnResigned != nil {
		c.opts.OnResigned()
	}
}

// watchSession resigns before the ensemble can have expired the
// session, so that two controllers never act at once. The client learns
// of an expiry only when it reconnects, too late: another broker may have
// been elected meanwhile. But it notices a silent server after
// go-zookeeper's read timeout (2/3 of the session timeout), and the
// server expires the session a full timeout after it last heard from the
// client, at least a third of the timeout after the client noticed. So a
// controller that has been disconnected for a sixth of the timeout
// resigns (checked every 40th): before the session can have expired, at
// the price of a needless election when the connection comes back in
// time. Kafka's
// controller waits to be told; its writes would fail the epoch check, but
// meanwhile it could still send brokers stale decisions.
func (c *Controller) watchSession() {
	limit := c.zk.SessionTimeout() / 6
	tick := time.NewTicker(c.zk.SessionTimeout() / 40)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
			// Stop acting here and now: the event goroutine may be
			// blocked in a ZooKeeper call that waits for the connection.
			// Requests to brokers check IsActive before they go; the
			// event does the rest when the goroutine is free.
			if c.zk.DisconnectedFor() >= limit && c.epoch.Swap(nil) != nil {
				c.logger.Warn("cut off from ZooKeeper: the session may expire; the controller stops acting",
					"disconnected_for", c.zk.DisconnectedFor().Round(time.Millisecond))
				c.queue.put(event{"SessionLost", func(c *Controller) {
					c.resign("cut off from ZooKeeper: the session may expire")
					// Run again: if the session survived (the connection came
					// back in time, or ZooKeeper lost and regained its quorum,
					// which renews every session), /controller still names this
					// broker and no watch will fire; elect deletes it so that
					// an election happens.
					c.elect()
				}})
			}
		}
	}
}

// retryLater queues another election attempt after a pause.
func (c *Controller) retryLater() {
	c.wg.Go(func() {
		select {
		case <-c.done:
		case <-time.After(500 * time.Millisecond):
			c.queue.put(event{"Reelect", (*Controller).elect})
		}
	})
}
