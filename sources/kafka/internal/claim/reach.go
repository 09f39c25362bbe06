package claim

import (
	"sync"
	"sync/atomic"
)

// Degrader is the part of producer.Stage a member reports its reach to.
type Degrader interface {
	Degrade(err error)
	Recovered()
}

// SessionFailuresToDegrade is how many group sessions (sarama's Consume
// calls, franz-go's joins) in a row must fail, with no session started
// and no record read in between, before a member reports its stage
// degraded: a single failed session is a rebalance or a passing fault,
// the second says the member cannot read.
const SessionFailuresToDegrade = 2

// Reach decides when a member reports its stage degraded (it cannot read
// from the cluster) and when it reports it reads again. The rule, shared
// by both clients:
//
//   - SessionFailuresToDegrade group sessions in a row fail
//     (SessionFailed), or the client says that no broker it knows could
//     be reached (Unreachable: sarama's ErrOutOfBrokers, which it returns
//     only once it has tried every broker): the stage is degraded, the
//     last error as the reason;
//   - a session starts or records come in (Reading): it runs again.
//
// Reading is on the records' path: when there is nothing to clear it is
// two atomic loads. The zero Reach reports to no stage; set Stage first.
type Reach struct {
	Stage Degrader

	mu       sync.Mutex // serialises the reports to Stage
	failures atomic.Int32
	degraded atomic.Bool
}

// SessionFailed notes a failed group session: the stage is degraded once
// SessionFailuresToDegrade have failed in a row.
func (r *Reach) SessionFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures.Add(1) >= SessionFailuresToDegrade {
		r.degradeLocked(err)
	}
}

// Unreachable notes that the client could reach no broker: the stage is
// degraded at once.
func (r *Reach) Unreachable(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.degradeLocked(err)
}

func (r *Reach) degradeLocked(err error) {
	r.degraded.Store(true)
	if r.Stage != nil {
		r.Stage.Degrade(err)
	}
}

// Reading notes that the member reads: a session started, or records
// came in. The count of failed sessions starts again, and a degraded
// stage runs again.
func (r *Reach) Reading() {
	if !r.degraded.Load() && r.failures.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures.Store(0)
	if r.degraded.Swap(false) && r.Stage != nil {
		r.Stage.Recovered()
	}
}
