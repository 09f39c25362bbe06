// Package reachrelay passes what a broker backend's topology reader
// learns about its reach (whether it can read from its broker) on to the
// observer its subscriber sets through topology.ReachReporter, which may
// come after the reader has learnt it: the Relay keeps the last report,
// and tells an observer set while the reader cannot read at once.
package reachrelay

import (
	"sync"

	"github.com/boulevard-go/boulevard/topic"
)

// Relay is what a reader's reach watch (kafkareach.Reach's Health,
// sources/pulsar's Client.WatchReconnects) reports to: it keeps whether
// the reader can read, and passes each report on to the observer Set
// last. The zero Relay can read and has no observer. Its reports come one
// at a time: an observer is called with the Relay's lock held, so that
// none is called once Set has replaced it.
type Relay struct {
	mu   sync.Mutex
	to   topic.ReachObserver
	down bool
	err  error // why the reader cannot read, while down
}

var _ topic.ReachObserver = (*Relay)(nil)

// Degrade notes that the reader cannot read, err saying why, and tells
// the observer.
func (r *Relay) Degrade(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down, r.err = true, err
	if r.to != nil {
		r.to.Degrade(err)
	}
}

// Recovered notes that the reader reads again, and tells the observer
// when it could not read.
func (r *Relay) Recovered() {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.down
	r.down, r.err = false, nil
	if was && r.to != nil {
		r.to.Recovered()
	}
}

// Set makes o the observer (nil: none) and, while the reader cannot read,
// tells o at once. Once Set has returned, nothing more reaches the
// observer it replaced.
func (r *Relay) Set(o topic.ReachObserver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.to = o
	if o != nil && r.down {
		o.Degrade(r.err)
	}
}
