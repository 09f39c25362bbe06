package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: every dead letter is said in the log, in a bounded number of
// lines: the first at once, with its reason, key and error; a burst of
// them (a store down, every message rejected) costs one WARN line, and
// the source's Close logs one more counting those it held back, so that
// the lines and their held-back counts add up to Stats.DeadLettered.
func TestABurstOfDeadLettersIsLoggedOnceAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const letters = 300
		_, q := declareMemory(t, build(t, topology.New("orders").Sequenced(topology.Skip).DLQ()))
		var lines logtest.Lines
		src, p := startLoggingPipeline(t, q, slog.New(slog.NewTextHandler(&lines, nil)),
			func(context.Context, *message.Message[int]) (int, error) {
				return 0, topology.Reject(errors.New("malformed order"))
			})
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(v int) string { return "order-" + strconv.Itoa(v) }})
		for v := range letters {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "every letter dead-lettered", func() bool { return src.Stats().DeadLettered == letters })
		got := lines.Matching("message dead-lettered")
		if len(got) != 1 || !strings.Contains(got[0], "reason=rejected") || !strings.Contains(got[0], "key=order-0") ||
			!strings.Contains(got[0], `error="malformed order"`) {
			t.Fatalf("%d dead letters logged %q, want one line with the reason, key and error of the first", letters, got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		n, total := lines.Told("message dead-lettered")
		if n != 2 || total != letters {
			t.Fatalf("after Close: %d lines telling of %d dead letters, want 2 telling of %d:\n%s", n, total, letters, strings.Join(lines.Matching("message dead-lettered"), ""))
		}
	})
}

// Guarantee: a source whose Logger is nil logs to slog.Default(): a dead
// letter is said there, never nowhere.
func TestANilLoggerLogsToTheDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lines := logtest.CaptureDefault(t)
		_, q := declareMemory(t, build(t, topology.New("orders").DLQ()))
		src, _ := startLoggingPipeline(t, q, nil, func(context.Context, *message.Message[int]) (int, error) {
			return 0, topology.Reject(errors.New("malformed order"))
		})
		if err := q.Publish(t.Context(), topology.Letter[int]{Key: "order-1", Value: 1}); err != nil {
			t.Fatal(err)
		}
		wait.Within(t, time.Minute, "the letter dead-lettered", func() bool { return src.Stats().DeadLettered == 1 })
		lines.Want(t, 1, "lines on slog.Default() for the dead letter", "level=WARN", "message dead-lettered", "key=order-1")
	})
}

// Guarantee: a key a sequenced FailAll topology poisons is said in the
// log, once, with the key and the error of the message that poisoned it,
// at the moment it is poisoned: its later messages go to the DLQ without
// being handled, which an operator must be told of. The failure's own
// line names the letter's key.
func TestAPoisonedKeyIsLoggedWithItsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("devices").Sequenced(topology.FailAll).DLQ()))
		var lines logtest.Lines
		log := slog.New(slog.NewTextHandler(&lines, nil))
		src, p := startLoggingPipeline(t, q, log,
			func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 2 {
					return 0, topology.Reject(errors.New("reading out of range"))
				}
				return m.Data, nil
			}, func(o *pipeline.Options[int, int]) { o.Logger = log })
		pub, _ := topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "dev-11" }})
		for v := range 6 {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "the key's last four dead-lettered", func() bool { return src.Stats().DeadLettered == 4 })
		if got := lines.Matching("message failed"); len(got) != 1 || !strings.Contains(got[0], "message.source.key=dev-11") {
			t.Fatalf("the failure logged %q, want one line naming the letter's key", got)
		}
		got := lines.Matching("key poisoned")
		if len(got) != 1 || !strings.Contains(got[0], "key=dev-11") || !strings.Contains(got[0], "reading out of range") ||
			!strings.Contains(got[0], "level=WARN") {
			t.Fatalf("poisoned key logged %q, want one WARN line naming the key and the cause", got)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := lines.Matching("key poisoned"); len(got) != 1 {
			t.Fatalf("after Close: %q, want the one line", got)
		}
	})
}
