package pipeline_test

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/validate"
)

// batchLog records the batches a batch handler saw.
type batchLog struct {
	mu    sync.Mutex
	data  [][]uint64
	infos []message.BatchInfo
}

func (l *batchLog) handle(_ context.Context, batch []*message.Message[uint64], info message.BatchInfo) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d []uint64
	for _, m := range batch {
		d = append(d, m.Data)
	}
	l.data = append(l.data, d)
	l.infos = append(l.infos, info)
	return nil
}

func (l *batchLog) snapshot() ([][]uint64, []message.BatchInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.data), slices.Clone(l.infos)
}

func startPipeline[In, Out any](t *testing.T, p *pipeline.Pipeline[In, Out]) {
	t.Helper()
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
}

// Guarantee: a batcher with Weight and MaxWeight emits, through a running
// pipeline, batches whose total weight stays within MaxWeight, with trigger
// weight and the total in BatchInfo.
func TestPipelineBatchesBoundedByWeight(t *testing.T) {
	var log batchLog
	p := pushOnly(t, batcher.Options[uint64]{
		Name: "default", BatchSize: 100, BatchTimeout: time.Hour, Concurrency: 1,
		Weight:    func(m *message.Message[uint64]) int { return int(m.Data) },
		MaxWeight: 10,
		Handle:    log.handle,
	})
	startPipeline(t, p)
	// Whatever order the processors hand them over in, weights of 5 make
	// two batches of total weight 10.
	if _, err := p.TestBatch(ctxT(t, 10*time.Second), 5, 5, 5, 5); err != nil {
		t.Fatalf("TestBatch: %v", err)
	}
	data, infos := log.snapshot()
	for i, info := range infos {
		var sum uint64
		for _, d := range data[i] {
			sum += d
		}
		if info.Trigger != message.TriggerWeight || info.Weight != 10 || sum != 10 {
			t.Errorf("batch %d: %v %+v, want total weight 10 with trigger weight", i, data[i], info)
		}
	}
}

// Guarantee: Weight and MaxWeight are set together, and MaxWeight is
// within its bounds; New names the field and the rule.
func TestWeightOptionsValidated(t *testing.T) {
	weight := func(*message.Message[uint64]) int { return 1 }
	cases := []struct {
		name        string
		weight      func(*message.Message[uint64]) int
		max         int
		field, rule string
	}{
		{"weight without max", weight, 0, "batchers[0].maxWeight", "required_with"},
		{"max without weight", nil, 5, "batchers[0].weight", "required_with"},
		{"max negative", weight, -1, "batchers[0].maxWeight", "gte"},
		{"max too large", weight, batcher.MaxWeightLimit + 1, "batchers[0].maxWeight", "lte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			o.Batchers[0].Weight, o.Batchers[0].MaxWeight = tc.weight, tc.max
			_, err := pipeline.New(o)
			var errs validate.Errors
			if !errors.As(err, &errs) || !errs.Has(tc.field, tc.rule) {
				t.Fatalf("New = %v, want %s breaking %s", err, tc.field, tc.rule)
			}
		})
	}
	o := validOptions()
	o.Batchers[0].Weight, o.Batchers[0].MaxWeight = weight, batcher.MaxWeightLimit
	if _, err := pipeline.New(o); err != nil {
		t.Fatalf("New with both set: %v", err)
	}
}

// Guarantee: messages acknowledged immediately are acknowledged exactly
// once, as successes, before their batch is handled, even when the batch
// handler then fails them; the others are acknowledged once with their
// batch's outcome.
func TestAckImmediatelyExactlyOnce(t *testing.T) {
	rec := acker.NewRecorder(false)
	var handled atomic.Int32
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "ack-now",
		Processors: processor.Options[uint64, uint64]{Concurrency: 2, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
			if m.Data%2 == 1 {
				message.AckImmediately(m)
			}
			return m.Data, nil
		}},
		Batchers: []batcher.Options[uint64]{{Name: "default", BatchSize: 1000, BatchTimeout: time.Hour,
			Handle: func(context.Context, []*message.Message[uint64], message.BatchInfo) error {
				handled.Add(1)
				return errors.New("batch failed")
			}}},
	})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var msgs []*message.Message[uint64]
	for i := range 40 {
		msgs = append(msgs, message.New(uint64(i), rec, uint64(i)))
	}
	if err := p.Push(ctxT(t, 10*time.Second), msgs...); err != nil {
		t.Fatal(err)
	}
	// The batch stays open until the drain: the odd ones are acknowledged
	// before any batch handler runs.
	if err := rec.Wait(ctxT(t, 10*time.Second), 20); err != nil {
		t.Fatalf("waiting for the immediate acknowledgements: %v", err)
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d batches handled before the immediate acknowledgements", n)
	}
	if err := p.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertExactlyOnce(t, rec, 40)
	for _, o := range rec.Successful() {
		if o.ID%2 == 0 {
			t.Errorf("message %d succeeded; its batch failed", o.ID)
		}
	}
	if f := rec.FailedCount(); f != 20 {
		t.Errorf("%d failed outcomes, want the 20 even messages", f)
	}
}

