package store

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

var quietLogger = slog.New(slog.DiscardHandler)

// testStore is a store of broker 0 on a log directory in a temp dir.
type testStore struct {
	*Store
	t   *testing.T
	dir string
}

// openStore opens a store on a new log directory.
func openStore(t *testing.T) *testStore {
	t.Helper()
	ts := &testStore{t: t, dir: filepath.Join(t.TempDir(), "kafka-logs")}
	ts.open()
	return ts
}

func (ts *testStore) open() {
	ts.t.Helper()
	s, err := Open(ts.dir, 0, commitlog.DefaultManagerConfig(), Options{Logger: quietLogger})
	require.NoError(ts.t, err)
	ts.Store = s
	ts.t.Cleanup(func() { ts.close() })
}

// close closes the store cleanly; reopen opens it again on the same log
// directory.
func (ts *testStore) close() {
	if ts.Store == nil {
		return
	}
	require.NoError(ts.t, ts.Close())
	ts.Store = nil
}

func (ts *testStore) reopen() {
	ts.close()
	ts.open()
}

// createTopic creates a topic without configs.
func (ts *testStore) createTopic(name string, partitions int32) {
	ts.t.Helper()
	_, err := ts.CreateTopic(name, partitions, nil)
	require.NoError(ts.t, err, "create topic %s", name)
}
