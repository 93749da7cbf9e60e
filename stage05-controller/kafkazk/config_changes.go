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
// A notification that cannot be read, or whose entity the callback could
// not apply (it returns an error: ZooKeeper unreachable), is not skipped:
// the listener tries it again, and those after it, every
// configChangeRetry until it can, as Kafka's listener advances past a
// notification only once it is processed. The watch is set again each
// time (a watch fires once). Processed notifications older than
// configChangeExpiration are deleted, as Kafka's are after 15 minutes,
// so that /config/changes does not grow without end.
type ConfigChangeListener struct {
	c          *Client
	handle     func(entityPath string) error
	logger     *slog.Logger
	expiration time.Duration // configChangeExpiration; tests shorten it

	mu   sync.Mutex
	last string // the newest notification handed on. Protected by mu.

	done chan struct{} // closed by Stop
	stop sync.Once
	wg   sync.WaitGroup
}

// configChangeRetry is how long the listener waits before reading
// /config/changes again after a failure.
const configChangeRetry = time.Second

// configChangeExpiration is how old a processed notification may grow
// before the listener deletes it (Kafka's changeExpirationMs).
const configChangeExpiration = 15 * time.Minute

// ListenConfigChanges starts a listener. Notifications already present
// are not handed on: the caller reads the entities' current configs after
// this returns (a change made in between reaches it either way).
func (c *Client) ListenConfigChanges(handle func(entityPath string) error) (*ConfigChangeListener, error) {
	l := &ConfigChangeListener{c: c, handle: handle, logger: c.logger, expiration: configChangeExpiration, done: make(chan struct{})}
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

// changed hands on the notifications newer than the last handed on, in
// order, and deletes the expired ones among those handed on.
func (l *ConfigChangeListener) changed() {
	names, ch, err := l.c.ConfigChangesW()
	if err != nil {
		l.logger.Warn("reading /config/changes; trying again", "err", err)
		l.wait(nil)
		return
	}
	l.mu.Lock()
	last, expiration := l.last, l.expiration
	l.mu.Unlock()
	for _, n := range names {
		if n <= last {
			continue
		}
		entity, err := l.c.ConfigChange(n)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			err = nil // deleted since it was listed: nothing to apply
		case err == nil:
			err = l.handle(entity)
		}
		if err != nil {
			l.logger.Warn("a config change notification could not be processed; trying again", "name", n, "err", err)
			l.wait(nil)
			return
		}
		l.mu.Lock()
		l.last, last = n, n
		l.mu.Unlock()
	}
	l.c.purgeConfigChanges(names, last, time.Now().Add(-expiration), l.logger)
	l.wait(ch)
}

// purgeConfigChanges deletes the notifications up to last created before
// cutoff (Kafka's purgeObsoleteNotifications). A failure is only logged:
// the next change tries again.
func (c *Client) purgeConfigChanges(names []string, last string, cutoff time.Time, logger *slog.Logger) {
	for _, n := range names {
		if n > last {
			return
		}
		p := ConfigChangesPath + "/" + n
		ok, stat, err := c.conn.Exists(p)
		if err != nil {
			logger.Warn("purging config change notifications", "name", n, "err", err)
			return
		}
		if !ok || time.UnixMilli(stat.Ctime).After(cutoff) {
			continue
		}
		if err := c.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			logger.Warn("purging config change notifications", "name", n, "err", err)
			return
		}
	}
}
