package batching_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/release"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/telemetry"
)

// handled is a batch a release test's handler saw.
type handled struct {
	key     string
	ids     []int
	trigger message.Trigger
}

// publishAll hands ms to s and fails the test unless s took all of them.
func publishAll(ctx context.Context, t *testing.T, s *batching.Batcher[int], ms ...*message.Message[int]) {
	t.Helper()
	if n, err := s.Publish(ctx, ms); err != nil || n != len(ms) {
		t.Fatalf("Publish took %d of %d: %v", n, len(ms), err)
	}
}

// Guarantee: when a source begins to release a feed, every batcher
// partition emits its open batches at once, with trigger flush, without
// waiting for BatchTimeout; while the release lasts, a batch is emitted as
// soon as the chunk that filled it is taken in; once it has ended,
// batches wait for their size or timeout again. Every message is
// acknowledged once and a key's messages keep their order. A storm of
// releases emits nothing twice.
func TestReleaseEmitsOpenBatchesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts batcher.Options[int]
	}{
		{"shared", batcher.Options[int]{Concurrency: 1}},
		{"partitioned", batcher.Options[int]{Concurrency: 3, PartitionBy: func(m *message.Message[int]) string { return m.BatchKey() }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { releaseEmits(t, tc.opts) })
		})
	}
}

func releaseEmits(t *testing.T, opts batcher.Options[int]) {
	var mu sync.Mutex
	var got, all []handled
	take := func() []handled {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	opts.Name = "release"
	opts.BatchSize = 100
	opts.BatchTimeout = never
	opts.Handle = func(_ context.Context, batch []*message.Message[int], info message.BatchInfo) error {
		h := handled{key: info.BatchKey, trigger: info.Trigger}
		for _, m := range batch {
			h.ids = append(h.ids, m.Data)
		}
		mu.Lock()
		got = append(got, h)
		all = append(all, h)
		mu.Unlock()
		return nil
	}
	sig := &release.Signal{}
	s := batching.New(opts.WithDefaults(), batching.Config{Name: t.Name(), Release: sig})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := stagetest.Go(ctx, s)
	rec := acker.NewRecorder(false)
	publish := func(ms ...*message.Message[int]) {
		t.Helper()
		publishAll(ctx, t, s, ms...)
	}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	if opts.PartitionBy != nil {
		parts := map[int]bool{}
		for _, k := range keys {
			parts[queue.KeyPartition(k, opts.Concurrency)] = true
		}
		if len(parts) < 2 {
			t.Fatalf("test setup: the keys map to %d partition(s), need several", len(parts))
		}
	}
	id := 0
	next := func(key string, n int) []*message.Message[int] {
		ms := msgs(rec, id, n, key)
		id += n
		return ms
	}
	start := time.Now()
	for _, k := range keys {
		publish(next(k, 3)...)
	}
	if b := take(); len(b) != 0 {
		t.Fatalf("batches %v emitted before any release", b)
	}

	end := sig.Begin()
	b := take()
	if len(b) != len(keys) {
		t.Fatalf("a release emitted %v, want one batch per key (%d)", b, len(keys))
	}
	for _, h := range b {
		if h.trigger != message.TriggerFlush || len(h.ids) != 3 {
			t.Errorf("batch %+v: want 3 messages, trigger flush", h)
		}
	}
	// While it lasts, a batch does not wait for its timeout.
	publish(next("a", 2)...)
	if b := take(); len(b) != 1 || !slices.Equal(b[0].ids, []int{18, 19}) || b[0].trigger != message.TriggerFlush {
		t.Fatalf("during the release emitted %v, want [18 19] with trigger flush", b)
	}
	if time.Since(start) != 0 {
		t.Fatalf("the batches waited %v", time.Since(start))
	}
	end()
	end()
	publish(next("b", 2)...)
	if b := take(); len(b) != 0 {
		t.Fatalf("batches %v emitted once the release ended", b)
	}
	// A storm of releases emits the open batch once.
	var ends []func()
	for range 1000 {
		ends = append(ends, sig.Begin())
	}
	if b := take(); len(b) != 1 || !slices.Equal(b[0].ids, []int{20, 21}) {
		t.Fatalf("a storm of releases emitted %v, want [20 21] once", b)
	}
	for _, end := range ends {
		end()
	}
	s.CloseInput()
	<-done
	assertOnce(t, rec, span(0, id))
	last := map[string]int{}
	for _, h := range all {
		for _, i := range h.ids {
			if prev, ok := last[h.key]; ok && i < prev {
				t.Errorf("key %s: message %d handled after %d", h.key, i, prev)
			}
			last[h.key] = i
		}
	}
}

// Guarantee: a BatchEmit hook that ends the partition's goroutine
// (runtime.Goexit) while a release emits the open batches does not leave
// the others open until BatchTimeout: the goroutine that takes over emits
// them at once, since the release still lasts, and every message is
// acknowledged once.
func TestReleaseEmitsEveryOpenBatchThoughTheEmitHookEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exit := stagetest.GoexitOnce()
		hooks := &telemetry.Hooks{BatchEmit: func(context.Context, telemetry.Batch) { exit() }}
		sig := &release.Signal{}
		s := batching.New(batcher.Options[int]{
			Name: "release", Concurrency: 1, BatchSize: 100, BatchTimeout: never,
			Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error { return nil },
		}.WithDefaults(), batching.Config{Name: t.Name(), Logger: slog.New(slog.DiscardHandler), Hooks: hooks, Release: sig})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := stagetest.Go(ctx, s)
		rec := acker.NewRecorder(false)
		var ms []*message.Message[int]
		for i, k := range []string{"a", "b", "c"} {
			ms = append(ms, msgs(rec, 2*i, 2, k)...)
		}
		if n, err := s.Publish(ctx, ms); err != nil || n != len(ms) {
			t.Fatalf("Publish took %d of %d: %v", n, len(ms), err)
		}
		synctest.Wait()
		end := sig.Begin()
		defer end()
		synctest.Wait()
		if got := rec.Total(); got != len(ms) {
			t.Fatalf("%d of %d messages acknowledged while the release lasts; the rest wait in open batches", got, len(ms))
		}
		s.CloseInput()
		<-done
		assertOnce(t, rec, span(0, len(ms)))
	})
}

