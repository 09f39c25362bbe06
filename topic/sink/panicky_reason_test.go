package sink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// panickyReason is a nack reason whose Is method panics, as errors.Is
// calls it when the sink matches a downstream reason against sentinels to
// choose the upstream disposition.
type panickyReason struct{}

func (panickyReason) Error() string { return "panicky reason" }
func (panickyReason) Is(error) bool { panic("reason's Is") }

// panickyUnwrapReason is a nack reason whose Unwrap method panics.
type panickyUnwrapReason struct{}

func (panickyUnwrapReason) Error() string { return "panicky unwrap reason" }
func (panickyUnwrapReason) Unwrap() error { panic("reason's Unwrap") }

// publishAndNackFirst publishes through s message 1, or with batch
// messages 1 and 2 in one PublishBatch, each acknowledged upstream by up,
// and settles them on sub: the first received is nacked with reason, the
// other acked. It returns how many messages it published.
func publishAndNackFirst(t *testing.T, s *sink.Sink[int], sub *topic.Subscription[int], up acker.Acknowledger, batch bool, reason error) int {
	t.Helper()
	ms := []*message.Message[int]{message.New(1, up, 1)}
	if batch {
		ms = append(ms, message.New(2, up, 2))
		if err := s.PublishBatch(t.Context(), ms); err != nil {
			t.Fatal(err)
		}
	} else if err := s.Publish(t.Context(), ms[0]); err != nil {
		t.Fatal(err)
	}
	for i := range ms {
		it, err := sub.Receive(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			err = sub.Nack(it.ID, reason)
		} else {
			err = sub.Ack(it.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return len(ms)
}

// Guarantee: a downstream nack whose reason panics when matched (its Is
// or Unwrap method panics) still reaches the upstream acknowledger, once,
// as a failed outcome with the default disposition whose error wraps
// ErrNacked and a *message.PanicError, not the reason; the sink logs it
// once on its own logger (nothing on slog.Default()), and its in-flight
// count drops, so Wait and Drain return at once, for a single publish and
// for a batch.
func TestPanickingNackReasonIsReportedUpstreamOnceAndSettles(t *testing.T) {
	for _, reason := range []error{panickyReason{}, panickyUnwrapReason{}} {
		for _, batch := range []bool{false, true} {
			name := fmt.Sprintf("%T/batch=%v", reason, batch)
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					def := logtest.CaptureDefault(t)
					var own logtest.Lines

					_, sub, s := rigWith(t, autoOpts(0), topic.Balanced("g"), sink.Options[int]{
						Binding: topic.Binding[int]{OnFull: topic.Block},
						Logger:  slog.New(slog.NewTextHandler(&own, nil)),
					})
					rec := acker.NewRecorder(false)
					publishAndNackFirst(t, s, sub, rec, batch, reason)

					// Within a minute of the bubble's fake time: a wait
					// that holds lets it pass at once and fails.
					ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
					defer cancel()
					if err := s.Wait(ctx); err != nil {
						t.Fatalf("Wait = %v, want nil: the publish settled", err)
					}
					if err := s.Drain(ctx); err != nil {
						t.Fatalf("Drain = %v, want nil: the publish settled", err)
					}
					if st := s.Stats(); st.InFlight != 0 || st.Failed != 1 {
						t.Fatalf("Stats = %+v, want InFlight 0 and Failed 1", st)
					}
					if got := rec.Count(1); got != 1 {
						t.Fatalf("message 1 reported %d times upstream, want once", got)
					}
					f := rec.Failed()
					if len(f) != 1 || f[0].ID != 1 {
						t.Fatalf("failed outcomes %+v, want one of message 1", f)
					}
					var pe *message.PanicError
					var oe *sink.OutcomeError
					if !errors.As(f[0].Err, &oe) || !errors.Is(f[0].Err, sink.ErrNacked) || !errors.As(f[0].Err, &pe) {
						t.Fatalf("outcome error %v, want an *OutcomeError wrapping ErrNacked and a *message.PanicError", f[0].Err)
					}
					if f[0].Disposition != acker.DispositionDefault {
						t.Fatalf("disposition %v, want the default", f[0].Disposition)
					}
					if lines := def.All(); len(lines) != 0 {
						t.Errorf("slog.Default() got %d lines, want none: %q", len(lines), lines)
					}
					lines := own.All()
					if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") ||
						!strings.Contains(lines[0], "nack reason panicked") || !strings.Contains(lines[0], "topic=t") {
						t.Fatalf("the sink's logger got %q, want one error line of the panicking reason on topic t", lines)
					}
				})
			})
		}
	}
}

// panickyErrorReason is a nack reason whose Error method panics, as a
// nil pointer of an error type whose Error reads its fields does.
type panickyErrorReason struct{}

func (panickyErrorReason) Error() string { panic("reason's Error") }

// formattingAcker is an upstream acknowledger that formats every failed
// outcome's error, as one that logs them does, before recording the call.
type formattingAcker struct{ rec *acker.Recorder }

func (a formattingAcker) Ack(ctx context.Context, successful, failed []acker.Outcome) {
	for _, o := range failed {
		_ = o.Err.Error()
	}
	a.rec.Ack(ctx, successful, failed)
}

// Guarantee: a downstream nack whose reason panics when formatted (its
// Error method panics) reaches an upstream acknowledger that formats it,
// once, as a failed outcome with the default disposition whose error
// wraps ErrNacked and a *message.PanicError in place of the reason: the
// acknowledger's call does not panic, so no outcome of it (the batch's
// acked sibling included) is lost, and the sink logs the reason once.
func TestNackReasonWhoseErrorPanicsIsReportedUpstreamOnceWithASafeReason(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var own logtest.Lines
				_, sub, s := rigWith(t, autoOpts(0), topic.Balanced("g"), sink.Options[int]{
					Binding: topic.Binding[int]{OnFull: topic.Block},
					Logger:  slog.New(slog.NewTextHandler(&own, nil)),
				})
				rec := acker.NewRecorder(false)
				up := formattingAcker{rec: rec}
				want := publishAndNackFirst(t, s, sub, up, batch, panickyErrorReason{})
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				if err := s.Wait(ctx); err != nil {
					t.Fatalf("Wait = %v, want nil: the publish settled", err)
				}
				if rec.Total() != want || rec.Count(1) != 1 {
					t.Fatalf("%d outcomes reported upstream (message 1: %d times), want %d, message 1 once; sink log: %q",
						rec.Total(), rec.Count(1), want, own.All())
				}
				f := rec.Failed()
				var pe *message.PanicError
				if len(f) != 1 || f[0].ID != 1 || !errors.Is(f[0].Err, sink.ErrNacked) || !errors.As(f[0].Err, &pe) {
					t.Fatalf("failed outcomes %+v, want message 1's, wrapping ErrNacked and a *message.PanicError", f)
				}
				if f[0].Disposition != acker.DispositionDefault {
					t.Fatalf("disposition %v, want the default", f[0].Disposition)
				}
				if lines := own.All(); len(lines) != 1 || !strings.Contains(lines[0], "nack reason panicked") {
					t.Fatalf("the sink's logger got %q, want one line of the panicking reason", lines)
				}
			})
		})
	}
}
