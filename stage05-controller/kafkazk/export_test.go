package kafkazk

import "time"

// ExpireConfigChangesAfter shortens a listener's notification expiration
// (15 minutes, as Kafka's) for a test.
func ExpireConfigChangesAfter(l *ConfigChangeListener, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiration = d
}
