package record

import "math/bits"

// Records use protobuf-style zigzag varints (chapter 1, "A batch, byte by
// byte"): small magnitudes of either sign (-1 for a null key, small
// deltas) take one byte.

// build 01.A: zigzag varints: encode, size and decode
// tests: TestVarintEncoding, TestReadVarintRejectsTruncatedAndOverlong

// appendVarint appends v as a zigzag varint. Kafka's varint (int32) and
// varlong (int64) share the encoding; only the range differs.
func appendVarint(dst []byte, v int64) []byte {
	// exercise 01.1: encode a zigzag varint
	// hint: zigzag first, so that small magnitudes of either sign stay small, then seven bits a byte; readVarint, below, is the inverse
	// tests: TestVarintEncoding
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
	// end exercise
}

// varintLen is the number of bytes appendVarint uses for v.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	// One byte per started group of 7 bits, at least one byte.
	return (bits.Len64(u|1) + 6) / 7
}

// readVarint decodes a zigzag varint of at most maxBytes bytes (5 for a
// varint, 10 for a varlong) from the front of b. n is the number of bytes
// read, or 0 if b ends too early or the value is longer than maxBytes.
func readVarint(b []byte, maxBytes int) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		// One byte: most lengths, deltas and counts of small records. A
		// branch the compiler inlines spares the loop and its shifts.
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	var u uint64
	var shift uint
	for i := 0; i < len(b) && i < maxBytes; i++ {
		c := b[i]
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		shift += 7
	}
	return 0, 0
}

// end build
