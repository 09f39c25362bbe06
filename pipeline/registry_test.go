package pipeline_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
)

// ours returns the entries of Running that are among ps, in Running's order.
func ours(ps ...pipeline.Handle) []pipeline.RunningPipeline {
	var out []pipeline.RunningPipeline
	for _, r := range pipeline.Running() {
		for _, p := range ps {
			if r.Pipeline == p {
				out = append(out, r)
			}
		}
	}
	return out
}

// Guarantee: Running lists the pipelines that started and have not
// stopped, in start order, with their names; a pipeline leaves it by the
// time Stop returns, and one never started is not in it.
func TestRunningRegistry(t *testing.T) {
	newP := func(name string) *pipeline.Pipeline[uint64, uint64] {
		return mustNew(t, pipeline.Options[uint64, uint64]{Name: name, Processors: processor.Options[uint64, uint64]{Handle: identity}})
	}
	a, b, idle := newP("reg-a"), newP("reg-b"), newP("reg-idle")
	if got := ours(a, b, idle); len(got) != 0 {
		t.Fatalf("Running before Start: %v", got)
	}
	startPipeline(t, a)
	startPipeline(t, b)
	got := ours(a, b, idle)
	if len(got) != 2 || got[0].Pipeline != a || got[0].Name != "reg-a" || got[1].Pipeline != b || got[1].Name != "reg-b" {
		t.Fatalf("Running = %+v, want reg-a then reg-b", got)
	}
	if tp := got[1].Pipeline.Topology(); tp.Name != "reg-b" {
		t.Errorf("the handle's Topology names %q", tp.Name)
	}
	if err := a.Stop(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := ours(a, b, idle); len(got) != 1 || got[0].Pipeline != b {
		t.Fatalf("Running after a stopped = %+v, want only reg-b", got)
	}
}

// Guarantee: the registry is safe while pipelines start and stop from
// many goroutines and others read it (run with -race), and it ends with
// none of them.
func TestRunningRegistryConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	ps := make([]pipeline.Handle, 8)
	for i := range ps {
		p := mustNew(t, pipeline.Options[uint64, uint64]{Name: "reg-many", Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity}})
		ps[i] = p
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := p.Start(t.Context()); err != nil {
				t.Error(err)
			}
			_ = pipeline.Running()
			if err := p.Stop(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			for _, r := range pipeline.Running() {
				_ = r.Pipeline.RateLimit()
			}
		}()
	}
	wg.Wait()
	if got := ours(ps...); len(got) != 0 {
		t.Fatalf("%d stopped pipelines still listed", len(got))
	}
}

// Guarantee: Running lists many pipelines in the order they started,
// whatever order the registry holds them in.
func TestRunningListsPipelinesInStartOrder(t *testing.T) {
	ps := make([]pipeline.Handle, 10)
	for i := range ps {
		p := mustNew(t, pipeline.Options[uint64, uint64]{Name: "reg-order", Processors: processor.Options[uint64, uint64]{Concurrency: 1, Handle: identity}})
		startPipeline(t, p)
		ps[i] = p
	}
	got := ours(ps...)
	if len(got) != len(ps) {
		t.Fatalf("Running lists %d of the %d started pipelines", len(got), len(ps))
	}
	for i, r := range got {
		if r.Pipeline != ps[i] {
			t.Fatalf("Running lists pipeline %d at %d, want start order", slices.Index(ps, r.Pipeline), i)
		}
	}
}
