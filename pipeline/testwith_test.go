package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// testMeta is a source's metadata type, as a handler reads it.
type testMeta struct{ Partition int }

// Guarantee: TestWith gives the messages its metadata, batcher and batch
// key, forwards every acknowledgement to a custom acknowledger, and
// reports which messages were handled together with their BatchInfo.
func TestTestWithOptionsAndBatchBoundaries(t *testing.T) {
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "test-with",
		Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
			md, ok := message.MetadataAs[*testMeta](m)
			if !ok {
				return 0, errNoMeta
			}
			return m.Data*100 + uint64(md.Partition), nil
		}},
		Batchers: []batcher.Options[uint64]{
			{Name: "default", BatchSize: 100, BatchTimeout: time.Hour, Handle: batchOK},
			{Name: "pairs", BatchSize: 2, BatchTimeout: time.Hour, Handle: batchOK},
		},
	})
	startPipeline(t, p)
	rec := acker.NewRecorder(false)
	r, err := p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{
		Batcher:      "pairs",
		BatchKey:     "k",
		MetadataFor:  func(i int) any { return &testMeta{Partition: i} },
		Acknowledger: rec,
	}, 1, 2, 3, 4)
	if err != nil {
		t.Fatalf("TestWith: %v", err)
	}
	for i, o := range r.Outcomes {
		if o.Err != nil || o.Data != uint64((i+1)*100+i) || o.Batcher != "pairs" || o.BatchKey != "k" || o.Acks != 1 {
			t.Errorf("outcome %d: %+v, want data %d in batcher pairs, key k, once", i, o, (i+1)*100+i)
		}
	}
	if len(r.Batches) != 2 {
		t.Fatalf("batches %+v, want two pairs", r.Batches)
	}
	for i, b := range r.Batches {
		want := []int{2 * i, 2*i + 1}
		if !slices.Equal(b.Messages, want) || b.Info.Batcher != "pairs" || b.Info.BatchKey != "k" || b.Info.Size != 2 || b.Info.Trigger != message.TriggerSize {
			t.Errorf("batch %d: %+v, want messages %v in a size-2 batch of pairs/k", i, b, want)
		}
	}
	if rec.Total() != 4 || rec.FailedCount() != 0 {
		t.Errorf("custom acknowledger saw %d outcomes (%d failed), want 4 successes", rec.Total(), rec.FailedCount())
	}

	// Flush mode: one batch per message, with trigger flush; the shared
	// Metadata reaches every message.
	r, err = p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{Mode: message.Flush, Metadata: &testMeta{Partition: 7}}, 5, 6)
	if err != nil {
		t.Fatalf("TestWith flush: %v", err)
	}
	if r.Outcomes[0].Data != 507 || r.Outcomes[1].Data != 607 {
		t.Errorf("outcomes %+v, want 507 and 607", r.Outcomes)
	}
	if len(r.Batches) != 2 || r.Batches[0].Info.Trigger != message.TriggerFlush || r.Batches[0].Info.Batcher != "default" || len(r.Batches[0].Messages) != 1 {
		t.Errorf("flush batches %+v, want one default batch per message, trigger flush", r.Batches)
	}
}

// Guarantee: TestWith returns only after the custom acknowledger has
// returned from its calls for every message, so what it recorded is
// complete when the test reads it.
func TestTestWithReturnsAfterTheCustomAcknowledger(t *testing.T) {
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "test-with-slow-acker",
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
			return m.Data, nil
		}},
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 2, BatchTimeout: time.Hour, Handle: batchOK}},
	})
	startPipeline(t, p)
	returned := make(chan struct{})
	slow := &lateAcker{returned: returned, rec: acker.NewRecorder(false)}
	done := make(chan error, 1)
	go func() {
		_, err := p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{Acknowledger: slow}, 1, 2, 3, 4)
		close(returned)
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("TestWith: %v", err)
	}
	if n := slow.early.Load(); n > 0 {
		t.Errorf("TestWith returned during %d call(s) to the custom acknowledger", n)
	}
	if slow.rec.Total() != 4 {
		t.Errorf("the custom acknowledger saw %d outcomes when TestWith returned, want 4", slow.rec.Total())
	}
}

// lateAcker records outcomes after holding each call for a moment, and
// counts the calls during which returned was closed.
type lateAcker struct {
	returned <-chan struct{}
	rec      *acker.Recorder
	early    atomic.Int32
}

func (a *lateAcker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	select {
	case <-a.returned:
		a.early.Add(1)
	case <-time.After(50 * time.Millisecond): // a check that something does not happen
	}
	a.rec.Ack(ctx, successful, failed)
}

var errNoMeta = errors.New("no metadata")

// Guarantee: Test, TestBatch and TestWith given no data report the
// pipeline's state as Push does: ErrNotBuilt on the zero Pipeline,
// ErrNotStarted before Start, nil while it runs, ErrStopped after Stop.
func TestTestWithoutDataReportsThePipelineState(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	calls := func(p *pipeline.Pipeline[uint64, uint64]) map[string]func() error {
		return map[string]func() error{
			"Test":      func() error { _, err := p.Test(ctx); return err },
			"TestBatch": func() error { _, err := p.TestBatch(ctx); return err },
			"TestWith":  func() error { _, err := p.TestWith(ctx, pipeline.TestOptions{}); return err },
		}
	}
	check := func(p *pipeline.Pipeline[uint64, uint64], when string, want error) {
		t.Helper()
		for name, call := range calls(p) {
			if err := call(); !errors.Is(err, want) || (want == nil && err != nil) {
				t.Errorf("%s with no data %s = %v, want %v", name, when, err, want)
			}
		}
	}
	check(new(pipeline.Pipeline[uint64, uint64]), "on the zero Pipeline", pipeline.ErrNotBuilt)
	p := pushOnly(t)
	check(p, "before Start", pipeline.ErrNotStarted)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	check(p, "while running", nil)
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	check(p, "after Stop", pipeline.ErrStopped)
}

