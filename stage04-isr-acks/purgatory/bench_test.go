package purgatory

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kafkaworkbook/workbook/stage02-reactor/store"
)

// The purgatory against the design it replaces (stage 03's acks=all wait and
// stage 02's long poll): one goroutine and one timer per waiting request,
// woken through a channel registered on the partition's signal. Both park
// n requests on 1,000 partitions with 30 s timeouts, then complete them all
// by signalling each partition once. Reported per parked request:
//
//	B/parked     heap and stack grown by parking (runtime.MemStats)
//	cpu-ns/done  process CPU time (user+system) to complete one
//
// Run: cd stage04-isr-acks && go test -run '^$' -bench Parked -benchtime 1x ./purgatory
func BenchmarkParked(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("purgatory/%dk", n/1000), func(b *testing.B) { benchParked(b, n, parkPurgatory) })
		b.Run(fmt.Sprintf("goroutines/%dk", n/1000), func(b *testing.B) { benchParked(b, n, parkGoroutines) })
	}
}

const benchKeys = 1000

// parker parks n operations and returns how to complete them all and wait
// for it.
type parker func(n int, completed *atomic.Int64) (completeAll func())

func benchParked(b *testing.B, n int, park parker) {
	for range b.N {
		var completed atomic.Int64
		before := memInUse()
		completeAll := park(n, &completed)
		parked := memInUse() - before
		cpu := cpuTime()
		completeAll()
		for completed.Load() < int64(n) {
			runtime.Gosched()
		}
		b.ReportMetric(float64(parked)/float64(n), "B/parked")
		b.ReportMetric(float64(cpuTime()-cpu)/float64(n), "cpu-ns/done")
	}
}

// benchOp completes when its partition's version has moved past the one it
// saw, as a DelayedProduce completes when the high watermark passes.
type benchOp struct {
	version   *atomic.Int64
	seen      int64
	completed *atomic.Int64
}

func (o *benchOp) TryComplete() bool { return o.version.Load() > o.seen }
func (o *benchOp) OnComplete()       { o.completed.Add(1) }
func (o *benchOp) OnExpiration()     {}

func parkPurgatory(n int, completed *atomic.Int64) func() {
	p := New[int]("bench", Options{})
	versions := make([]atomic.Int64, benchKeys)
	for i := range n {
		k := i % benchKeys
		p.TryCompleteElseWatch(&benchOp{version: &versions[k], completed: completed}, 30*time.Second, k)
	}
	return func() {
		for k := range versions {
			versions[k].Add(1)
			p.CheckAndComplete(k)
		}
		p.Shutdown()
	}
}

func parkGoroutines(n int, completed *atomic.Int64) func() {
	versions := make([]atomic.Int64, benchKeys)
	signals := make([]store.Signal, benchKeys) // stage 02's, as its long poll and stage 03's acks=all used it
	var started sync.WaitGroup
	for i := range n {
		k := i % benchKeys
		wake := make(chan struct{}, 1)
		signals[k].Watch(wake)
		started.Add(1)
		go func() {
			timer := time.NewTimer(30 * time.Second)
			defer timer.Stop()
			started.Done()
			for versions[k].Load() == 0 {
				select {
				case <-wake:
				case <-timer.C:
					completed.Add(1)
					return
				}
			}
			signals[k].Unwatch(wake)
			completed.Add(1)
		}()
	}
	started.Wait()
	return func() {
		for k := range versions {
			versions[k].Add(1)
			signals[k].Notify()
		}
	}
}

func memInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
