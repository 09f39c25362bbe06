package producer_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// tryRecorder is a recorder that can also take messages without waiting,
// as the pipeline's processors do: each TryPublish takes a random prefix,
// so deliveries go partly straight to it and partly through the stage
// buffer.
type tryRecorder struct {
	*recorder
	direct atomic.Int64 // messages taken by TryPublish
}

func (r *tryRecorder) TryPublish(msgs []*message.Message[item]) (int, error) {
	k := rand.IntN(len(msgs) + 1)
	if k == 0 {
		return 0, nil
	}
	if r.before != nil {
		if err := r.before(context.Background(), msgs[:k]); err != nil {
			return 0, nil
		}
	}
	r.mu.Lock()
	for _, m := range msgs[:k] {
		r.byFeed[m.Data.Feed] = append(r.byFeed[m.Data.Feed], m.Data.Seq)
	}
	r.total += k
	r.calls = append(r.calls, call{at: time.Now(), size: k})
	r.mu.Unlock()
	r.direct.Add(int64(k))
	return k, nil
}

// Guarantee: with an Output that takes messages without waiting, deliveries
// go straight to it as far as it has room and the rest through the stage
// buffer, and the window still holds: every message is published once, in
// delivery order per feed, permits are charged when a message leaves, and
// refills are exactly Refill.
func TestDirectHandOffKeepsOrderAndWindow(t *testing.T) {
	for _, flow := range flows {
		t.Run(flowName(flow), func(t *testing.T) {
			rec := &tryRecorder{recorder: newRecorder()}
			rec.jitter = true
			src := &brokerSource{feedsPerStage: 3, perFeed: 400}
			src.watchWindows(rec.recorder)
			h := start(t, "p", producer.Options[item]{Source: src, Flow: flow, Concurrency: 2}, rec, nil)
			waitDone(t, h)
			verifyFlow(t, src, rec.recorder, flow.WithDefaults(), 6)
			if d := rec.direct.Load(); d == 0 || d == int64(rec.published()) {
				t.Fatalf("%d of %d messages went straight to the Output: the test must exercise both paths", d, rec.published())
			}
		})
	}
}

// lockingSource delivers while holding its own mutex, which its grant
// callback takes too: a callback run inside Deliver would deadlock.
type lockingSource struct {
	producer.Basic
	n       int
	mu      sync.Mutex
	permits int
	wake    chan struct{}
}

func (s *lockingSource) grant(n int) {
	s.mu.Lock()
	s.permits += n
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *lockingSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	feed := st.NewFeed("locked", s.grant)
	for sent := 0; sent < s.n; {
		s.mu.Lock()
		k := min(s.permits, s.n-sent)
		s.permits -= k
		msgs := make([]*message.Message[item], k)
		for i := range msgs {
			msgs[i] = message.New(item{Feed: "locked", Seq: sent + i}, nil, uint64(sent+i))
		}
		if k > 0 {
			feed.Deliver(msgs...) // with s.mu held
		}
		s.mu.Unlock()
		sent += k
		if k == 0 {
			select {
			case <-s.wake:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}

// Guarantee: a refill earned by a direct hand-off is granted by the stage's
// own goroutine, never inside the source's Deliver call, so a source may
// hold the lock its grant callback takes while it delivers.
func TestDirectHandOffGrantsOutsideDeliver(t *testing.T) {
	rec := &tryRecorder{recorder: newRecorder()}
	src := &lockingSource{n: 2000, wake: make(chan struct{}, 1)}
	h := start(t, "p", producer.Options[item]{Source: src, Flow: producer.Flow{Initial: 10, Threshold: 3, Refill: 7}}, rec, nil)
	waitDone(t, h)
	if got := rec.published(); got != src.n {
		t.Fatalf("%d messages published, want %d", got, src.n)
	}
	if rec.direct.Load() == 0 {
		t.Fatal("no message went straight to the Output")
	}
}
