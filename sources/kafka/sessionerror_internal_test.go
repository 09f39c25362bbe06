package kafka

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/IBM/sarama"
)

// endingGroup is a sarama.ConsumerGroup whose first session ends at once
// after queueing claimErr on its error channel, as sarama's does when a
// claim cannot open (the claim's error is queued before Consume returns);
// later sessions last until their context ends.
type endingGroup struct {
	claimErr error
	errs     chan error
	sessions atomic.Int32
	close    sync.Once
}

func (g *endingGroup) Consume(ctx context.Context, _ []string, _ sarama.ConsumerGroupHandler) error {
	if g.sessions.Add(1) == 1 {
		g.errs <- g.claimErr
		return nil
	}
	<-ctx.Done()
	return nil
}

func (g *endingGroup) Errors() <-chan error { return g.errs }

func (g *endingGroup) Close() error {
	g.close.Do(func() { close(g.errs) })
	return nil
}

func (*endingGroup) Pause(map[string][]int32)  {}
func (*endingGroup) Resume(map[string][]int32) {}
func (*endingGroup) PauseAll()                 {}
func (*endingGroup) ResumeAll()                {}

// heldErrors is a slog.Handler whose ERROR records wait for release: the
// member's error reader is as slow as a busy machine can make it.
type heldErrors struct{ release chan struct{} }

func (h heldErrors) Enabled(context.Context, slog.Level) bool { return true }
func (h heldErrors) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		<-h.release
	}
	return nil
}
func (h heldErrors) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h heldErrors) WithGroup(string) slog.Handler      { return h }

// Guarantee: an error that a claim reports as its session ends, and that
// fails the member (here a fetch refused for good), fails it before the
// member joins the group again, however long the member takes to read its
// errors: the member never starts a session its own failure should have
// prevented.
func TestMemberFailsBeforeJoiningAgainOnTheErrorThatEndedItsSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := &sarama.ConsumerError{Topic: "events", Partition: 0, Err: sarama.ErrTopicAuthorizationFailed}
		g := &endingGroup{claimErr: refusal, errs: make(chan error, 8)}
		held := heldErrors{release: make(chan struct{})}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		m := &member{
			src:        &Source{},
			opts:       &Options{Topics: []string{"events"}},
			log:        slog.New(held),
			group:      g,
			ctx:        ctx,
			cancel:     cancel,
			consumeCtx: ctx,
			drainCh:    make(chan struct{}),
			failed:     make(chan error, 1),
			down:       make(chan struct{}),
			loopDone:   make(chan struct{}),
			errsSeen:   make(chan chan struct{}),
		}
		var release sync.Once
		releaseErrors := func() { release.Do(func() { close(held.release) }) }
		m.wg.Go(m.logErrors)
		go m.loop()
		t.Cleanup(func() {
			releaseErrors()
			cancel()
			<-m.loopDone
			_ = g.Close()
			m.wg.Wait()
		})

		synctest.Wait() // the loop and the error reader wait for the ERROR line
		if n := g.sessions.Load(); n != 1 {
			t.Fatalf("the member started %d sessions while its refused fetch was being handled, want 1", n)
		}
		releaseErrors()
		<-m.loopDone
		if n := g.sessions.Load(); n != 1 {
			t.Fatalf("the member started %d sessions, want 1", n)
		}
		select {
		case err := <-m.Failed():
			if !errors.Is(err, ErrDenied) || !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
				t.Fatalf("Failed = %v, want an error wrapping %v and %v", err, ErrDenied, sarama.ErrTopicAuthorizationFailed)
			}
		default:
			t.Fatal("the loop ended without the member failing")
		}
	})
}
