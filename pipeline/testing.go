package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
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
	// Batcher is the batcher the message was routed to. A message that
	// failed in its processor reached no batcher: Batcher is then where
	// it was routed when it failed ("default" unless the test or the
	// handler routed it), and Err says it failed.
	Batcher string
	// BatchKey is the batch key the message ended with.
	BatchKey string
	// Acks is how many times the message was acknowledged: 1 in a correct
	// pipeline.
	Acks int
}

// ErrDuplicateAck is reported by Test and TestBatch when a message was
// acknowledged more than once.
var ErrDuplicateAck = errors.New("pipeline: message acknowledged more than once")

// Test pushes one message per data into the running pipeline, each in flush
// mode so that its batch is emitted at once (Broadway's test_message), waits
// until every one has been acknowledged, and returns their outcomes in push
// order. It returns an error when ctx ends first (with the outcomes gathered
// so far), when the pipeline stops before every outcome arrived, or when a
// message was acknowledged twice.
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) Test(ctx context.Context, data ...In) ([]TestOutcome[Out], error) {
	r, err := p.TestWith(ctx, TestOptions{Mode: message.Flush}, data...)
	return r.Outcomes, err
}

// TestBatch is Test with the messages in bulk mode (Broadway's test_batch):
// they are batched as the batchers' BatchSize and BatchTimeout say, so a
// test can observe real batches.
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) TestBatch(ctx context.Context, data ...In) ([]TestOutcome[Out], error) {
	r, err := p.TestWith(ctx, TestOptions{Mode: message.Bulk}, data...)
	return r.Outcomes, err
}

// TestOptions shape the messages TestWith pushes (Broadway's test_message
// and test_batch options).
type TestOptions struct {
	// Mode is the messages' batch mode: message.Bulk (the default, as
	// TestBatch) lets the batchers' BatchSize and BatchTimeout decide;
	// message.Flush (as Test) emits each message's batch at once.
	Mode message.BatchMode
	// Metadata is given to every message as its Metadata, for a handler
	// that reads a source's metadata (a *kafka.Metadata, say). Nil for
	// none.
	Metadata any
	// MetadataFor, when set, gives message i (in push order) its own
	// Metadata instead.
	MetadataFor func(i int) any
	// Batcher, when not "", routes every message to that batcher before
	// the processors see it (they may route it elsewhere).
	Batcher string
	// BatchKey, when not "", is every message's batch key before the
	// processors see it.
	BatchKey string
	// PartitionKey, when not "", is every message's partition key, as a
	// source sets it with message.Message.SetPartitionKey: what a
	// PartitionBy reading m.PartitionKey() sees, and what the processors
	// are partitioned by when the pipeline's source asks for ordering
	// (the Kafka source, say, whose key is the record's partition) and
	// they have no PartitionBy of their own. Without one, every message
	// of such a pipeline goes to the same processor.
	PartitionKey string
	// PartitionKeyFor, when set, gives message i (in push order) its own
	// partition key instead, so that a test can spread its messages over
	// the partitions a source would: a key's messages are then handled by
	// one processor, in push order.
	PartitionKeyFor func(i int) string
	// Acknowledger, when set, is also called with every acknowledgement
	// the messages get, after TestWith has recorded it: the outcomes' IDs
	// are the messages' indexes in push order. TestWith returns only after
	// these calls have returned for every message's first acknowledgement.
	// A panic in it is recovered: the outcomes stay recorded, and TestWith
	// returns, once every outcome has arrived, an error wrapping the
	// first panic's *message.PanicError.
	Acknowledger acker.Acknowledger
}

// WithDefaults returns o unchanged: the zero value of every field is its
// default (Mode message.Bulk, no metadata, no batcher, batch key or
// partition key set).
func (o TestOptions) WithDefaults() TestOptions { return o }

// Validate returns nil: TestWith takes every value, and the messages it
// pushes meet the pipeline's routing as any pushed message does.
func (o TestOptions) Validate() error { return nil }

// TestBatchResult is one batch a batch handler was called with during a
// TestWith call.
type TestBatchResult struct {
	// Info is the BatchInfo the handler was given.
	Info message.BatchInfo
	// Messages are the indexes, in push order, of the call's messages in
	// the batch, in batch order (the batch may hold others too, from
	// concurrent calls or sources).
	Messages []int
}

// TestReport is what TestWith observed.
type TestReport[Out any] struct {
	// Outcomes are the messages' outcomes, in push order.
	Outcomes []TestOutcome[Out]
	// Batches are the batches that held the messages, in the order their
	// handlers were called: which messages were handled together. A
	// message acknowledged immediately (see message.AckImmediately) goes
	// to its batcher as a copy that no batch here lists.
	Batches []TestBatchResult
}

