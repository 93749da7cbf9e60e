package ceiling

import (
	"fmt"
	"os"
	"time"
)

// WriteSequential is the baseline a broker's append path is held
// against: it creates path and writes chunk to it n times, one write(2)
// per chunk, from one goroutine, and returns how long that took, from the
// open to the close. It does not fsync: the bytes end in the page cache,
// as a broker's appends do (Kafka leaves flushing to the operating system
// unless log.flush.interval.messages says otherwise, and so do our
// brokers). The caller removes the file; removing it before the kernel
// wrote it back discards the dirty pages, so one run's writeback does not
// slow the next.
func WriteSequential(path string, chunk []byte, n int) (time.Duration, error) {
	start := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("ceiling: raw write: %w", err)
	}
	for i := range n {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return 0, fmt.Errorf("ceiling: raw write: chunk %d of %d: %w", i+1, n, err)
		}
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("ceiling: raw write: %w", err)
	}
	return time.Since(start), nil
}
