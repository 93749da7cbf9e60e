package commitlog

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIndexLookupFindsTheLastEntryAtOrBelow: both indexes answer a lookup
// with the entry holding the largest key at or below the target, for every
// target around every entry of indexes of 0 to 20 entries; a target before
// the first entry gets the segment's start. Reads alone would not show a
// wrong answer: a lookup that lands too early only scans further, and one
// that lands too late is caught by translateOffset's guard, which scans the
// whole segment.
func TestIndexLookupFindsTheLastEntryAtOrBelow(t *testing.T) {
	const base = 1000
	// Entry i: offset base+10i+5 at position 100i+7, timestamp 5000+10i.
	offsetOf := func(i int) int64 { return base + 10*int64(i) + 5 }
	for n := range 21 {
		dir := t.TempDir()
		offsets, err := openOffsetIndex(filepath.Join(dir, "x.index"), base, 4096)
		require.NoError(t, err)
		times, err := openTimeIndex(filepath.Join(dir, "x.timeindex"), base, 4096)
		require.NoError(t, err)
		for i := range n {
			require.NoError(t, offsets.append(offsetOf(i), int32(100*i+7)))
			require.NoError(t, times.maybeAppend(5000+10*int64(i), offsetOf(i), false))
		}

		for target := int64(base - 2); target <= offsetOf(n)+2; target++ {
			wantOffset, wantPos := int64(base), int32(0)
			for i := range n {
				if offsetOf(i) <= target {
					wantOffset, wantPos = offsetOf(i), int32(100*i+7)
				}
			}
			off, pos := offsets.lookup(target)
			require.Equal(t, []int64{wantOffset, int64(wantPos)}, []int64{off, int64(pos)},
				"offset index of %d entries, lookup(%d)", n, target)
		}
		for target := int64(4990); target <= 5000+10*int64(n)+2; target++ {
			wantTs, wantOffset := int64(-1), int64(base)
			for i := range n {
				if 5000+10*int64(i) <= target {
					wantTs, wantOffset = 5000+10*int64(i), offsetOf(i)
				}
			}
			ts, off := times.lookup(target)
			require.Equal(t, []int64{wantTs, wantOffset}, []int64{ts, off},
				"time index of %d entries, lookup(%d)", n, target)
		}
		require.NoError(t, offsets.close())
		require.NoError(t, times.close())
	}
}
