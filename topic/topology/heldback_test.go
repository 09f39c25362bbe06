package topology_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// overdrawWarning is what a sequenced source logs when it takes letters
// past MaxHeldBack.
const overdrawWarning = "held-back letters at MaxHeldBack all wait on messages out in hold queues: taking letters past it until one comes back"

// heldBackRun is a sequenced topology "keyed" on the in-memory backend,
// with one hold queue of a second, consumed by a one-processor pipeline
// whose source holds back at most maxHeldBack messages; every message has
// key A.
type heldBackRun struct {
	src  *topology.Source[int]
	p    *pipeline.Pipeline[int, int]
	pub  *topology.Publisher[int]
	logs *logtest.Records

	mu      sync.Mutex
	handled []int
}

func startHeldBackRun(t *testing.T, maxHeldBack int, handle func(v, attempt int) error) *heldBackRun {
	t.Helper()
	_, q := declareMemory(t, build(t, topology.New("keyed").Sequenced(topology.Skip).Hold(time.Second).DLQ()))
	r := &heldBackRun{logs: &logtest.Records{}}
	var err error
	r.src, err = topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: maxHeldBack, Logger: slog.New(r.logs)})
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[int]int{}
	r.p, err = pipeline.New(pipeline.Options[int, int]{
		Name:     "keyed",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[int]{Source: r.src},
		Processors: processor.Options[int, int]{Concurrency: 1, Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			r.mu.Lock()
			r.handled = append(r.handled, m.Data)
			attempts[m.Data]++
			n := attempts[m.Data]
			r.mu.Unlock()
			return m.Data, handle(m.Data, n)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.p.Stop(context.Background()) })
	r.pub, _ = topology.NewPublisher(q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
	return r
}

func (r *heldBackRun) publish(t *testing.T, from, to int) {
	t.Helper()
	for v := from; v <= to; v++ {
		if err := r.pub.Publish(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *heldBackRun) handledSoFar() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.handled)
}

func seq(from, to int) []int {
	var out []int
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

// Guarantee: a sequenced source holds back at most MaxHeldBack messages:
// while the first message of a key is in flight, it takes the key's later
// messages only up to the bound and leaves the rest in the backend
// (backpressure), then, once the first is acked, delivers every message
// of the key in order, none dropped.
func TestSequencedSourceHoldsBackAtMostMaxHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound, total = 4, 40
		release := make(chan struct{})
		r := startHeldBackRun(t, bound, func(v, _ int) error {
			if v == 1 {
				<-release
			}
			return nil
		})
		r.publish(t, 1, total)
		synctest.Wait()
		st := r.src.Stats()
		if st.HeldBack > bound || st.Received > bound+1 {
			t.Errorf("with message 1 in flight: %d held back and %d taken, want at most %d and %d", st.HeldBack, st.Received, bound, bound+1)
		}
		close(release)
		synctest.Wait()
		if got := r.handledSoFar(); !slices.Equal(got, seq(1, total)) {
			t.Errorf("handled %v, want 1 to %d in order", got, total)
		}
		if n := r.logs.Count(slog.LevelWarn, overdrawWarning); n != 0 {
			t.Errorf("%d warnings %q, want none: nothing waited on a hold queue", n, overdrawWarning)
		}
	})
}

// Guarantee: a sequenced source at MaxHeldBack whose held-back messages
// all wait on a message out in a hold queue does not wait for ever (that
// message comes back through the queues, behind the letters not taken):
// it takes letters past the bound, warning once, until the message comes
// back, and every message of the key is then handled in order.
func TestSequencedSourceAtMaxHeldBackStillTakesTheRetryBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound, total = 2, 12
		r := startHeldBackRun(t, bound, func(v, attempt int) error {
			if v == 1 && attempt == 1 {
				return topology.Retry(errors.New("flaky"))
			}
			return nil
		})
		r.publish(t, 1, total)
		time.Sleep(3 * time.Second) // fake time: the hold of message 1 is over
		synctest.Wait()
		if got, want := r.handledSoFar(), append([]int{1}, seq(1, total)...); !slices.Equal(got, want) {
			t.Errorf("handled %v, want %v; stats %+v", got, want, r.src.Stats())
		}
		if n := r.logs.Count(slog.LevelWarn, overdrawWarning); n != 1 {
			t.Errorf("%d warnings %q, want 1", n, overdrawWarning)
		}
		if st := r.src.Stats(); st.HeldBack != 0 {
			t.Errorf("%d still held back, want none", st.HeldBack)
		}
	})
}

// Guarantee: MaxHeldBack is validated: 0 means DefaultMaxHeldBack, and a
// negative value or one past MaxHeldBackLimit fails NewSource with an
// error naming the field.
func TestMaxHeldBackIsValidated(t *testing.T) {
	_, q := declareMemory(t, build(t, topology.New("v").Sequenced(topology.Skip).DLQ()))
	if o := (topology.SourceOptions[int]{}).WithDefaults(); o.MaxHeldBack != topology.DefaultMaxHeldBack {
		t.Errorf("default MaxHeldBack %d, want %d", o.MaxHeldBack, topology.DefaultMaxHeldBack)
	}
	for _, n := range []int{-1, topology.MaxHeldBackLimit + 1} {
		_, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: n})
		if err == nil || !strings.Contains(err.Error(), "topology.maxHeldBack") {
			t.Errorf("MaxHeldBack %d: %v, want an error naming topology.maxHeldBack", n, err)
		}
	}
	if _, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, MaxHeldBack: topology.MaxHeldBackLimit}); err != nil {
		t.Errorf("MaxHeldBack %d: %v", topology.MaxHeldBackLimit, err)
	}
}
