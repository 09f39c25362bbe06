package pulsartopology

import (
	"context"
	"fmt"

	"github.com/boulevard-go/boulevard/internal/liveset"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// bounded runs call on a goroutine of the backend (its Close waits for it)
// and waits for it within ctx. pulsar-client-go's CreateProducer and
// Subscribe, and the topic lookups they make, take no context: each waits
// for the broker's answer up to the client's operation timeout. When ctx
// ends before call returns, bounded returns an error wrapping kind and
// ctx.Err() that names what was under way (what); call goes on until the
// client returns, and then hands what it made, if anything, to release.
// A call that returned just as ctx ended may be handed to either. Once
// the backend is closed, bounded returns topology.ErrClosed.
func bounded[T, R any](ctx context.Context, b *Backend[T], kind error, what string, call func() (R, error), release func(R)) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%w: %s: %w", kind, what, err)
	}
	if !liveset.Enter(&b.mu, &b.closed, &b.calls) {
		return zero, topology.ErrClosed
	}
	type result struct {
		r   R
		err error
	}
	took := make(chan result) // unbuffered: a result is either taken or released
	gone := make(chan struct{})
	go func() {
		defer b.calls.Done()
		r, err := call()
		select {
		case took <- result{r, err}:
		case <-gone:
			if err == nil {
				release(r)
			}
		}
	}()
	select {
	case res := <-took:
		return res.r, res.err
	case <-ctx.Done():
		close(gone)
		return zero, fmt.Errorf("%w: %s: %w", kind, what, ctx.Err())
	}
}
