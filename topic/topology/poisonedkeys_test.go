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

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// Guarantee: Stats.PoisonedKeys of a sequenced FailAll source is the
// number of keys it poisoned, one per key however many of its letters
// were dead-lettered, keys that never failed left out; the source keeps
// it once closed, and a new source (a restarted consumer) starts with
// none.
func TestPoisonedKeysCountsOnePerPoisonedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const keys, poisoned, perKey = 5, 3, 4
		_, q := declareMemory(t, build(t, topology.New("devices").Sequenced(topology.FailAll).DLQ()))
		// Value k*10+i is the i-th message of key k; the first message of
		// each of the first poisoned keys fails.
		src, p := startLoggingPipeline(t, q, slog.New(slog.DiscardHandler),
			func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data/10 < poisoned && m.Data%10 == 0 {
					return 0, topology.Reject(errors.New("reading out of range"))
				}
				return m.Data, nil
			})
		for i := range perKey {
			for k := range keys {
				if err := q.Publish(t.Context(), topology.Letter[int]{Key: "dev-" + strconv.Itoa(k), Value: k*10 + i}); err != nil {
					t.Fatal(err)
				}
			}
		}
		wait.Within(t, time.Minute, "every letter settled", func() bool {
			st := src.Stats()
			return st.Acked+st.DeadLettered == keys*perKey
		})
		st := src.Stats()
		if st.PoisonedKeys != poisoned || st.Poisoned != poisoned*perKey {
			t.Fatalf("%d keys poisoned, %d letters each: PoisonedKeys %d, Poisoned %d, want %d and %d",
				poisoned, perKey, st.PoisonedKeys, st.Poisoned, poisoned, poisoned*perKey)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := src.Stats().PoisonedKeys; got != poisoned {
			t.Errorf("once closed: PoisonedKeys %d, want the %d keys it remembers", got, poisoned)
		}
		next, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close(context.Background())
		if got := next.Stats().PoisonedKeys; got != 0 {
			t.Errorf("a new source: PoisonedKeys %d, want 0", got)
		}
	})
}

// Guarantee: what a sequenced FailAll source keeps for a poisoned key is
// at most MaxDeathErrorBytes, however long the failure that poisoned it,
// and the key's later messages still die with that failure's text,
// bounded as every death error is.
func TestAPoisonedKeyKeepsItsFailureBoundedWhateverItsLength(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, q := declareMemory(t, build(t, topology.New("meters").Sequenced(topology.FailAll).DLQ()))
		long := strings.Repeat("upstream said no ", 1<<16) // about 1 MiB
		src, p := startLoggingPipeline(t, q, slog.New(slog.DiscardHandler),
			func(_ context.Context, m *message.Message[int]) (int, error) {
				if m.Data == 0 {
					return 0, topology.Reject(errors.New(long))
				}
				return m.Data, nil
			})
		for v := range 3 {
			if err := q.Publish(t.Context(), topology.Letter[int]{Key: "meter-7", Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		wait.Within(t, time.Minute, "every letter dead-lettered", func() bool { return src.Stats().DeadLettered == 3 })
		if kept := topology.PoisonedKeyText(src, "meter-7"); kept == "" || len(kept) > topology.MaxDeathErrorBytes {
			t.Errorf("the poisoned key keeps %d bytes of its %d-byte failure, want 1 to %d", len(kept), len(long), topology.MaxDeathErrorBytes)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		dead := deadLetters(t, q)
		if len(dead) != 3 {
			t.Fatalf("the DLQ holds %d letters, want 3", len(dead))
		}
		topologytest.ExpectBoundedDeathError(t, long, dead[0].Death.Error)
		for _, l := range dead[1:] {
			topologytest.ExpectBoundedDeathError(t, `key "meter-7" poisoned by an earlier message: `+long, l.Death.Error)
		}
	})
}
