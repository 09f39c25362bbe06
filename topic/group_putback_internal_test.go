package topic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// takeAsClosing starts a Receive of leaving, whose Close has begun (the
// subscription is marked closed, as Subscription.Close does first, its
// member not yet), and returns once that Receive has taken the message at
// the head of the group's queue. The Receive then waits for the
// subscription's lock, which the test holds, before it gives the message
// back: release lets it go on, and the Receive's error arrives on done.
func takeAsClosing(t *testing.T, ctx context.Context, leaving *Subscription[int]) (release func(), done <-chan error) {
	t.Helper()
	q := leaving.member.g.q
	queued := q.Len()
	leaving.mu.Lock()
	leaving.closed = true
	errs := make(chan error, 1)
	go func() {
		_, err := leaving.Receive(ctx)
		errs <- err
	}()
	wait.For(t, "the closing member's Receive to take a message", func() bool { return q.Len() == queued-1 })
	return leaving.mu.Unlock, errs
}

// receiveErr waits for the error of the Receive takeAsClosing started.
func receiveErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(wait.Deadline):
		t.Fatal("the closing member's Receive did not return")
		return nil
	}
}

// Guarantee: a member whose Close has begun never makes another member of
// its group receive a message after a later one: when the other member
// took the next message while the closing one held the message before it,
// that message is not put back ahead of the queue (the other member would
// receive it out of publish order) but dropped, its tracked publish nacked
// with ErrDeliveryDropped.
func TestMessageGivenBackNeverReachesAMemberAfterALaterOne(t *testing.T) {
	for _, mode := range []Mode{BalancedOnly, Mixed} {
		t.Run(mode.String(), func(t *testing.T) {
			_, leaving, staying, p := groupOfTwo(t, Options{Mode: mode})
			ctx, cancel := context.WithTimeout(t.Context(), wait.Deadline)
			defer cancel()
			rc1, err := p.Publish(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Publish(ctx, 2); err != nil {
				t.Fatal(err)
			}
			release, done := takeAsClosing(t, ctx, leaving)
			it, err := staying.Receive(ctx)
			release()
			if err != nil || it.Value != 2 {
				t.Fatalf("the member that stays received %+v, %v; want the message 2", it, err)
			}
			if err := receiveErr(t, done); !errors.Is(err, ErrSubscriptionClosed) {
				t.Fatalf("Receive of the closing member = %v, want ErrSubscriptionClosed", err)
			}
			leaving.st.Close() // the rest of Subscription.Close
			if n := staying.member.g.q.Len(); n != 0 {
				t.Fatalf("%d messages queued for the member that stays, which received 2 already; want 0 (1 dropped, not put back behind 2)", n)
			}
			res, ok := rc1.Result()
			if !ok || res.Outcome != Nacked || !errors.Is(res.Reason, ErrDeliveryDropped) {
				t.Fatalf("tracked publish of 1 = %+v, %v; want Nacked with ErrDeliveryDropped", res, ok)
			}
		})
	}
}

// Guarantee: a mixed topic's publish stays all-or-nothing while a member
// whose Close has begun gives a message back to its group: a publish that
// found room in the group delivers there too, even when the message given
// back takes that room while the publish is under way, and the group's
// other member receives both, the one given back first.
func TestMixedPublishReachesAGroupThatAMessageGoesBackTo(t *testing.T) {
	h, leaving, staying, p := groupOfTwo(t, Options{Mode: Mixed, Balanced: BalancedPolicy{Capacity: 1}})
	ctx, cancel := context.WithTimeout(t.Context(), wait.Deadline)
	defer cancel()
	rc1, err := p.Publish(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	release, done := takeAsClosing(t, ctx, leaving)
	// The next publish finds room in the group (the closing member holds
	// 1) and stops in the broadcast ring, whose lock the test holds, before
	// it adds the message to the group.
	r := h.mem.ring
	r.mu.Lock()
	published := make(chan error, 1)
	go func() { published <- h.Publish(ctx, 2) }()
	wait.For(t, "the publish of 2 to wait for the ring", func() bool {
		return goroutineWaits("(*ring[...]).publishLocked(", "")
	})
	// The closing member gives 1 back now: it either has (its Receive
	// returned) or waits for a lock itself, the queue's untouched.
	release()
	wait.For(t, "the closing member to give 1 back or wait to", func() bool {
		return len(done) == 1 || goroutineWaits("(*memMember[...]).putBack(", "internal/queue.")
	})
	r.mu.Unlock()
	select {
	case err := <-published:
		if err != nil {
			t.Fatalf("Publish of 2 = %v", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatal("Publish of 2 did not return")
	}
	if err := receiveErr(t, done); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("Receive of the closing member = %v, want ErrSubscriptionClosed", err)
	}
	leaving.st.Close() // the rest of Subscription.Close
	if n := staying.member.g.q.Len(); n != 2 {
		t.Fatalf("%d messages queued for the group, want 2: 1 given back and 2 published", n)
	}
	for _, want := range []int{1, 2} {
		it, err := staying.Receive(ctx)
		if err != nil || it.Value != want {
			t.Fatalf("the member that stays received %+v, %v; want the message %d", it, err, want)
		}
		if want == 1 {
			if err := staying.Ack(it.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res, ok := rc1.Result(); !ok || res.Outcome != Acked {
		t.Fatalf("tracked publish of 1 = %+v, %v; want Acked by the member that stays", res, ok)
	}
}

// goroutineWaits reports whether a goroutine waits for a mutex in the
// function named by in, directly: its stack holds in, a sync.Mutex.Lock
// and, when without is not empty, nothing matching without.
func goroutineWaits(in, without string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, in) && strings.Contains(g, "sync.(*Mutex).Lock(") &&
			(without == "" || !strings.Contains(g, without)) {
			return true
		}
	}
	return false
}

// Guarantee: while members of a group come and go, each Close racing with
// that member's receives, and another member receives throughout, no
// member receives a message after a later one of the same publisher, no
// message is received twice, and every tracked publish settles: acked by
// the member that received it, or nacked with ErrDeliveryDropped (a member
// left with it, received or taken as it closed), never left pending.
func TestGroupChurnKeepsEachMembersOrderAndSettlesEveryPublish(t *testing.T) {
	const msgs = 2000
	for seed := range uint64(16) {
		rng := rand.New(rand.NewPCG(seed, 1))
		mode := []Mode{BalancedOnly, Mixed}[seed%2]
		opts := Options{Mode: mode, Balanced: BalancedPolicy{Capacity: 1 + rng.IntN(4)}}
		t.Run(fmt.Sprintf("%d/%s/capacity=%d", seed, mode, opts.Balanced.Capacity), func(t *testing.T) {
			h, leaving, staying, _ := groupOfTwo(t, opts)
			p, err := h.Tracked(TrackedOptions{Timeout: time.Hour, MaxInFlight: msgs})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(t.Context(), wait.Deadline)
			defer cancel()
			var (
				outcome  [msgs + 1]atomic.Int32
				dropped  [msgs + 1]atomic.Bool // nacked with ErrDeliveryDropped
				received [msgs + 1]atomic.Int32
				mu       sync.Mutex
				broken   []string
			)
			report := func(format string, args ...any) {
				mu.Lock()
				broken = append(broken, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			// consume receives batches of batch until its subscription
			// closes, acking each message.
			consume := func(s *Subscription[int], batch int) {
				last := 0
				dst := make([]Item[int], batch)
				for {
					n, err := s.ReceiveBatch(ctx, dst)
					if err != nil {
						return
					}
					for _, it := range dst[:n] {
						if it.Value <= last {
							report("a member received %d after %d", it.Value, last)
						}
						last = it.Value
						if received[it.Value].Add(1) > 1 {
							report("%d received twice", it.Value)
						}
						_ = s.Ack(it.ID)
					}
				}
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer staying.Close()
			stayingBatch := 1 + rng.IntN(3)
			wg.Go(func() { consume(staying, stayingBatch) })
			published := make(chan struct{})
			wg.Go(func() {
				defer close(published)
				for v := 1; v <= msgs; v++ {
					err := p.PublishFunc(ctx, v, func(r Result) {
						dropped[v].Store(r.Outcome == Nacked && errors.Is(r.Reason, ErrDeliveryDropped))
						outcome[v].Store(int32(r.Outcome))
					})
					if err != nil {
						report("PublishFunc(%d) = %v", v, err)
						return
					}
				}
			})
			// Members come and go until every message is published, each
			// closed at a random moment of its receiving.
			for member := leaving; ; {
				var cw sync.WaitGroup
				batch := 1 + rng.IntN(3)
				cw.Go(func() { consume(member, batch) })
				for range rng.IntN(64) {
					runtime.Gosched()
				}
				member.Close()
				cw.Wait()
				select {
				case <-published:
				default:
					if member, err = h.Subscribe(t.Context(), Balanced("g"), SubscriberOptions{}); err != nil {
						t.Fatal(err)
					}
					continue
				}
				break
			}
			wait.For(t, "every publish to settle", func() bool {
				for v := 1; v <= msgs; v++ {
					if outcome[v].Load() == 0 {
						return false
					}
				}
				return true
			})
			mu.Lock()
			defer mu.Unlock()
			if len(broken) > 0 {
				t.Fatalf("%d broken guarantees, the first: %s", len(broken), broken[0])
			}
			for v := 1; v <= msgs; v++ {
				o, n := ReceiptOutcome(outcome[v].Load()), received[v].Load()
				if !(o == Acked && n == 1 || o == Nacked && dropped[v].Load()) {
					t.Fatalf("publish of %d settled %v (dropped delivery: %v) after %d receives; want acked once received, or nacked with ErrDeliveryDropped",
						v, o, dropped[v].Load(), n)
				}
			}
		})
	}
}
