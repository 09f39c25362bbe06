package pipeline_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// payload stands for a user's message body: big enough not to be a tiny
// allocation sharing its block with others.
type payload struct {
	n int
	_ [1 << 10]byte
}

// countingAcker counts the outcomes reported and keeps none of them.
type countingAcker struct {
	n    atomic.Int64
	done chan struct{}
	want int64
}

func (a *countingAcker) Ack(_ context.Context, ok, failed []acker.Outcome) {
	if a.n.Add(int64(len(ok)+len(failed))) == a.want {
		close(a.done)
	}
}

// deliverPayloads has a source deliver n distinct payloads and returns weak
// pointers to them; the source then waits for the pipeline to stop.
func deliverPayloads(n int, ack acker.Acknowledger, ws []weak.Pointer[payload]) producer.Source[*payload] {
	return producer.SourceFunc[*payload](func(ctx context.Context, st *producer.Stage[*payload]) error {
		f := st.NewFeed("payloads", nil)
		for i := 0; i < n; {
			k, err := f.Acquire(ctx, n-i)
			if err != nil {
				return nil
			}
			for ; k > 0; k-- {
				p := &payload{n: i}
				ws[i] = weak.Make(p)
				f.Deliver(message.New(p, ack, uint64(i)))
				i++
			}
		}
		<-ctx.Done()
		f.Close()
		return nil
	})
}

// retainCase is a pipeline's shape: each of its options sends messages
// through other buffers.
type retainCase struct {
	procs, batchers, batchSize int
	fail, hooks, partitioned   bool
	weighted                   bool
	queue                      int // the stages' QueueCapacity, 0 for the default
}

func (c retainCase) options(src producer.Source[*payload]) pipeline.Options[*payload, *payload] {
	proc := processor.Options[*payload, *payload]{
		Concurrency: c.procs,
		Handle: func(_ context.Context, m *message.Message[*payload]) (*payload, error) {
			if c.fail && m.Data.n%3 == 0 {
				return nil, context.DeadlineExceeded
			}
			return m.Data, nil
		},
	}
	bat := batcher.Options[*payload]{
		Name: message.DefaultBatcher, BatchSize: c.batchSize, BatchTimeout: time.Millisecond, Concurrency: c.batchers,
		Handle: func(_ context.Context, batch []*message.Message[*payload], _ message.BatchInfo) error {
			for _, m := range batch {
				if c.fail && m.Data.n%3 == 1 {
					m.Fail(context.DeadlineExceeded)
				}
			}
			return nil
		},
	}
	proc.QueueCapacity, bat.QueueCapacity = c.queue, c.queue
	if c.hooks {
		proc.Prepare = func(context.Context, []*message.Message[*payload]) error { return nil }
		proc.HandleFailed = func(context.Context, []*message.Message[*payload]) {}
		bat.HandleFailed = func(context.Context, []*message.Message[*payload], message.BatchInfo) {}
	}
	if c.partitioned {
		proc.PartitionBy = func(m *message.Message[*payload]) string { return strconv.Itoa(m.Data.n % 5) }
		bat.PartitionBy = func(m *message.Message[*payload]) string { return strconv.Itoa(m.Data.n % 3) }
	}
	if c.weighted {
		bat.Weight = func(m *message.Message[*payload]) int { return 1 + m.Data.n%4 }
		bat.MaxWeight = 3 * c.batchSize
	}
	return pipeline.Options[*payload, *payload]{
		Name:       "retain",
		Producer:   producer.Options[*payload]{Source: src},
		Processors: proc,
		Batchers:   []batcher.Options[*payload]{bat},
	}
}

// Guarantee: once every message's outcome is reported and the handlers
// returned, the running pipeline keeps none of their payloads: its stages'
// chunks, queues and batches let go of a message when it leaves them, so a
// burst of large payloads is not kept alive by the buffers it passed through.
func TestARunningPipelineKeepsNoSettledPayload(t *testing.T) {
	const n = 1000
	for name, c := range map[string]retainCase{
		"one processor, batches of 7":    {procs: 1, batchers: 1, batchSize: 7},
		"four processors, batches of 64": {procs: 4, batchers: 2, batchSize: 64},
		"failing messages":               {procs: 2, batchers: 1, batchSize: 10, fail: true},
		"failing messages, hooks":        {procs: 2, batchers: 2, batchSize: 10, fail: true, hooks: true},
		"partitioned":                    {procs: 3, batchers: 2, batchSize: 10, fail: true, partitioned: true},
		"small queues":                   {procs: 2, batchers: 2, batchSize: 4, queue: 5},
		"weighted":                       {procs: 2, batchers: 2, batchSize: 10, weighted: true},
	} {
		t.Run(name, func(t *testing.T) {
			ack := &countingAcker{done: make(chan struct{}), want: n}
			ws := make([]weak.Pointer[payload], n)
			p := mustNew(t, c.options(deliverPayloads(n, ack, ws)))
			ctx := ctxT(t, 30*time.Second)
			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.Stop(ctx); err != nil {
					t.Error(err)
				}
			}()
			select {
			case <-ack.done:
			case <-ctx.Done():
				t.Fatalf("only %d of %d outcomes reported", ack.n.Load(), n)
			}
			if live := wait.Reachable(ws); live > 0 {
				t.Errorf("%d of %d payloads still reachable from the running pipeline after their outcomes were reported", live, n)
			}
		})
	}
}
