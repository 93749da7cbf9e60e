package producer

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// memNode is a Node with conditional writes, shared by several allocators.
type memNode struct {
	mu      sync.Mutex
	data    []byte
	version int32
	exists  bool
	writes  int
}

func (n *memNode) Get() ([]byte, int32, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.data, n.version, n.exists, nil
}

func (n *memNode) Create(data []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exists {
		return fmt.Errorf("%w: exists", ErrConflict)
	}
	n.data, n.exists = data, true
	n.writes++
	return nil
}

func (n *memNode) Set(data []byte, version int32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if version != n.version {
		return fmt.Errorf("%w: version %d, not %d", ErrConflict, n.version, version)
	}
	n.data, n.version = data, n.version+1
	n.writes++
	return nil
}

func TestAllocatorClaimsBlocksWithKafkasJSON(t *testing.T) {
	node := &memNode{}
	a := NewAllocator(2, node)
	for want := int64(0); want < BlockSize+1; want++ {
		id, err := a.Next()
		require.NoError(t, err)
		require.Equal(t, want, id)
	}
	require.Equal(t, `{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}`, string(node.data), "Kafka's field order")
	require.Equal(t, 2, node.writes, "one write per block")
}

func TestBrokersSharingANodeNeverHandOutTheSameID(t *testing.T) {
	node := &memNode{}
	seen := map[int64]int32{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for b := range int32(4) {
		wg.Go(func() {
			a := NewAllocator(b, node)
			for range 2500 {
				id, err := a.Next()
				require.NoError(t, err)
				mu.Lock()
				if other, dup := seen[id]; dup {
					t.Errorf("id %d handed out by brokers %d and %d", id, other, b)
				}
				seen[id] = b
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 10_000)
}

func TestARestartedBrokerClaimsANewBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "producer-id-block")
	first, err := NewAllocator(0, FileNode{path}).Next()
	require.NoError(t, err)
	second, err := NewAllocator(0, FileNode{path}).Next() // after a restart
	require.NoError(t, err)
	require.Equal(t, int64(0), first)
	require.Equal(t, int64(BlockSize), second, "the ids of a block claimed before are never reused")
}

// TestAnEmptyNodeMeansNoBlockYet: Kafka's brokers create
// /latest_producer_id_block empty at start (it is among their persistent
// paths); the first claim writes block 0 into it, at its version.
func TestAnEmptyNodeMeansNoBlockYet(t *testing.T) {
	node := &memNode{exists: true}
	id, err := NewAllocator(1, node).Next()
	require.NoError(t, err)
	require.Zero(t, id)
	require.Equal(t, int32(1), node.version, "written with Set at the empty node's version")
	require.Equal(t, `{"version":1,"broker":1,"block_start":"0","block_end":"999"}`, string(node.data))
}
