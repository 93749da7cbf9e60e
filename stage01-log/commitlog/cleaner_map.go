package commitlog

import "crypto/md5"

// The cleaner's key -> offset map, Kafka's OffsetMap.
const (
	// offsetMapEntryBytes is what Kafka's SkimpyOffsetMap spends on a key:
	// a 16-byte MD5 digest of the key and an 8-byte offset.
	offsetMapEntryBytes = md5.Size + 8
	// offsetMapLoadFactor is Kafka's log.cleaner.io.buffer.load.factor: a
	// map is full at 90% of its slots.
	offsetMapLoadFactor = 0.9
	// minDedupeBufferSize is the smallest log.cleaner.dedupe.buffer.size
	// accepted: any positive size holds at least one key (Kafka checks
	// only an upper bound).
	minDedupeBufferSize = 1
)

// offsetMap maps each key of the dirty range to the offset of its latest
// record. Like Kafka's SkimpyOffsetMap it stores a key as its MD5 digest:
// 16 bytes whatever the key's length, and two keys share a digest with odds
// of 2^-128 a pair (the older key's latest record would then be dropped;
// Kafka accepts the same odds).
//
// Kafka preallocates log.cleaner.dedupe.buffer.size bytes and probes in
// them by hand. A Go map keyed by the digest is the simpler choice here: it
// grows only as far as a round needs and is garbage once the round ends,
// which matters when one test process runs many brokers, each with a
// Manager and a cleaner. It spends more per key than Kafka's 24 bytes
// (about 30 to 60, with the map's growth), so the bound is counted in
// Kafka's terms: the buffer size over 24 bytes, times the load factor, is
// the most keys a round takes in, the same number Kafka's cleaner would.
type offsetMap struct {
	offsets  map[[md5.Size]byte]int64 // digest of a key -> offset of its latest record
	capacity int                      // most keys before the map is full
	// latest is Kafka's latestOffset: the last offset the map has covered.
	// A record past it was not looked at, so it is kept whatever its key.
	latest int64
}

// newOffsetMap makes an empty map for a dirty range starting at firstDirty,
// bounded by a dedupe buffer of bufferSize bytes.
func newOffsetMap(bufferSize, firstDirty int64) *offsetMap {
	capacity := max(int(float64(bufferSize/offsetMapEntryBytes)*offsetMapLoadFactor), 1)
	return &offsetMap{offsets: make(map[[md5.Size]byte]int64, min(capacity, 1<<16)), capacity: capacity, latest: firstDirty - 1}
}

// put records offset as key's latest. It refuses a new key once the map is
// full and reports it; a key already in the map is always updated (Kafka
// stops at the first record after the map fills, whatever its key; taking
// the records whose keys are known costs no memory and cleans more).
func (m *offsetMap) put(key []byte, offset int64) (full bool) {
	d := md5.Sum(key)
	if _, ok := m.offsets[d]; !ok && len(m.offsets) >= m.capacity {
		return true
	}
	m.offsets[d] = offset
	m.latest = offset
	return false
}

// get returns the latest offset of key, or -1 if the map does not hold it.
func (m *offsetMap) get(key []byte) int64 {
	if off, ok := m.offsets[md5.Sum(key)]; ok {
		return off
	}
	return -1
}
