// Package liveset keeps the set of live resources an owner holds (a
// source's Kafka group members or Pulsar consumers, a backend's readers),
// guarded by the owner's mutex beside its closed flag: once closed, the
// owner registers no new one, and the resources that were live are handed
// back to be released.
package liveset

import (
	"errors"
	"sync"
)

// Add registers k in live under mu, unless the owner is closed (*closed):
// it then returns false, and the caller releases k itself.
func Add[K comparable](mu sync.Locker, closed *bool, live map[K]struct{}, k K) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	live[k] = struct{}{}
	return true
}

// Remove takes ks out of live under mu.
func Remove[K comparable](mu sync.Locker, live map[K]struct{}, ks ...K) {
	mu.Lock()
	defer mu.Unlock()
	for _, k := range ks {
		delete(live, k)
	}
}

// Close marks the owner closed (*closed = true) and returns the members of
// live, which it empties, both under mu. The caller releases what it
// returns after Close, without mu held.
func Close[K comparable](mu sync.Locker, closed *bool, live map[K]struct{}) []K {
	mu.Lock()
	defer mu.Unlock()
	*closed = true
	ks := make([]K, 0, len(live))
	for k := range live {
		ks = append(ks, k)
	}
	clear(live)
	return ks
}

// CloseEach calls release for every member of ms at once, each in its own
// goroutine, and returns their errors joined once every call has returned.
func CloseEach[K any](ms []K, release func(K) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() { errs[i] = release(m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
