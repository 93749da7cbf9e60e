package consumer

import (
	"sync"
	"sync/atomic"
	"testing"
)

// lockedState is partitionState's offsets behind one mutex, as a
// SubscriptionState-like design would keep them: the baseline of
// BenchmarkOffsetState.
type lockedState struct {
	mu                                  sync.Mutex
	fetchOffset, position, consumed, hw int64
	committed                           int64
}

// BenchmarkOffsetState: the goroutines of a consumer touching one
// partition's offsets at once, with atomics (ours) and with one mutex.
// Every goroutine (GOMAXPROCS of them, with -cpu) runs the same mix per
// operation, in the proportions of a consumer's hot path: the fetcher
// moves the fetch offset and stores the high watermark, Poll moves the
// position, and readers (the committer, lag metrics, Position) load the
// position and the committed offset.
//
//	go test -run '^$' -bench BenchmarkOffsetState -cpu 1,2,4 -count 3 ./consumer/
func BenchmarkOffsetState(b *testing.B) {
	b.Run("atomics", func(b *testing.B) {
		s := newPartitionState(TopicPartition{"t", 0}, 0, unknown, 1)
		var sink atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var seen int64
			for i := 0; pb.Next(); i++ {
				switch i % 4 {
				case 0: // a fetcher claims a range
					off := s.fetchOffset.Load()
					s.fetchOffset.CompareAndSwap(off, off+1)
					s.highWatermark.Store(off + 1)
				case 1: // Poll hands out records
					pos := s.position.Load()
					s.position.CompareAndSwap(pos, pos+1)
				default: // the committer, metrics
					seen += s.position.Load() - s.committed.Load()
				}
			}
			sink.Add(seen)
		})
	})
	b.Run("mutex", func(b *testing.B) {
		var s lockedState
		var sink atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var seen int64
			for i := 0; pb.Next(); i++ {
				s.mu.Lock()
				switch i % 4 {
				case 0:
					s.fetchOffset++
					s.hw = s.fetchOffset
				case 1:
					s.position++
				default:
					seen += s.position - s.committed
				}
				s.mu.Unlock()
			}
			sink.Add(seen)
		})
	})
}