// idleOrderedSource asks for ordering by partition key and delivers
// nothing: a pipeline fed through TestWith as an ordered (Kafka-like)
// source's pipeline is.
type idleOrderedSource struct{ producer.Basic }

func (idleOrderedSource) Info() (producer.Info, error) { return producer.Info{Ordered: true}, nil }

func (idleOrderedSource) Run(ctx context.Context, _ *producer.Stage[uint64]) error {
	<-ctx.Done()
	return nil
}

// Guarantee: TestWith gives its messages the partition keys of
// PartitionKey and PartitionKeyFor, so that a pipeline whose source asks
// for ordering spreads them over its processors as the source's messages
// would be: messages of different keys run side by side (the first key's
// message here waits for the second key's one), and each key's messages
// are handled in push order.
func TestTestWithPartitionKeysSpreadMessagesOverProcessors(t *testing.T) {
	const processors = 4
	// Two keys that land on different processors (FNV-1a mod Concurrency).
	part := func(k string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(k))
		return h.Sum32() % processors
	}
	keyA, keyB := "p0", ""
	for i := 1; keyB == ""; i++ {
		if k := fmt.Sprintf("p%d", i); part(k) != part(keyA) {
			keyB = k
		}
	}
	bHandled := make(chan struct{})
	var mu sync.Mutex
	seen := map[string][]uint64{}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:     "test-with-partitions",
		Producer: producer.Options[uint64]{Source: idleOrderedSource{}},
		Processors: processor.Options[uint64, uint64]{Concurrency: processors, Handle: func(ctx context.Context, m *message.Message[uint64]) (uint64, error) {
			if m.Data == 0 { // keyA's first message: needs keyB on another processor
				select {
				case <-bHandled:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			mu.Lock()
			seen[m.PartitionKey()] = append(seen[m.PartitionKey()], m.Data)
			mu.Unlock()
			if m.Data == 1 {
				close(bHandled)
			}
			return m.Data, nil
		}},
	})
	startPipeline(t, p)
	keys := []string{keyA, keyB, keyA, keyB, keyA, keyB}
	r, err := p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{
		Mode:            message.Flush,
		PartitionKeyFor: func(i int) string { return keys[i] },
	}, 0, 1, 2, 3, 4, 5)
	if err != nil {
		t.Fatalf("TestWith: %v", err)
	}
	for i, o := range r.Outcomes {
		if o.Err != nil || o.Acks != 1 {
			t.Errorf("outcome %d: %+v, want one success", i, o)
		}
	}
	mu.Lock()
	if a, b := seen[keyA], seen[keyB]; !slices.Equal(a, []uint64{0, 2, 4}) || !slices.Equal(b, []uint64{1, 3, 5}) {
		t.Errorf("handled per partition key %v, want %s: [0 2 4], %s: [1 3 5]", seen, keyA, keyB)
	}
	clear(seen)
	mu.Unlock()

	// PartitionKey gives every message the same key.
	if _, err := p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{PartitionKey: keyB}, 7, 8); err != nil {
		t.Fatalf("TestWith: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := seen[keyB]; !slices.Equal(got, []uint64{7, 8}) {
		t.Errorf("handled per partition key %v, want %s: [7 8]", seen, keyB)
	}
}

// Guarantee: TestWith calls made at once, whose messages share batches
// handled by several batch processors, each report their own messages
// only: every outcome once with its own data, and every message in exactly
// one of the batches the call lists.
func TestConcurrentTestWithCallsEachReportTheirOwnMessages(t *testing.T) {
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "test-with-calls",
		Processors: processor.Options[uint64, uint64]{Concurrency: 4, Handle: identity},
		Batchers:   []batcher.Options[uint64]{{Name: "default", BatchSize: 2, BatchTimeout: time.Millisecond, Concurrency: 4, Handle: batchOK}},
	})
	startPipeline(t, p)
	const calls, each = 4, 64
	var wg sync.WaitGroup
	for c := range calls {
		wg.Go(func() {
			data := make([]uint64, each)
			for i := range data {
				data[i] = uint64(c*1000 + i)
			}
			r, err := p.TestWith(ctxT(t, 10*time.Second), pipeline.TestOptions{}, data...)
			if err != nil {
				t.Errorf("call %d: TestWith: %v", c, err)
				return
			}
			for i, o := range r.Outcomes {
				if o.Err != nil || o.Data != data[i] || o.Acks != 1 {
					t.Errorf("call %d, outcome %d: %+v, want data %d acknowledged once", c, i, o, data[i])
				}
			}
			seen := make([]int, each)
			for _, b := range r.Batches {
				for _, i := range b.Messages {
					seen[i]++
				}
			}
			for i, n := range seen {
				if n != 1 {
					t.Errorf("call %d: message %d in %d of the batches listed, want 1: %+v", c, i, n, r.Batches)
				}
			}
		})
	}
	wg.Wait()
}
