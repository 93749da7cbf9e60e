package replica

import (
	"iter"
	"sync"
)

// pool is Kafka's Pool, the ConcurrentHashMap behind ReplicaManager's
// allPartitions: readers take no lock, so a lookup never waits for a
// writer, however long the writer's own work (a LeaderAndIsr creating
// logs and stopping fetchers) takes. Writers are serialized by their
// caller (the Manager's stateMu).
type pool[K comparable, V any] struct{ m sync.Map }

func (p *pool[K, V]) get(k K) (V, bool) {
	v, ok := p.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (p *pool[K, V]) put(k K, v V) { p.m.Store(k, v) }

func (p *pool[K, V]) remove(k K) { p.m.Delete(k) }

// all yields the entries, each once, in no order; entries put or removed
// meanwhile may or may not be seen (sync.Map.Range).
func (p *pool[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		p.m.Range(func(k, v any) bool { return yield(k.(K), v.(V)) })
	}
}
