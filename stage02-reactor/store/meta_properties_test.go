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
