package network

import (
	"sync"
	"sync/atomic"
)

// wakeList holds one-shot wake-ups: callbacks registered by someone who
// found a resource used up (a full RequestChannel, an exhausted memory
// pool), called once, and forgotten, when the resource frees. Checking for
// waiters costs one atomic load, so whoever frees the resource on every
// request takes the lock only when somebody waits.
//
// The protocol, for a caller whose attempt failed: register, then attempt
// once more. If the resource freed in between, the second attempt succeeds
// (and the wake-up comes later, harmlessly); otherwise the release that
// eventually comes sees the registration.
type wakeList struct {
	mu      sync.Mutex
	waiters []func()     // Protected by mu.
	n       atomic.Int32 // len(waiters), readable without mu
}

// add registers wake.
func (w *wakeList) add(wake func()) {
	w.mu.Lock()
	w.waiters = append(w.waiters, wake)
	w.n.Store(int32(len(w.waiters)))
	w.mu.Unlock()
}

// wakeAll calls and forgets every registered wake-up, if any.
func (w *wakeList) wakeAll() {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	ws := w.waiters
	w.waiters = nil
	w.n.Store(0)
	w.mu.Unlock()
	for _, wake := range ws {
		wake()
	}
}
