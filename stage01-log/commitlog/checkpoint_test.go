package commitlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOffsetCheckpointIsKafkasTextFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), RecoveryPointCheckpointFile)
	require.NoError(t, WriteOffsetCheckpoint(path, map[TopicPartition]int64{{"orders", 3}: 1234}))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "0\n1\norders 3 1234\n", string(data))

	want := map[TopicPartition]int64{{"orders", 3}: 1234, {"my-topic-with-dashes", 0}: 0, {"x", 11}: 1 << 40}
	require.NoError(t, WriteOffsetCheckpoint(path, want))
	got, err := ReadOffsetCheckpoint(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestMissingCheckpointIsEmpty(t *testing.T) {
	got, err := ReadOffsetCheckpoint(filepath.Join(t.TempDir(), "nope"))
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestMalformedCheckpointNamesFileAndLine(t *testing.T) {
	for name, content := range map[string]string{
		"bad version": "1\n0\n",
		"bad count":   "0\n2\nt 0 1\n",
		"bad entry":   "0\n1\nt zero 1\n",
		"empty":       "",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
			_, err := ReadOffsetCheckpoint(path)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, "line")
		})
	}
}

func TestParseTopicPartition(t *testing.T) {
	tp, err := ParseTopicPartition("my-topic-12")
	require.NoError(t, err)
	require.Equal(t, TopicPartition{"my-topic", 12}, tp)
	require.Equal(t, "my-topic-12", tp.String())
	for _, bad := range []string{"topic", "-1", "topic-", "topic-x", "topic-99999999999"} {
		_, err := ParseTopicPartition(bad)
		require.Error(t, err, bad)
	}
}
