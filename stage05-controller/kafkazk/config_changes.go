package kafkazk

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ConfigChangeListener follows /config/changes, Kafka's
// ZkNodeChangeNotificationListener under its DynamicConfigManager: every
// notification newer than those present when it started is read once, in
// order, and its entity path ("topics/orders", "users/alice") handed to
// the callback. The znode it names holds the entity's whole config, so a
// callback re-reads it and a notification seen twice does no harm.
//
// A notification cannot be read while ZooKeeper is unreachable: the
// listener tries again every retryInterval until it can, and the watch is
// set again each time (a watch fires once).
type ConfigChangeListener struct {
	c      *Client
	handle func(entityPath string)
	logger *slog.Logger

	mu   sync.Mutex
	last string // the newest notification handed on. Protected by mu.

	done chan struct{} // closed by Stop
	stop sync.Once
	wg   sync.WaitGroup
}

// configChangeRetry is how long the listener waits before reading
// /config/changes again after a failure.
const configChangeRetry = time.Second

// ListenConfigChanges starts a listener. Notifications already present
// are not handed on: the caller reads the entities' current configs after
// this returns (a change made in between reaches it either way).
func (c *Client) ListenConfigChanges(handle func(entityPath string)) (*ConfigChangeListener, error) {
	l := &ConfigChangeListener{c: c, handle: handle, logger: c.logger, done: make(chan struct{})}
	names, ch, err := c.ConfigChangesW()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		l.last = names[len(names)-1]
	}
	l.wait(ch)
	return l, nil
}

// Stop stops the listener and waits for a callback in progress.
func (l *ConfigChangeListener) Stop() {
	l.stop.Do(func() { close(l.done) })
	l.wg.Wait()
}

// wait reads the new notifications when ch fires (or, with ch nil, after
// configChangeRetry).
func (l *ConfigChangeListener) wait(ch <-chan zk.Event) {
	l.wg.Go(func() {
		var retry <-chan time.Time
		if ch == nil {
			t := time.NewTimer(configChangeRetry)
			defer t.Stop()
			retry = t.C
		}
		select {
		case <-l.done:
		case <-ch:
			l.changed()
		case <-retry:
			l.changed()
		}
	})
}

// changed hands on the notifications newer than the last handed on.
func (l *ConfigChangeListener) changed() {
	names, ch, err := l.c.ConfigChangesW()
	if err != nil {
		l.logger.Warn("reading /config/changes; trying again", "err", err)
		l.wait(nil)
		return
	}
	l.mu.Lock()
	var fresh []string
	for _, n := range names {
		if n > l.last {
			fresh = append(fresh, n)
		}
	}
	if len(fresh) > 0 {
		l.last = fresh[len(fresh)-1]
	}
	l.mu.Unlock()
	for _, n := range fresh {
		entity, err := l.c.ConfigChange(n)
		if errors.Is(err, zk.ErrNoNode) {
			continue // deleted since it was listed: nothing to apply
		}
		if err != nil {
			l.logger.Warn("ignoring a config change notification", "name", n, "err", err)
			continue
		}
		l.handle(entity)
	}
	l.wait(ch)
}
