package kafkazk

import "time"

// ExpireConfigChangesAfter shortens a listener's notification expiration
// (15 minutes, as Kafka's) for a test.
func ExpireConfigChangesAfter(l *ConfigChangeListener, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiration = d
}

// SetThroughChroot writes data to path as the package's own writes go:
// under the client's chroot, measured against JuteMaxBuffer first.
func SetThroughChroot(c *Client, path string, data []byte) error {
	_, err := c.conn.Set(path, data, -1)
	return err
}
