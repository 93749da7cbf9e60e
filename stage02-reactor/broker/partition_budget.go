package broker

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The open-file limit (RLIMIT_NOFILE, which Go raises to its hard limit at
// start) is shared out by default as: a quarter for partitions (each keeps
// its active segment's .log file open), a quarter for the older segments
// that reads open lazily and keep open, half for connections
// (DefaultMaxConnections). The listener, the epoll sets, eventfds and
// checkpoint files need a handful. Kafka itself sets no such limits and
// fails when the descriptors run out.

// DefaultMaxPartitions is how many partitions a broker on this machine
// holds by default: a quarter of the open-file limit, and at most what the
// kernel's limit on memory mappings (vm.max_map_count, Linux) allows for
// two mapped indexes a partition (seed §2.1.7), leaving a quarter of the
// mappings for everything else. With the 20,000 descriptors of the
// workbook's machines that is 5,000 partitions.
func DefaultMaxPartitions() int {
	n := min(1<<20, openFileLimit()/4)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if maps, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && maps > 0 {
			n = min(n, maps*3/4/2) // two mappings a partition
		}
	}
	return max(n, 1)
}

// DefaultMaxConnections is the broker's default max.connections: half the
// open-file limit (Kafka: unlimited, which lets new clients hang in the
// accept queue once descriptors run out).
func DefaultMaxConnections() int { return max(openFileLimit()/2, 1) }

// openFileLimit is RLIMIT_NOFILE, or a generous guess if it cannot be read.
func openFileLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<30 {
		return int(lim.Cur)
	}
	return 1 << 20
}
