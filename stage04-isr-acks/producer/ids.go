package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// BlockSize is how many producer ids a broker claims at a time (Kafka's
// ProducerIdManager.PidBlockSize).
const BlockSize = 1000

// BlockPath is the znode where Kafka keeps the last block handed out.
const BlockPath = "/latest_producer_id_block"

// Block is that znode's JSON, as Kafka 2.x writes it (the offsets as
// strings):
//
//	{"version":1,"broker":0,"block_start":"0","block_end":"999"}
type Block struct {
	Version int   `json:"version"`
	Broker  int32 `json:"broker"`
	Start   int64 `json:"block_start,string"`
	End     int64 `json:"block_end,string"`
}

// ErrConflict: a conditional write lost to another writer (ZooKeeper's
// NODEEXISTS or BADVERSION); the allocator reads again and retries.
var ErrConflict = errors.New("producer: the id block was claimed by another broker meanwhile")

// ErrIDsExhausted: every producer id has been handed out.
var ErrIDsExhausted = errors.New("producer: producer ids exhausted")

// Node is one versioned value with conditional writes: the
// /latest_producer_id_block znode in ZooKeeper (stage 05), a path of the
// in-process store in a test cluster, or a file for a single broker.
// Writes that lose to another writer return an error wrapping ErrConflict.
type Node interface {
	// Get returns the data and version, or exists false.
	Get() (data []byte, version int32, exists bool, err error)
	// Create writes the first data.
	Create(data []byte) error
	// Set writes data if the version is still version.
	Set(data []byte, version int32) error
}

// Allocator hands out producer ids from blocks it claims in a Node (Kafka's
// ProducerIdManager): ids are unique across every broker that shares the
// node, and a restarted broker claims a new block, never reusing one.
type Allocator struct {
	brokerID int32
	node     Node

	mu   sync.Mutex
	next int64 // the next id to hand out. Protected by mu.
	end  int64 // the last id of the current block; next > end: none left. Protected by mu.
}

// NewAllocator returns an allocator that claims its first block when it
// first hands out an id.
func NewAllocator(brokerID int32, node Node) *Allocator {
	return &Allocator{brokerID: brokerID, node: node, next: 0, end: -1}
}

// Next returns a new producer id.
func (a *Allocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next > a.end {
		b, err := a.claim()
		if err != nil {
			return 0, err
		}
		a.next, a.end = b.Start, b.End
	}
	id := a.next
	a.next++
	return id, nil
}

// claim takes the block after the last one handed out, retrying when
// another broker claims one at the same time.
func (a *Allocator) claim() (Block, error) {
	const attempts = 10
	var err error
	for range attempts {
		var data []byte
		var version int32
		var exists bool
		if data, version, exists, err = a.node.Get(); err != nil {
			return Block{}, err
		}
		b := Block{Version: 1, Broker: a.brokerID, Start: 0, End: BlockSize - 1}
		if exists && len(data) > 0 { // Kafka's brokers create the node empty at start
			var last Block
			if err := json.Unmarshal(data, &last); err != nil {
				return Block{}, fmt.Errorf("producer: %s holds %q: %w", BlockPath, data, err)
			}
			if last.End > math.MaxInt64-BlockSize {
				return Block{}, ErrIDsExhausted
			}
			b.Start, b.End = last.End+1, last.End+BlockSize
		}
		enc, _ := json.Marshal(b)
		if exists {
			err = a.node.Set(enc, version)
		} else {
			err = a.node.Create(enc)
		}
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Block{}, err
		}
	}
	return Block{}, fmt.Errorf("claiming a producer id block, %d attempts: %w", attempts, err)
}

// FileNode keeps the block in a file of a single broker's log directory:
// one writer, so its version is always 0 and writes are not conditional.
// A cluster's brokers must share a Node with conditional writes instead.
type FileNode struct{ Path string }

// Get reads the file.
func (f FileNode) Get() ([]byte, int32, bool, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, false, nil
	}
	return data, 0, err == nil, err
}

// Create writes the file durably.
func (f FileNode) Create(data []byte) error { return commitlog.WriteFileAtomic(f.Path, data) }

// Set writes the file durably.
func (f FileNode) Set(data []byte, _ int32) error { return commitlog.WriteFileAtomic(f.Path, data) }