// Guarantee: MinDemand is below the processors' MaxDemand and a batcher's
// MaxDemand within its bounds; New names the field and the rule.
func TestDemandOptionsValidated(t *testing.T) {
	cases := []struct {
		name        string
		mutate      func(o *pipeline.Options[uint64, uint64])
		field, rule string
	}{
		{"min demand negative", func(o *pipeline.Options[uint64, uint64]) { o.Processors.MinDemand = -1 }, "processors.minDemand", "gte"},
		{"min demand not below max", func(o *pipeline.Options[uint64, uint64]) {
			o.Processors.MaxDemand, o.Processors.MinDemand = 5, 5
		}, "processors.minDemand", "ltfield"},
		{"batcher max demand negative", func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].MaxDemand = -1 }, "batchers[0].maxDemand", "gte"},
		{"batcher max demand too large", func(o *pipeline.Options[uint64, uint64]) {
			o.Batchers[0].MaxDemand = batcher.MaxDemandLimit + 1
		}, "batchers[0].maxDemand", "lte"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(&o)
			_, err := pipeline.New(o)
			var errs validate.Errors
			if !errors.As(err, &errs) || !errs.Has(tc.field, tc.rule) {
				t.Fatalf("New = %v, want %s breaking %s", err, tc.field, tc.rule)
			}
		})
	}
	o := validOptions()
	if got := o.Batchers[0].WithDefaults().MaxDemand; got != batcher.DefaultMaxDemand {
		t.Errorf("default batcher MaxDemand %d, want %d", got, batcher.DefaultMaxDemand)
	}
	o.Processors.MaxDemand, o.Processors.MinDemand = 10, 9
	o.Batchers[0].MaxDemand = batcher.MaxDemandLimit
	if _, err := pipeline.New(o); err != nil {
		t.Fatalf("New with demands at their bounds: %v", err)
	}
}

// Guarantee: UpdateRateLimit changes only the fields its function changes,
// validates the result (leaving the limit alone when it is invalid), and
// both it and ResetRateLimit report producer.ErrNoRateLimit without a
// limit.
func TestUpdateRateLimitValidatesOneField(t *testing.T) {
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:       "rate",
		Producer:   producer.Options[uint64]{RateLimit: &producer.RateLimit{Allowed: 10, Interval: time.Second}},
		Processors: processor.Options[uint64, uint64]{Handle: identity},
	})
	if err := p.UpdateRateLimit(func(rl *producer.RateLimit) { rl.Allowed = 500 }); err != nil {
		t.Fatalf("UpdateRateLimit: %v", err)
	}
	if rl := p.RateLimit(); *rl != (producer.RateLimit{Allowed: 500, Interval: time.Second}) {
		t.Fatalf("limit %+v, want Allowed 500 and Interval kept", rl)
	}
	err := p.UpdateRateLimit(func(rl *producer.RateLimit) { rl.Interval = 0 })
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("rateLimit.interval", "gt") {
		t.Fatalf("UpdateRateLimit to interval 0 = %v, want rateLimit.interval breaking gt", err)
	}
	if rl := p.RateLimit(); rl.Interval != time.Second {
		t.Fatalf("an invalid update changed the limit to %+v", rl)
	}
	if err := p.ResetRateLimit(); err != nil {
		t.Fatalf("ResetRateLimit: %v", err)
	}
	if err := p.SetRateLimit(nil); err != nil {
		t.Fatal(err)
	}
	if err := p.UpdateRateLimit(func(*producer.RateLimit) {}); !errors.Is(err, producer.ErrNoRateLimit) {
		t.Errorf("UpdateRateLimit without a limit = %v", err)
	}
	if err := p.ResetRateLimit(); !errors.Is(err, producer.ErrNoRateLimit) {
		t.Errorf("ResetRateLimit without a limit = %v", err)
	}
}

