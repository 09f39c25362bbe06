package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// TestOutcome is what became of one message pushed by Test or TestBatch.
type TestOutcome[Out any] struct {
	// Data is the payload as the last stage saw it. For a message that
	// failed in its processor it is the input payload when In and Out are
	// the same type, and the zero value otherwise.
	Data Out
	// Err is why the message failed; nil when it succeeded.
	Err error
	// Disposition is how the failed message was to be acknowledged (after
	// any failure hook).
	Disposition acker.Disposition
	// Batcher is the batcher the message was routed to.
	Batcher string
	// BatchKey is the batch key the message ended with.
	BatchKey string
	// Acks is how many times the message was acknowledged: 1 in a correct
	// pipeline.
	Acks int
}

// ErrDuplicateAck is reported by Test and TestBatch when a message was
// acknowledged more than once.
var ErrDuplicateAck = errors.New("message acknowledged more than once")

// Test pushes one message per data into the running pipeline, each in flush
// mode so that its batch is emitted at once (Broadway's test_message), waits
// until every one has been acknowledged, and returns their outcomes in push
// order. It returns an error when ctx ends first (with the outcomes gathered
// so far), when the pipeline stops before every outcome arrived, or when a
// message was acknowledged twice.
func (p *Pipeline[In, Out]) Test(ctx context.Context, data ...In) ([]TestOutcome[Out], error) {
	return p.test(ctx, message.Flush, data)
}

// TestBatch is Test with the messages in bulk mode (Broadway's test_batch):
// they are batched as the batchers' BatchSize and BatchTimeout say, so a
// test can observe real batches.
func (p *Pipeline[In, Out]) TestBatch(ctx context.Context, data ...In) ([]TestOutcome[Out], error) {
	return p.test(ctx, message.Bulk, data)
}

func (p *Pipeline[In, Out]) test(ctx context.Context, mode message.BatchMode, data []In) ([]TestOutcome[Out], error) {
	ta := &testAcker[Out]{results: make([]TestOutcome[Out], len(data)), remaining: len(data), done: make(chan struct{})}
	if len(data) == 0 {
		return nil, nil
	}
	msgs := make([]*message.Message[In], len(data))
	for i, d := range data {
		msgs[i] = message.New(d, ta, uint64(i))
		msgs[i].SetBatchMode(mode)
	}
	if err := p.Push(ctx, msgs...); err != nil {
		return ta.snapshot(), err
	}
	select {
	case <-ta.done:
	case <-ctx.Done():
		return ta.snapshot(), fmt.Errorf("waiting for %d outcome(s): %w", ta.left(), ctx.Err())
	case <-p.done:
		select {
		case <-ta.done:
		default:
			return ta.snapshot(), fmt.Errorf("%w before %d outcome(s) arrived", ErrStopped, ta.left())
		}
	}
	res := ta.snapshot()
	for i, r := range res {
		if r.Acks > 1 {
			return res, fmt.Errorf("message %d: %w (%d times)", i, ErrDuplicateAck, r.Acks)
		}
	}
	return res, nil
}

// testAcker collects the outcomes of the messages of one Test call.
type testAcker[Out any] struct {
	mu        sync.Mutex
	results   []TestOutcome[Out]
	remaining int
	done      chan struct{}
}

func (t *testAcker[Out]) Ack(_ context.Context, successful, failed []acker.Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, list := range [2][]acker.Outcome{successful, failed} {
		for _, o := range list {
			r := &t.results[o.ID]
			r.Acks++
			r.Err = o.Err
			r.Disposition = o.Disposition
			if m, ok := o.Message.(*message.Message[Out]); ok {
				r.Data = m.Data
				r.Batcher, r.BatchKey = m.Batcher(), m.BatchKey()
			} else if m, ok := o.Message.(interface {
				Batcher() string
				BatchKey() string
			}); ok {
				r.Batcher, r.BatchKey = m.Batcher(), m.BatchKey()
			}
			if r.Acks == 1 {
				t.remaining--
				if t.remaining == 0 {
					close(t.done)
				}
			}
		}
	}
}

func (t *testAcker[Out]) snapshot() []TestOutcome[Out] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TestOutcome[Out](nil), t.results...)
}

func (t *testAcker[Out]) left() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.remaining
}
