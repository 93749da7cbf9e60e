package commitlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Kafka times every flush of a log (LogFlushStats.logFlushTimer, the
// kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs metric) in one
// timer per JVM. Here a flush that wrote something (an explicit Flush,
// flush.messages or flush.ms, the flush of a rolled segment, a close) is
// reported to every function ObserveFlushes registered in the process;
// final's metrics read it.
var flushObservers struct {
	mu   sync.Mutex                               // serializes ObserveFlushes and its stop functions
	list atomic.Pointer[[]*func(d time.Duration)] // read without the lock by each flush
}

// ObserveFlushes calls f with the duration of every flush of every log in
// the process, from the goroutine that flushed, until stop is called. f
// must be quick.
func ObserveFlushes(f func(d time.Duration)) (stop func()) {
	fp := &f
	update := func(change func([]*func(time.Duration)) []*func(time.Duration)) {
		flushObservers.mu.Lock()
		defer flushObservers.mu.Unlock()
		var old []*func(time.Duration)
		if l := flushObservers.list.Load(); l != nil {
			old = *l
		}
		next := change(append([]*func(time.Duration){}, old...))
		flushObservers.list.Store(&next)
	}
	update(func(l []*func(time.Duration)) []*func(time.Duration) { return append(l, fp) })
	var once sync.Once
	return func() {
		once.Do(func() {
			update(func(l []*func(time.Duration)) []*func(time.Duration) {
				for i, g := range l {
					if g == fp {
						return append(l[:i], l[i+1:]...)
					}
				}
				return l
			})
		})
	}
}

// flushed reports a flush that began at start.
func flushed(start time.Time) {
	l := flushObservers.list.Load()
	if l == nil || len(*l) == 0 {
		return
	}
	d := time.Since(start)
	for _, f := range *l {
		(*f)(d)
	}
}