// Guarantee: a release that has ended before a batcher partition takes
// its wake-up cuts no batch short: the wake-up it left behind emits
// nothing, and the open batch waits for its size or timeout.
func TestReleaseEndedBeforeThePartitionWokeEmitsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sig := &release.Signal{}
		var emitted []message.Trigger
		var mu sync.Mutex
		// The partition is held in the hook of its first emission while
		// the release begins and ends: it cannot look at the release
		// before it has ended, and takes the wake-up afterwards.
		gate := make(chan struct{})
		var held sync.Once
		hooks := &telemetry.Hooks{BatchEmit: func(context.Context, telemetry.Batch) { held.Do(func() { <-gate }) }}
		s := batching.New(batcher.Options[int]{
			Name: "release", Concurrency: 1, BatchSize: 2, BatchTimeout: never,
			Handle: func(_ context.Context, _ []*message.Message[int], info message.BatchInfo) error {
				mu.Lock()
				emitted = append(emitted, info.Trigger)
				mu.Unlock()
				return nil
			},
		}.WithDefaults(), batching.Config{Name: t.Name(), Hooks: hooks, Release: sig})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := stagetest.Go(ctx, s)
		rec := acker.NewRecorder(false)
		// Key a's message opens a batch; key b's two fill one, whose
		// emission holds the partition.
		ms := append(msgs(rec, 0, 1, "a"), msgs(rec, 1, 2, "b")...)
		if n, err := s.Publish(ctx, ms); err != nil || n != len(ms) {
			t.Fatalf("Publish took %d of %d: %v", n, len(ms), err)
		}
		synctest.Wait()
		sig.Begin()()
		close(gate)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(emitted)
		mu.Unlock()
		if !slices.Equal(got, []message.Trigger{message.TriggerSize}) {
			t.Fatalf("batches emitted with triggers %v after the release had ended, want only the full one before the timeout", got)
		}
		time.Sleep(never)
		synctest.Wait()
		mu.Lock()
		got = slices.Clone(emitted)
		mu.Unlock()
		if !slices.Equal(got, []message.Trigger{message.TriggerSize, message.TriggerTimeout}) {
			t.Errorf("batches emitted with triggers %v, want the full one, then the open one at its timeout", got)
		}
		s.CloseInput()
		<-done
		assertOnce(t, rec, span(0, 3))
	})
}
