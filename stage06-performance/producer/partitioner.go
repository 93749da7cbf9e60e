package producer

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
)

// build 06.D: the partitioner: Kafka's murmur2 of the key
// tests: TestMurmur2MatchesKafka, TestKeyPartitionClearsTheSignBitAsKafkasToPositive

// Kafka's default partitioner, as every Kafka client implements it so that
// a key lands on the same partition whichever client produced it:
//
//   - a record with a key goes to toPositive(murmur2(key)) % partitions;
//   - a record without a key goes to the topic's sticky partition (KIP-480,
//     Kafka 2.4): all keyless records stick to one partition until the
//     batch they fill there is full or sent, and then to another chosen at
//     random among the partitions that have a leader. One partition's
//     batch fills up at a time instead of every partition's trickling, so
//     keyless records travel in bigger batches.
//
// Kafka 3.3's KIP-794 refines the switch (after batch.size bytes, weighted
// by how loaded each broker is); the workbook keeps KIP-480's rule.

// Murmur2 is Kafka's 32-bit murmur2 hash (its Utils.murmur2): the seed
// 0x9747b28c, four bytes at a time read little-endian, and the tail and
// final mix of Austin Appleby's MurmurHash2.
func Murmur2(data []byte) int32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition Kafka's default partitioner gives a key:
// the hash with its sign bit cleared (Kafka's toPositive, not Abs, so that
// MinInt32 maps to 0), modulo the partition count.
func KeyPartition(key []byte, partitions int) int32 {
	return int32(uint32(Murmur2(key))&0x7fffffff) % int32(partitions)
}

// stickyPartitions keeps each topic's sticky partition for keyless
// records (Kafka's StickyPartitionCache).
type stickyPartitions struct {
	mu     sync.Mutex
	byName map[string]int32 // topic → current sticky partition. Protected by mu.
}

// partition returns topic's sticky partition, choosing one if it has none.
func (s *stickyPartitions) partition(topic string, parts []*partition) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byName[topic]; ok && int(p) < len(parts) {
		return p
	}
	return s.nextLocked(topic, -1, parts)
}

// onNewBatch moves topic's sticky partition away from prev, whose batch is
// full or gone, unless another record already moved it.
func (s *stickyPartitions) onNewBatch(topic string, prev int32, parts []*partition) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byName[topic]; ok && p != prev && int(p) < len(parts) {
		return p
	}
	return s.nextLocked(topic, prev, parts)
}

// nextLocked chooses a partition other than prev at random, among those
// with a leader when there are any. s.mu is held.
func (s *stickyPartitions) nextLocked(topic string, prev int32, parts []*partition) int32 {
	if s.byName == nil {
		s.byName = map[string]int32{}
	}
	partitions := len(parts)
	var candidates [64]int32
	up := candidates[:0]
	for _, p := range parts {
		if p.index != prev && p.leader.Load() >= 0 {
			up = append(up, p.index)
		}
	}
	next := prev
	switch {
	case len(up) > 0:
		next = up[rand.IntN(len(up))]
	case partitions > 1:
		next = int32(rand.IntN(partitions - 1))
		if next >= prev && prev >= 0 {
			next++
		}
	default:
		next = 0
	}
	s.byName[topic] = next
	return next
}

// end build
