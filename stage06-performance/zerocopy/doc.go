// Package zerocopy sends log bytes to consumers and followers without
// copying them through the broker (seed §2.1.5): a Fetch response points
// at a region of a segment file (stage 02's network.Send), and
// SendfileRegionSender writes that region to the socket with sendfile(2),
// which moves the bytes from the page cache to the socket inside the
// kernel, as Kafka's FileChannel.transferTo does.
//
// The copying path it replaces (stage 02's network.CopyRegionSender)
// reads the region into a user-space buffer with pread and writes the
// buffer with write: two copies across the user/kernel boundary and twice
// the system calls. It stays as the baseline of the benchmarks, and as
// the sender on systems without Linux's sendfile.
package zerocopy