// Guarantee: UpdateRateLimit refuses a nil function with
// ErrNilRateLimitFunc and returns a panic in its function as an error
// wrapping *message.PanicError, even after the function changed its copy:
// either way the limit in force stays as it was, the running pipeline goes
// on under it, and a later update takes effect.
func TestUpdateRateLimitRefusesNilAndContainsPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := acker.NewRecorder(false)
		old := producer.RateLimit{Allowed: 1, Interval: time.Second}
		p := mustNew(t, pipeline.Options[uint64, uint64]{
			Name: "rate",
			Producer: producer.Options[uint64]{
				Source:    &gridSource{feeds: 1, perFeed: 10, ack: rec},
				RateLimit: &old,
			},
			Processors: processor.Options[uint64, uint64]{Handle: identity},
		})
		if err := p.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first message passed; the next waits for a token
		if n := rec.Total(); n != 1 {
			t.Fatalf("%d messages passed a limit of 1 per second at once, want 1", n)
		}
		if err := p.UpdateRateLimit(nil); !errors.Is(err, pipeline.ErrNilRateLimitFunc) {
			t.Fatalf("UpdateRateLimit(nil) = %v, want ErrNilRateLimitFunc", err)
		}
		err := p.UpdateRateLimit(func(rl *producer.RateLimit) {
			rl.Allowed = 1000
			panic("no limit for you")
		})
		var pe *message.PanicError
		if !errors.As(err, &pe) || pe.Value != "no limit for you" {
			t.Fatalf("UpdateRateLimit with a panicking function = %v, want a *message.PanicError", err)
		}
		if rl := p.RateLimit(); rl == nil || *rl != old {
			t.Fatalf("limit %+v after the refused updates, want %+v", rl, old)
		}
		// Still one message a second: the second passes at 1s, the
		// third at 2s.
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := rec.Total(); n != 2 {
			t.Fatalf("%d messages passed in 1.5s under a limit of 1 per second, want 2", n)
		}
		if err := p.UpdateRateLimit(func(rl *producer.RateLimit) { rl.Allowed = 1000 }); err != nil {
			t.Fatalf("UpdateRateLimit after the refused ones: %v", err)
		}
		<-p.Done()
		assertExactlyOnce(t, rec, 10)
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Guarantee: a message Prepare fails is not given to Handle (unlike
// Broadway's handle_message), is seen by HandleFailed, never reaches a
// batcher, and is acknowledged once as failed with Prepare's error.
func TestPrepareFailedMessagesSkipHandle(t *testing.T) {
	errPrep := errors.New("not prepared")
	var handledFailed, sawInHandle, sawInBatch, sawInHook atomic.Int32
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name: "prepare",
		Processors: processor.Options[uint64, uint64]{
			Concurrency: 1,
			Prepare: func(_ context.Context, msgs []*message.Message[uint64]) error {
				for _, m := range msgs {
					if m.Data == 3 {
						m.Fail(errPrep)
					}
				}
				return nil
			},
			Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
				if m.Data == 3 {
					sawInHandle.Add(1)
				}
				return m.Data, nil
			},
			HandleFailed: func(_ context.Context, failed []*message.Message[uint64]) {
				for _, m := range failed {
					if m.Data == 3 {
						sawInHook.Add(1)
					}
				}
				handledFailed.Add(int32(len(failed)))
			},
		},
		Batchers: []batcher.Options[uint64]{{Name: "default", Handle: func(_ context.Context, b []*message.Message[uint64], _ message.BatchInfo) error {
			for _, m := range b {
				if m.Data == 3 {
					sawInBatch.Add(1)
				}
			}
			return nil
		}}},
	})
	startPipeline(t, p)
	res, err := p.Test(ctxT(t, 10*time.Second), 1, 2, 3, 4)
	if err != nil {
		t.Fatalf("Test: %v", err)
	}
	for i, r := range res {
		if wantErr := i == 2; (r.Err != nil) != wantErr || r.Acks != 1 || (wantErr && !errors.Is(r.Err, errPrep)) {
			t.Errorf("message %d: %+v, want one outcome, failed with Prepare's error only for the third", i, r)
		}
	}
	if sawInHandle.Load() != 0 || sawInBatch.Load() != 0 || sawInHook.Load() != 1 || handledFailed.Load() != 1 {
		t.Errorf("message failed in Prepare seen by Handle %d, batch handler %d, HandleFailed %d times (failed seen %d); want 0, 0, 1 (1)",
			sawInHandle.Load(), sawInBatch.Load(), sawInHook.Load(), handledFailed.Load())
	}
}

