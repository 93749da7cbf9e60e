package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

func TestLogDirBelongingToAnotherBrokerIsRefused(t *testing.T) {
	ts := openStore(t)
	ts.close()
	_, err := Open(ts.dir, 7, commitlog.DefaultManagerConfig(), Options{Logger: quietLogger})
	require.ErrorContains(t, err, "belongs to broker.id 0, not 7")
	ts.open() // broker 0's directory still opens
}

// TestLogDirTakesTheClusterIDItIsGivenAndRefusesAnother: a broker that
// joins a cluster (stage 05: /cluster/id) writes that id into a new
// meta.properties, and refuses a directory of another cluster, as Kafka's
// InconsistentClusterIdException.
func TestLogDirTakesTheClusterIDItIsGivenAndRefusesAnother(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 0, commitlog.DefaultManagerConfig(), Options{ClusterID: "Dz5dfJsaTi2Ma0ovHg08Ww", Logger: quietLogger})
	require.NoError(t, err)
	require.Equal(t, "Dz5dfJsaTi2Ma0ovHg08Ww", s.ClusterID())
	require.NoError(t, s.Close())

	_, err = Open(dir, 0, commitlog.DefaultManagerConfig(), Options{ClusterID: "fRqML0s-T2CaW_48IdTn-A", Logger: quietLogger})
	require.ErrorContains(t, err, "belongs to cluster Dz5dfJsaTi2Ma0ovHg08Ww, not fRqML0s-T2CaW_48IdTn-A")

	s, err = Open(dir, 0, commitlog.DefaultManagerConfig(), Options{Logger: quietLogger})
	require.NoError(t, err, "without a given id, the directory's own")
	require.Equal(t, "Dz5dfJsaTi2Ma0ovHg08Ww", s.ClusterID())
	require.NoError(t, s.Close())
}
