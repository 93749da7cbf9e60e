package producer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage06-performance/producer"
)

// TestMurmur2MatchesKafka: the vectors of Kafka's UtilsTest.testMurmur2,
// so that a key lands on the partition Kafka's clients choose for it.
func TestMurmur2MatchesKafka(t *testing.T) {
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		require.Equal(t, want, producer.Murmur2([]byte(key)), "murmur2(%q)", key)
	}
}

// TestKeyPartitionClearsTheSignBitAsKafkasToPositive: a negative hash
// maps through toPositive (hash & 0x7fffffff), not its absolute value.
func TestKeyPartitionClearsTheSignBitAsKafkasToPositive(t *testing.T) {
	h := producer.Murmur2([]byte("foobar")) // -790332482
	require.Equal(t, int32((uint32(h)&0x7fffffff)%7), producer.KeyPartition([]byte("foobar"), 7))
	require.Equal(t, int32(1357151166%7), producer.KeyPartition([]byte("foobar"), 7))
	for _, key := range []string{"", "a", "ab", "abc", "abcd", "abcde"} {
		p := producer.KeyPartition([]byte(key), 12)
		require.True(t, p >= 0 && p < 12, "%q → %d", key, p)
	}
}
