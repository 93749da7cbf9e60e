package store

import "sync"

// Signal wakes waiters when something they wait for may have happened: a
// long-poll fetch waiting for records, a producer waiting for replication.
// A waiter registers a channel with a buffer of one; Notify sends on each
// without blocking, so a wake-up is never lost and never piles up.
type Signal struct {
	mu      sync.Mutex             // guards waiters
	waiters map[chan struct{}]bool // channels to signal
}

// Watch registers ch, which should have a buffer of one.
func (s *Signal) Watch(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = map[chan struct{}]bool{}
	}
	s.waiters[ch] = true
}

// Unwatch removes a channel registered with Watch.
func (s *Signal) Unwatch(ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiters, ch)
}

// Notify signals every registered channel.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Watchers is how many channels are registered, for tests that check that
// waiters which gave up let go of the signal.
func (s *Signal) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
