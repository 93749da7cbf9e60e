package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestACreationCutShortByACrashIsUndoneAtStart: the creation marker is
// still there when the store opens (the broker crashed before finishing),
// so the partitions it finds of that topic go: the creation was never
// acknowledged. Before the marker, a crash at partition 6,653 of 100,000
// left a topic whose only partition was 6,653.
func TestACreationCutShortByACrashIsUndoneAtStart(t *testing.T) {
	ts := openStore(t)
	ts.createTopic("kept", 1)
	ts.createTopic("ghost", 3)
	ts.close()
	require.NoError(t, os.WriteFile(filepath.Join(ts.dir, creatingMarkerPrefix+"ghost"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ts.dir, creatingMarkerPrefix+"kept"), 0o755)) // not a file: not a marker
	require.NoError(t, os.RemoveAll(filepath.Join(ts.dir, "ghost-0")))                         // as if the crash came before it
	ts.open()
	require.Empty(t, ts.TopicPartitions("ghost"))
	require.NoDirExists(t, filepath.Join(ts.dir, "ghost-1"))
	require.NoFileExists(t, filepath.Join(ts.dir, creatingMarkerPrefix+"ghost"))
	require.Len(t, ts.TopicPartitions("kept"), 1)
}

// TestATopicNamedLikeACreationMarkerIsNotOne: a topic's partition
// directory can never look like the marker of an unfinished creation.
func TestATopicNamedLikeACreationMarkerIsNotOne(t *testing.T) {
	ts := openStore(t)
	ts.createTopic(".creating-x", 1) // once mistaken for the marker of a topic "x-0"
	ts.createTopic("x-0", 1)
	ts.reopen()
	require.Len(t, ts.TopicPartitions(".creating-x"), 1)
	require.Len(t, ts.TopicPartitions("x-0"), 1)
}
