package broker

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultMaxPartitions is how many partitions a broker on this machine can
// hold: a partition keeps its active segment's file open and maps its two
// index files (seed §2.1.7), so the open-file limit (RLIMIT_NOFILE, which
// Go raises to its hard limit at start) and the kernel's limit on memory
// mappings (vm.max_map_count, Linux) bound it. Half the descriptors are
// left for connections and for reads of older segments, and a quarter of
// the mappings for everything else. With the 20,000 descriptors of the
// workbook's machines that is 10,000 partitions; Kafka itself sets no such
// limit and fails when the descriptors run out.
func DefaultMaxPartitions() int {
	n := min(1<<20, openFileLimit()/2)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if maps, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && maps > 0 {
			n = min(n, maps*3/4/2) // two mappings a partition
		}
	}
	return max(n, 1)
}

// DefaultMaxConnections is the broker's default max.connections: the other
// half of the open-file limit (Kafka: unlimited, which lets new clients
// hang in the accept queue once descriptors run out).
func DefaultMaxConnections() int { return max(openFileLimit()/2, 1) }

// openFileLimit is RLIMIT_NOFILE, or a generous guess if it cannot be read.
func openFileLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<30 {
		return int(lim.Cur)
	}
	return 1 << 20
}
