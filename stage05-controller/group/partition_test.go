package group_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage05-controller/group"
)

// PartitionFor must put a group on the partition Kafka would, or a client
// that asks a Java broker and a client that asks ours would disagree on
// the coordinator: abs(String.hashCode) % offsets.topic.num.partitions.
func TestPartitionForMatchesJavaStringHashCode(t *testing.T) {
	for _, tc := range []struct {
		group string
		hash  int64 // Java's "group".hashCode()
		want  int32 // Utils.abs(hash) % 50
	}{
		{"test", 3556498, 48},
		{"hello", 99162322, 22},
		{"", 0, 0},
		// The one string everyone uses for Integer.MIN_VALUE: Math.abs
		// would leave it negative; Kafka's Utils.abs maps it to 0.
		{"polygenelubricants", -1 << 31, 0},
		// A negative hash that is not MIN_VALUE: abs, then modulo.
		{"consumers-Ω", -858380007, 858380007 % 50},
		// Non-ASCII in the Basic Multilingual Plane: one UTF-16 unit per
		// character, which is not its UTF-8 bytes: 'ü' is 0xFC = 252 and
		// 'ß' 0xDF = 223, so h = ((((103·31 + 114)·31 + 252)·31 + 223)·31
		// + 101 = 98768023 (g=103, r=114, e=101).
		{"grüße", 98768023, 23},
		// Outside the BMP, Java hashes the surrogate pair: U+1F600 is
		// 0xD83D 0xDE00, so h = 55357·31 + 56832 = 1772899 (hashing the
		// code point 0x1F600 = 128512 would give partition 12).
		{"😀", 1772899, 49},
	} {
		require.Equal(t, tc.want, group.PartitionFor(tc.group, 50), "group %q (hashCode %d)", tc.group, tc.hash)
	}
	// With one partition every group is in partition 0.
	require.Equal(t, int32(0), group.PartitionFor("polygenelubricants", 1))
	require.Equal(t, int32(3556498%7), group.PartitionFor("test", 7))
}
