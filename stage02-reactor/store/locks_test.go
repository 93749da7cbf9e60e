package store

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLookupsDoNotWaitForATopicConfigsWrite: a topic's configs are
// written to topic-configs.json and fsynced. Here that write cannot finish
// (its temporary file is a FIFO nobody reads: a write that blocks, as on a
// disk that stalls), and lookups, which every Produce and Fetch makes, are
// served meanwhile. Before, the write ran under the store's lock, so every
// lookup of the broker waited for the disk.
func TestLookupsDoNotWaitForATopicConfigsWrite(t *testing.T) {
	ts := openStore(t)
	ts.createTopic("t", 1)
	s := ts.Store // the goroutines below may outlive a failed test's close of ts
	fifo := filepath.Join(ts.dir, topicConfigsFile+".tmp")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	unblock := sync.OnceFunc(func() {
		// Reading the FIFO lets the write go on: its fsync fails (a FIFO
		// cannot be synced), and the writer removes its file.
		r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return
		}
		defer r.Close()
		require.Eventually(t, func() bool { _, err := os.Stat(fifo); return os.IsNotExist(err) },
			10*time.Second, time.Millisecond, "the blocked configs write ends")
	})
	t.Cleanup(unblock)

	written := make(chan error, 1)
	go func() { written <- s.SetTopicConfigs("t", map[string]string{"retention.ms": "1000"}) }()
	require.Eventually(t, func() bool { return goroutineIn("commitlog.WriteFileAtomic") },
		10*time.Second, time.Millisecond, "the configs write starts")

	served := make(chan struct{})
	var found bool
	go func() {
		defer close(served)
		_, code := s.Lookup("t", 0)
		_, found = s.Partition("t", 0)
		found = found && code == 0
		s.TopicState("t")
		s.TopicID("t")
		s.TopicConfigs("t")
	}()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatalf("a lookup waited for a topic configs write; goroutines:\n%s", goroutines())
	}
	require.True(t, found)
	select {
	case err := <-written:
		t.Fatalf("the configs write was not blocked: %v", err)
	default:
	}

	unblock()
	require.Error(t, <-written, "a FIFO cannot be fsynced")
	require.NoError(t, ts.SetTopicConfigs("t", map[string]string{"retention.ms": "2000"}))
	ts.reopen()
	require.Equal(t, map[string]string{"retention.ms": "2000"}, ts.TopicConfigs("t"))
}

func goroutines() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

// goroutineIn reports whether some goroutine is inside the function fn
// (a package-qualified name).
func goroutineIn(fn string) bool { return bytes.Contains(goroutines(), []byte(fn)) }
