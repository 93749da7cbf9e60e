package store

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// TestAPartitionKeepsTheFirstTopicIDItIsGiven: a replica created without
// an id (stage 03 creates it, then learns the id from LeaderAndIsr) takes
// the first id it is given, keeps it across restarts, and refuses another:
// the old topic's log must not pass for a new topic of the same name.
func TestAPartitionKeepsTheFirstTopicIDItIsGiven(t *testing.T) {
	ts := openStore(t)
	tp := commitlog.TopicPartition{Topic: "t", Partition: 0}
	_, err := ts.CreatePartition(tp)
	require.NoError(t, err)
	_, ok := ts.TopicID("t")
	require.False(t, ok, "no id until one is given")

	first, second := NewTopicID(), NewTopicID()
	require.NoError(t, ts.AssignTopicID(tp, first))
	require.NoError(t, ts.AssignTopicID(tp, first), "the same id again is no change")
	require.ErrorIs(t, ts.AssignTopicID(tp, second), ErrInconsistentTopicID)
	require.Equal(t, kerr.InconsistentTopicID.Code, ts.CheckTopicID(tp, second))
	require.Zero(t, ts.CheckTopicID(tp, first))
	require.Zero(t, ts.CheckTopicID(tp, TopicID{}), "a request without an id is not checked")

	ts.reopen()
	id, ok := ts.TopicID("t")
	require.True(t, ok)
	require.Equal(t, first, id, "read back from partition.metadata")
	require.ErrorIs(t, ts.AssignTopicID(tp, second), ErrInconsistentTopicID)

	require.NoError(t, ts.DeletePartition(tp))
	_, ok = ts.TopicName(first)
	require.False(t, ok, "the id goes with the topic's last partition")
}

func TestTopicIDTextIsKafkas(t *testing.T) {
	id, err := ParseTopicID("dsP0X2ZnTzSxmrvaZGcxKA")
	require.NoError(t, err)
	require.Equal(t, "dsP0X2ZnTzSxmrvaZGcxKA", id.String())
	_, err = ParseTopicID("not-an-id")
	require.Error(t, err)
	for range 100 {
		require.NotEqual(t, byte('-'), NewTopicID().String()[0])
	}
}
