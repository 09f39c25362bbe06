package observe_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/within"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
)

// nilCtx is the nil context the calls below are given.
var nilCtx context.Context

// Guarantee: Add, Replace, AddKafka, Serve and Close return ErrNilContext
// for a nil context, rather than panicking, before doing anything: no
// Stats is read, nothing is added or served, and Close leaves the
// Observer open, even while a Stats call it started is still running, to
// be closed again with a context.
func TestANilContextIsAnErrorNotAPanic(t *testing.T) {
	obs := observe.New(observe.Options{StatsTimeout: observe.MaxStatsTimeout})
	stuck := &blockingPipeline{entered: make(chan struct{}, 1), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-stuck.entered; cancel() }()
	if err := obs.Add(ctx, stuck); !errors.Is(err, observe.ErrStats) {
		t.Fatalf("Add whose context was cancelled = %v, want ErrStats", err)
	}
	released := false
	defer func() {
		if !released {
			close(stuck.release)
		}
		_ = obs.Close(t.Context())
	}()

	p := newFakePipeline(pipeline.Stats{Name: "p"})
	calls := []within.Call{
		{Name: "Add", F: func() error { return obs.Add(nilCtx, p) }},
		{Name: "Replace", F: func() error { _, err := obs.Replace(nilCtx, p); return err }},
		{Name: "AddKafka", F: func() error { return obs.AddKafka(nilCtx, newFixedKafka(kafka.Stats{})) }},
		{Name: "Serve", F: func() error {
			s, err := obs.Serve(nilCtx, observe.ServerOptions{Addr: "127.0.0.1:0"})
			if s != nil {
				_ = s.Close(t.Context())
			}
			return err
		}},
		{Name: "Close", F: func() error { return obs.Close(nilCtx) }},
	}
	within.Refused(t, 5*time.Second, observe.ErrNilContext, calls...)
	// Close(nil) left the Observer open, and no call above added p: an Add
	// with a context adds it.
	if err := obs.Add(t.Context(), p); err != nil {
		t.Errorf("Add after the nil-context calls = %v, want nil", err)
	}
	close(stuck.release)
	released = true
	if err := obs.Close(t.Context()); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
}

// Guarantee: Close with a nil context stops the Server as a context that
// never ends would, bounded by ShutdownTimeout: it returns nil, the
// address no longer accepts connections, and the serving goroutine has
// returned (the package's leak check).
func TestServerCloseWithANilContextStopsTheServer(t *testing.T) {
	o := observe.New(observe.Options{})
	defer func() { _ = o.Close(t.Context()) }()
	s, err := o.Serve(t.Context(), observe.ServerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var closeErr error
	func() {
		defer func() {
			if r := recover(); r != nil {
				_ = s.Close(t.Context())
				t.Fatalf("Close(nil) panicked: %v", r)
			}
		}()
		closeErr = s.Close(nil) //lint:ignore SA1012 the nil context is the misuse under test
	}()
	if closeErr != nil {
		t.Errorf("Close(nil) = %v, want nil", closeErr)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close(nil)", s.Addr())
	}
}
