package isr

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// ErrNodeExists: a create found the path taken (ZooKeeper's NODEEXISTS).
var ErrNodeExists = errors.New("isr: node exists")

// MemoryStore is an in-process stand-in for the few ZooKeeper znodes this
// stage uses: paths holding bytes and a version that every write bumps,
// conditional writes, sequential children. The leaders of a test cluster
// write their ISR changes to it, and the harness controller keeps its
// partition states in it, so both see one truth, as with ZooKeeper. It
// keeps every write of every path, for tests and the demo to show.
type MemoryStore struct {
	mu       sync.Mutex
	nodes    map[string]*memNode // Protected by mu.
	seq      int                 // next sequential suffix. Protected by mu.
	watchers []func(path string) // Protected by mu.
}

type memNode struct {
	data    []byte
	version int32
	history []Write
}

// Write is one write of a path: the data and the version it created.
type Write struct {
	Data    []byte
	Version int32
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{nodes: map[string]*memNode{}} }

// Create makes path with data at version 0.
func (m *MemoryStore) Create(path string, data []byte) error {
	m.mu.Lock()
	if _, ok := m.nodes[path]; ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNodeExists, path)
	}
	m.nodes[path] = &memNode{data: data, history: []Write{{Data: data}}}
	return m.unlockAndTell(path)
}

// CreateSequential makes prefix<10-digit sequence> and returns its path.
func (m *MemoryStore) CreateSequential(prefix string, data []byte) (string, error) {
	m.mu.Lock()
	path := fmt.Sprintf("%s%010d", prefix, m.seq)
	m.seq++
	m.nodes[path] = &memNode{data: data, history: []Write{{Data: data}}}
	return path, m.unlockAndTell(path)
}

// Get returns path's data and version.
func (m *MemoryStore) Get(path string) ([]byte, int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.nodes[path]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	return n.data, n.version, nil
}

// Set writes path if its version is expectedVersion (-1: any) and returns
// the new version.
func (m *MemoryStore) Set(path string, data []byte, expectedVersion int32) (int32, error) {
	m.mu.Lock()
	n, ok := m.nodes[path]
	switch {
	case !ok:
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: %s", ErrNoNode, path)
	case expectedVersion >= 0 && n.version != expectedVersion:
		m.mu.Unlock()
		return 0, fmt.Errorf("%w: %s is at version %d, the write expected %d", ErrBadVersion, path, n.version, expectedVersion)
	}
	n.data, n.version = data, n.version+1
	n.history = append(n.history, Write{Data: data, Version: n.version})
	v := n.version
	return v, m.unlockAndTell(path)
}

// Delete removes path.
func (m *MemoryStore) Delete(path string) error {
	m.mu.Lock()
	if _, ok := m.nodes[path]; !ok {
		m.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoNode, path)
	}
	delete(m.nodes, path)
	return m.unlockAndTell(path)
}

// Children lists the paths directly under parent, sorted.
func (m *MemoryStore) Children(parent string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for p := range m.nodes {
		if rest, ok := strings.CutPrefix(p, parent+"/"); ok && !strings.Contains(rest, "/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// History returns every write of path, oldest first.
func (m *MemoryStore) History(path string) []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.nodes[path]; ok {
		return slices.Clone(n.history)
	}
	return nil
}

// Watch calls f with the path of every later write, after the write and
// without the store's lock (as a ZooKeeper watch fires after the change).
func (m *MemoryStore) Watch(f func(path string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, f)
}

func (m *MemoryStore) unlockAndTell(path string) error {
	watchers := slices.Clone(m.watchers)
	m.mu.Unlock()
	for _, f := range watchers {
		f(path)
	}
	return nil
}

// PartitionState reads tp's state and its version.
func (m *MemoryStore) PartitionState(tp commitlog.TopicPartition) (PartitionState, int32, error) {
	b, v, err := m.Get(StatePath(tp))
	if err != nil {
		return PartitionState{}, 0, err
	}
	s, err := DecodePartitionState(b)
	return s, v, err
}

// UpdatePartitionState implements StateStore.
func (m *MemoryStore) UpdatePartitionState(tp commitlog.TopicPartition, s PartitionState, expectedVersion int32) (int32, error) {
	return m.Set(StatePath(tp), s.Encode(), expectedVersion)
}

// NotifyIsrChange implements StateStore.
func (m *MemoryStore) NotifyIsrChange(tps []commitlog.TopicPartition) error {
	_, err := m.CreateSequential(IsrChangeNotificationPrefix, EncodeIsrChange(tps))
	return err
}