// TestWith pushes one message per data into the running pipeline, shaped
// by opts, waits until every one has been acknowledged, and reports their
// outcomes in push order and the batches they were handled in. It returns
// an error when ctx ends first (with what was gathered so far), when the
// pipeline stops before every outcome arrived, or when a message was
// acknowledged twice. Given no data it pushes nothing and returns what
// Push returns for no message (ErrNotStarted before Start, ErrStopped
// once the pipeline takes no more messages).
//
// A nil ctx returns ErrNilContext, the pipeline left as it was.
func (p *Pipeline[In, Out]) TestWith(ctx context.Context, opts TestOptions, data ...In) (TestReport[Out], error) {
	if len(data) == 0 || ctx == nil {
		// Nothing to wait for (or nothing to wait with): report the
		// pipeline's state as Push does.
		return TestReport[Out]{}, p.Push(ctx)
	}
	ta := &testAcker[Out]{results: make([]TestOutcome[Out], len(data)), remaining: len(data), done: make(chan struct{}), forward: opts.Acknowledger}
	msgs := make([]*message.Message[In], len(data))
	for i, d := range data {
		m := message.New(d, ta, uint64(i))
		m.SetBatchMode(opts.Mode)
		m.Metadata = opts.Metadata
		if opts.MetadataFor != nil {
			m.Metadata = opts.MetadataFor(i)
		}
		if opts.Batcher != "" {
			m.SetBatcher(opts.Batcher)
		}
		m.SetBatchKey(opts.BatchKey)
		if opts.PartitionKeyFor != nil {
			m.SetPartitionKey(opts.PartitionKeyFor(i))
		} else {
			m.SetPartitionKey(opts.PartitionKey)
		}
		msgs[i] = m
	}
	testsRunning.Add(1)
	defer testsRunning.Add(-1)
	if err := p.Push(ctx, msgs...); err != nil {
		return ta.snapshot(), err
	}
	select {
	case <-ta.done:
	case <-ctx.Done():
		return ta.snapshot(), fmt.Errorf("pipeline: waiting for %d outcome(s): %w", ta.left(), ctx.Err())
	case <-p.done:
		select {
		case <-ta.done:
		default:
			return ta.snapshot(), fmt.Errorf("%w before %d outcome(s) arrived", ErrStopped, ta.left())
		}
	}
	res := ta.snapshot()
	for i, r := range res.Outcomes {
		if r.Acks > 1 {
			return res, fmt.Errorf("%w: message %d (%d times)", ErrDuplicateAck, i, r.Acks)
		}
	}
	if err := ta.forwardPanic(); err != nil {
		return res, fmt.Errorf("pipeline: TestOptions.Acknowledger panicked: %w", err)
	}
	return res, nil
}

// testsRunning counts the TestWith calls in progress in the process: batch
// handlers look for test messages only while there is one, so that a
// pipeline pays one atomic load per batch for the feature.
var testsRunning atomic.Int32

// batchSeq orders the batches test calls observe.
var batchSeq atomic.Uint64

// watchTestBatches wraps a batch handler so that, while a TestWith call is
// in progress, each test message's batch is recorded with its BatchInfo
// before the handler runs.
func watchTestBatches[Out any](h batcher.Handler[Out]) batcher.Handler[Out] {
	return func(ctx context.Context, batch []*message.Message[Out], info message.BatchInfo) error {
		if testsRunning.Load() > 0 {
			seq := batchSeq.Add(1)
			for _, m := range batch {
				if a, id, _ := m.Acknowledger(); a != nil {
					if ta, ok := a.(*testAcker[Out]); ok {
						ta.inBatch(seq, info, int(id))
					}
				}
			}
		}
		return h(ctx, batch, info)
	}
}

// testAcker collects the outcomes of the messages of one Test call.
type testAcker[Out any] struct {
	forward acker.Acknowledger // opts.Acknowledger, or nil

	mu        sync.Mutex
	results   []TestOutcome[Out]
	batches   []testBatch
	remaining int
	done      chan struct{}
	panicked  error // the first panic of forward, a *message.PanicError
}

// testBatch is a batch seen by watchTestBatches, numbered by seq.
type testBatch struct {
	seq uint64
	TestBatchResult
}

// inBatch records that message i was in batch seq.
func (t *testAcker[Out]) inBatch(seq uint64, info message.BatchInfo, i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for j := len(t.batches) - 1; j >= 0; j-- {
		if t.batches[j].seq == seq {
			t.batches[j].Messages = append(t.batches[j].Messages, i)
			return
		}
	}
	t.batches = append(t.batches, testBatch{seq: seq, TestBatchResult: TestBatchResult{Info: info, Messages: []int{i}}})
}

// Ack records the outcomes, forwards them, and only then counts the
// messages as done: TestWith returns once the custom acknowledger has seen
// every message's first acknowledgement, not merely once TestWith has.
func (t *testAcker[Out]) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	firsts := t.record(successful, failed)
	if t.forward != nil {
		t.callForward(ctx, successful, failed)
	}
	if firsts == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remaining -= firsts
	if t.remaining == 0 {
		close(t.done)
	}
}

// callForward calls the custom acknowledger and keeps its first panic for
// TestWith to report: the outcomes were recorded, so the messages are
// counted as done all the same.
func (t *testAcker[Out]) callForward(ctx context.Context, successful, failed []acker.Outcome) {
	var err error
	func() {
		defer message.Recover(&err)
		t.forward.Ack(ctx, successful, failed)
	}()
	if err != nil {
		t.mu.Lock()
		if t.panicked == nil {
			t.panicked = err
		}
		t.mu.Unlock()
	}
}

// forwardPanic returns the first panic of the custom acknowledger, or nil.
func (t *testAcker[Out]) forwardPanic() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.panicked
}

// record notes the outcomes and returns how many messages they acknowledge
// for the first time.
func (t *testAcker[Out]) record(successful, failed []acker.Outcome) (firsts int) {
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
				firsts++
			}
		}
	}
	return firsts
}

func (t *testAcker[Out]) snapshot() TestReport[Out] {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := TestReport[Out]{Outcomes: slices.Clone(t.results)}
	bs := slices.Clone(t.batches)
	slices.SortFunc(bs, func(a, b testBatch) int { return cmp.Compare(a.seq, b.seq) })
	for _, b := range bs {
		b.Messages = slices.Clone(b.Messages)
		r.Batches = append(r.Batches, b.TestBatchResult)
	}
	return r
}

func (t *testAcker[Out]) left() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.remaining
}
