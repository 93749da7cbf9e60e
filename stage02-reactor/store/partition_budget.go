package store

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The open-file limit (RLIMIT_NOFILE, which Go raises to its hard limit at
// start) is shared out by default as: half for partitions (each keeps its
// active segment's .log file open; its index files are closed once
// mapped), a quarter for the older segments that reads open lazily and
// keep open, a quarter for connections (the broker's
// DefaultMaxConnections). A partition was given a quarter until stage 05's
// benchmark needed 10,000 replicas a broker on machines whose limit is
// 20,000. The listener, the epoll sets, eventfds and
// checkpoint files need a handful. Kafka itself sets no such limits and
// fails when the descriptors run out.

// DefaultMaxPartitions is how many partitions a broker on this machine
// holds by default: half the open-file limit, and at most what the
// kernel's limit on memory mappings (vm.max_map_count, Linux) allows for
// two mapped indexes a partition (seed §2.1.7), leaving a quarter of the
// mappings for everything else. With the 20,000 descriptors of the
// workbook's machines that is 10,000 partitions.
func DefaultMaxPartitions() int {
	n := min(1<<20, OpenFileLimit()/2)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if maps, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && maps > 0 {
			n = min(n, maps*3/4/2) // two mappings a partition
		}
	}
	return max(n, 1)
}

// OpenFileLimit is RLIMIT_NOFILE, or a generous guess if it cannot be read:
// what DefaultMaxPartitions and the broker's DefaultMaxConnections share out.
func OpenFileLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<30 {
		return int(lim.Cur)
	}
	return 1 << 20
}

// countLocked is the partitions held, offline or being created: what
// counts against MaxPartitions. Called with mu held.
func (s *Store) countLocked() int {
	n := len(s.partitions) + s.pending
	for _, parts := range s.offline {
		n += len(parts)
	}
	for _, reserved := range s.creating {
		n += int(reserved)
	}
	return n
}

// reserveLocked checks that n more partitions fit. Called with mu held.
func (s *Store) reserveLocked(n int) error {
	if held := s.countLocked(); held+n > s.maxPartitions {
		return fmt.Errorf("%w: %d more would make %d, and this broker holds at most %d (each partition keeps a file open; "+
			"the limit follows the open-file limit, see DefaultMaxPartitions)", ErrTooManyPartitions, n, held+n, s.maxPartitions)
	}
	return nil
}

// Fits reports, as ErrTooManyPartitions, whether n more partitions would
// take the broker past MaxPartitions.
func (s *Store) Fits(n int) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.reserveLocked(n)
}