// Guarantee: one top-level PartitionBy partitions the processors and every
// batcher: a key's messages reach the batch handler in the order they were
// pushed, always in batcher partition FNV-1a(key) mod Concurrency.
func TestTopLevelPartitionByKeepsKeysInOrder(t *testing.T) {
	const batchers = 3
	var mu sync.Mutex
	seenBy := map[string][]uint64{}
	partOf := map[string]map[int]bool{}
	p := mustNew(t, pipeline.Options[uint64, uint64]{
		Name:        "partitioned",
		PartitionBy: message.Keyed.PartitionKey,
		Processors: processor.Options[uint64, uint64]{Concurrency: 4, MaxDemand: 3, Handle: func(_ context.Context, m *message.Message[uint64]) (uint64, error) {
			m.SetBatchKey(m.PartitionKey())
			return m.Data, nil
		}},
		Batchers: []batcher.Options[uint64]{{Name: "default", Concurrency: batchers, BatchSize: 4, BatchTimeout: time.Millisecond,
			Handle: func(_ context.Context, b []*message.Message[uint64], info message.BatchInfo) error {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range b {
					k := m.PartitionKey()
					seenBy[k] = append(seenBy[k], m.Data)
					if partOf[k] == nil {
						partOf[k] = map[int]bool{}
					}
					partOf[k][info.Partition] = true
				}
				return nil
			}}},
	})
	startPipeline(t, p)
	rec := acker.NewRecorder(false)
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	var msgs []*message.Message[uint64]
	for i := range 700 {
		m := message.New(uint64(i), rec, uint64(i))
		m.SetPartitionKey(keys[i%len(keys)])
		msgs = append(msgs, m)
	}
	if err := p.Push(ctxT(t, 10*time.Second), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := rec.Wait(ctxT(t, 10*time.Second), len(msgs)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		if !slices.IsSorted(seenBy[k]) || len(seenBy[k]) != 100 {
			t.Errorf("key %s: %d messages, in order %v; want 100 in push order", k, len(seenBy[k]), slices.IsSorted(seenBy[k]))
		}
		h := fnv.New64a()
		h.Write([]byte(k))
		want := int(h.Sum64() % batchers)
		if len(partOf[k]) != 1 || !partOf[k][want] {
			t.Errorf("key %s in batcher partitions %v, want only %d", k, partOf[k], want)
		}
	}
}

// Guarantee: the top-level PartitionBy is not set together with a stage's
// own; New names the field and the rule.
func TestTopLevelPartitionByExcludesStageOnes(t *testing.T) {
	byKey := func(m *message.Message[uint64]) string { return m.PartitionKey() }
	for name, mutate := range map[string]func(o *pipeline.Options[uint64, uint64]){
		"processors": func(o *pipeline.Options[uint64, uint64]) { o.Processors.PartitionBy = byKey },
		"batcher":    func(o *pipeline.Options[uint64, uint64]) { o.Batchers[0].PartitionBy = byKey },
	} {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			o.PartitionBy = message.Keyed.PartitionKey
			mutate(&o)
			_, err := pipeline.New(o)
			var errs validate.Errors
			if !errors.As(err, &errs) || !errs.Has("partitionBy", "excluded_with") {
				t.Fatalf("New = %v, want partitionBy breaking excluded_with", err)
			}
		})
	}
	o := validOptions()
	o.PartitionBy = message.Keyed.PartitionKey
	if _, err := pipeline.New(o.WithDefaults()); err != nil {
		t.Fatalf("New with only the top-level PartitionBy (defaults applied twice): %v", err)
	}
}
