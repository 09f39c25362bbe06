// Package liveset closes the set of live resources a source holds (Kafka
// group members, Pulsar consumers): once closed, the owner registers no new
// one, and the resources that were live are handed back to be released.
package liveset

import (
	"errors"
	"sync"
)

// Close marks the owner closed (*closed = true) and returns the members of
// live, which it empties, both under mu. The caller releases what it
// returns after Close, without mu held.
func Close[K comparable](mu *sync.Mutex, closed *bool, live map[K]struct{}) []K {
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
