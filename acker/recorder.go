package acker

import (
	"context"
	"sync"
)

// Call is one recorded invocation of an Acknowledger: the outcomes it was
// given, copied.
type Call struct {
	// Successful are the successful outcomes of the call.
	Successful []Outcome
	// Failed are the failed outcomes of the call.
	Failed []Outcome
}

// Recorder is an Acknowledger for tests: it keeps a copy of every call and
// counts outcomes per message ID, so a test can assert that every message was
// acknowledged exactly once and wait until all of them were. Use a pointer;
// the zero value is ready to use.
type Recorder struct {
	mu       sync.Mutex
	calls    []Call
	counts   map[uint64]int
	total    int
	failed   int
	changed  chan struct{}
	keepMsgs bool
}

// NewRecorder returns a Recorder. When keepMessages is true the Outcome's
// Message field is kept in the copies (the message must then not be reused by
// its owner); otherwise it is cleared.
func NewRecorder(keepMessages bool) *Recorder {
	return &Recorder{keepMsgs: keepMessages}
}

// Ack records the call.
func (r *Recorder) Ack(_ context.Context, successful, failed []Outcome) {
	c := Call{Successful: r.copy(successful), Failed: r.copy(failed)}
	r.mu.Lock()
	if r.counts == nil {
		r.counts = make(map[uint64]int)
	}
	r.calls = append(r.calls, c)
	for _, o := range successful {
		r.counts[o.ID]++
	}
	for _, o := range failed {
		r.counts[o.ID]++
	}
	r.total += len(successful) + len(failed)
	r.failed += len(failed)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	r.mu.Unlock()
}

func (r *Recorder) copy(os []Outcome) []Outcome {
	if len(os) == 0 {
		return nil
	}
	out := make([]Outcome, len(os))
	copy(out, os)
	if !r.keepMsgs {
		for i := range out {
			out[i].Message = nil
		}
	}
	return out
}

// Total reports how many outcomes (successful and failed) were recorded.
func (r *Recorder) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// FailedCount reports how many failed outcomes were recorded.
func (r *Recorder) FailedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Count reports how many outcomes were recorded for message id.
func (r *Recorder) Count(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[id]
}

// Counts returns a copy of the per-ID outcome counts.
func (r *Recorder) Counts() map[uint64]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[uint64]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// Calls returns the recorded calls, in the order they happened.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Successful returns every successful outcome recorded, in order.
func (r *Recorder) Successful() []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Outcome
	for _, c := range r.calls {
		out = append(out, c.Successful...)
	}
	return out
}

// Failed returns every failed outcome recorded, in order.
func (r *Recorder) Failed() []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Outcome
	for _, c := range r.calls {
		out = append(out, c.Failed...)
	}
	return out
}

// Wait blocks until at least n outcomes were recorded or ctx is done, and
// returns ctx.Err() in the second case. A nil ctx returns ErrNilContext
// at once.
func (r *Recorder) Wait(ctx context.Context, n int) error {
	if ctx == nil {
		return ErrNilContext
	}
	for {
		r.mu.Lock()
		if r.total >= n {
			r.mu.Unlock()
			return nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
