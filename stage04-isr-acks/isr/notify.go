package isr

import (
	"maps"
	"slices"
	"time"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// ISR change notifications, batched as Kafka 2.x batches them
// (ReplicaManager.maybePropagateIsrChanges up to 2.6, ZkIsrManager in 2.7
// and 2.8). Each one is a znode the controller reads and deletes before it
// sends every broker UpdateMetadata: one per change would cost the
// controller a round of UpdateMetadata to every broker per change, and a
// broker that restarts makes thousands of changes as its followers rejoin.
// So a leader collects the partitions it changed, and writes one
// notification for all of them once changes stop coming for Linger, or
// once the last notification is MaxDelay old while they keep coming.

// IsrChangePropagationConfig says when ISR changes are notified (Kafka's
// IsrChangePropagationConfig, fixed values in Kafka that its tests
// override; here Options.Propagation).
type IsrChangePropagationConfig struct {
	// CheckInterval is how often the notifier looks (checkIntervalMs).
	CheckInterval time.Duration
	// Linger: a notification is written once no change came for this
	// long (lingerMs)...
	Linger time.Duration
	// MaxDelay: ...or once the last one is this old (maxDelayMs).
	MaxDelay time.Duration
}

// DefaultIsrChangePropagation is Kafka's: look every 2.5 s; notify after
// 5 s without a change, or 60 s after the last notification.
var DefaultIsrChangePropagation = IsrChangePropagationConfig{
	CheckInterval: 2500 * time.Millisecond, Linger: 5 * time.Second, MaxDelay: 60 * time.Second}

// orDefaults fills the zero fields with Kafka's values.
func (c IsrChangePropagationConfig) orDefaults() IsrChangePropagationConfig {
	d := DefaultIsrChangePropagation
	if c.CheckInterval <= 0 {
		c.CheckInterval = d.CheckInterval
	}
	if c.Linger <= 0 {
		c.Linger = d.Linger
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = d.MaxDelay
	}
	return c
}

// recordIsrChange adds tp to the changes the next notification names
// (Kafka's recordIsrChange).
func (m *Manager) recordIsrChange(tp commitlog.TopicPartition) {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	m.isrChanges[tp] = struct{}{}
	m.lastIsrChange = m.now()
}

// maybePropagateIsrChanges writes one notification naming every partition
// changed since the last, if there is any and either no change came for
// Linger or the last notification is older than MaxDelay. It runs every
// CheckInterval on the notifier's goroutine, which alone writes
// notifications; the store is called with no lock held, and a failed write
// puts the partitions back for the next check.
func (m *Manager) maybePropagateIsrChanges() {
	now := m.now()
	m.notifyMu.Lock()
	if len(m.isrChanges) == 0 ||
		(now.Sub(m.lastIsrChange) <= m.propagation.Linger && now.Sub(m.lastPropagation) <= m.propagation.MaxDelay) {
		m.notifyMu.Unlock()
		return
	}
	tps := slices.SortedFunc(maps.Keys(m.isrChanges), func(a, b commitlog.TopicPartition) int { return a.Compare(b) })
	clear(m.isrChanges)
	m.lastPropagation = now
	m.notifyMu.Unlock()

	if err := m.store.NotifyIsrChange(tps); err != nil {
		m.logger.Error("cannot notify the controller of ISR changes; trying again at the next check", "partitions", len(tps), "err", err)
		m.notifyMu.Lock()
		for _, tp := range tps {
			m.isrChanges[tp] = struct{}{}
		}
		m.notifyMu.Unlock()
		return
	}
	m.logger.Debug("notified the controller of ISR changes", "partitions", tps)
}
