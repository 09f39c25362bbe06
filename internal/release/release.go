// Package release carries a source's release of a feed (a revoked Kafka
// partition whose in-flight messages the source waits for) from the
// producer stages to the pipeline's batchers, which then emit their open
// batches at once instead of at BatchTimeout.
//
// A Signal is shared by one pipeline: Begin marks a release in progress
// and wakes every batcher partition once; Active is what a partition
// checks, with one atomic load, after it takes in a chunk of messages. It
// costs nothing per message, and nothing per chunk but that load.
package release

import (
	"sync"
	"sync/atomic"
)

// Signal tells a pipeline's batchers that a source is releasing a feed
// and waits for its messages in flight. The zero Signal is ready to use;
// a nil *Signal is one nobody listens to (Begin returns a no-op, Active
// is false).
type Signal struct {
	active atomic.Int64 // releases in progress
	mu     sync.Mutex
	wakes  []chan struct{}
}

// Begin marks a release in progress until the returned end is called,
// and wakes every listener (Listen) once: a listener already woken and not
// yet run is not woken twice, so a storm of releases costs each listener
// one wake-up at a time. end is idempotent. Begin never blocks.
func (s *Signal) Begin() (end func()) {
	if s == nil {
		return func() {}
	}
	s.active.Add(1)
	s.mu.Lock()
	for _, ch := range s.wakes {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	var ended atomic.Bool
	return func() {
		if ended.CompareAndSwap(false, true) {
			s.active.Add(-1)
		}
	}
}

// Active reports whether a release is in progress: Begin was called and
// its end not yet.
func (s *Signal) Active() bool {
	return s != nil && s.active.Load() > 0
}

// Listen returns a channel that receives a value when a release begins
// (one value for any number of them until it is received). On a nil
// Signal it returns nil, which never receives.
func (s *Signal) Listen() <-chan struct{} {
	if s == nil {
		return nil
	}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.wakes = append(s.wakes, ch)
	s.mu.Unlock()
	return ch
}
