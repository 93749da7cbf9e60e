package consumer

import "sync"

// broadcaster wakes every goroutine waiting on it: wait returns a channel
// closed by the next broadcast.
type broadcaster struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by broadcast. Protected by mu.
}

func (b *broadcaster) init() { b.ch = make(chan struct{}) }

func (b *broadcaster) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcaster) broadcast() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}
