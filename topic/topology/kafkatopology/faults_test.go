package kafkatopology

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// patience bounds the fault tests' waits for what must happen.
const patience = 30 * time.Second

// faultBackend starts a backend on c whose main topics have 4
// partitions and whose producer retries after 10ms, closed when the test
// ends.
func faultBackend(t *testing.T, c *kfake.Cluster) *Backend[msg] {
	t.Helper()
	cfg := testbroker.SaramaConfig()
	cfg.Producer.Retry.Backoff = 10 * time.Millisecond
	b, err := New(Options[msg]{
		Brokers: c.ListenAddrs(), Config: cfg, Codec: topic.JSONCodec[msg]{}, Partitions: 4,
		AdminTimeout: patience, RevokeTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "the backend", b.Close) })
	return b
}

// logLetters reads the letters the log of kname holds, by value.
func logLetters(t *testing.T, c *kfake.Cluster, kname string) ([]testbroker.Record, map[int]bool) {
	t.Helper()
	return testbroker.LogValues(t, c.ListenAddrs(), kname, func(b []byte) (int, error) {
		var m msg
		err := json.Unmarshal(b, &m)
		return m.N, err
	})
}

// publisher publishes value v to q as letter v, keyed by v.
func publisher(t *testing.T, q topology.Queues[msg]) func(v int) error {
	return func(v int) error {
		return q.Publish(t.Context(), topology.Letter[msg]{Value: msg{Key: strconv.Itoa(v), N: v}})
	}
}

// receiveLetter waits for one letter of r.
func receiveLetter(t *testing.T, r topology.Reader[msg]) topology.Letter[msg] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	buf := make([]topology.Letter[msg], 1)
	if _, err := r.Receive(ctx, buf); err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return buf[0]
}

// handleAll receives from r until ctx ends, passing each letter to
// handle and settling it; a letter handle returns true for is counted in
// led as handled when its settle succeeds. A settle refused as revoked
// once r is closing (its backend crashing under it) is not a failure:
// the group delivers the letter again.
func handleAll(ctx context.Context, t *testing.T, r topology.Reader[msg], led *testbroker.Ledger, handle func(*topology.Letter[msg]) bool) {
	buf := make([]topology.Letter[msg], 16)
	for {
		n, err := r.Receive(ctx, buf)
		if err != nil {
			return
		}
		for i := range buf[:n] {
			l := &buf[i]
			counted := handle == nil || handle(l)
			switch err := r.Settle(ctx, l); {
			case err == nil:
				if counted {
					led.Handle(l.Value.N)
				}
			case errors.Is(err, ErrRevoked) && readerClosing(r):
			case !errors.Is(err, ErrNotCommitted) && ctx.Err() == nil:
				t.Errorf("Settle(%d): %v", l.Value.N, err)
			}
		}
	}
}

// readerClosing reports whether r, a group reader, has begun to close.
func readerClosing(r topology.Reader[msg]) bool {
	select {
	case <-r.(*groupReader[msg]).stop:
		return true
	default:
		return false
	}
}

// unhandled describes what led lacks, for a wait's failure.
func unhandled(led *testbroker.Ledger) func() string {
	return func() string { return fmt.Sprintf("never handled: %v", led.Unhandled()) }
}

// Guarantee: while the broker fails produce requests (refuses them with
// a retriable error, or drops their connection), every Publish that
// returned nil is in the main topic, and every letter missing from it
// was reported failed: one produce in three fails, then every one until
// a publish gives up.
func TestAPublishThatReturnedNilIsStoredWhileProducesFail(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			q := declare(t, faultBackend(t, c), topology.New("lossy-publish"))
			f := testbroker.Inject(c, kmsg.Produce, fault.Code(kmsg.Produce), nil)
			testbroker.PublishThroughFaults(t, f, testbroker.FaultCount(t), publisher(t, q),
				func() map[int]bool { _, vs := logLetters(t, c, "lossy-publish"); return vs })
		})
	}
}

// Guarantee: while the broker fails the main topic's offset commits
// (refuses one in two, or drops its connection), a reader commits only
// offsets whose letter and every earlier one of the partition were
// settled, and after it closes the next reader receives again every
// letter past the committed offsets: nothing is lost, nothing unsettled
// is committed.
func TestCommitFailuresCommitOnlySettledLettersAndLoseNone(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			q := declare(t, faultBackend(t, c), topology.New("lossy-commit"))
			gid := q.(*queues[msg]).groupID()
			r1, err := q.Subscribe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := testbroker.FaultCount(t)
			led := testbroker.NewLedger()
			testbroker.PublishRange(led, 0, n, publisher(t, q), nil)
			if p, _ := led.Counts(); p != n {
				t.Fatalf("%d of %d publishes returned nil", p, n)
			}
			f := testbroker.Inject(c, kmsg.OffsetCommit, fault.Code(kmsg.OffsetCommit), testbroker.CommitsOf(gid))
			f.Every(2)
			// r1 settles every letter, waiting for a commit (accepted or
			// failed) after every twenty; of the last fifth it leaves one
			// in seven unsettled.
			for i := range n {
				l := receiveLetter(t, r1)
				if i < n-n/5 || l.Value.N%7 != 3 {
					if err := r1.Settle(t.Context(), &l); err != nil {
						t.Fatalf("Settle(%d): %v", l.Value.N, err)
					}
					led.Handle(l.Value.N)
				}
				if i%20 == 19 && i < n-n/5 {
					before := f.Failed() + f.Passed()
					wait.Within(t, patience, "a commit", func() bool { return f.Failed()+f.Passed() > before })
				}
			}
			topologytest.MustClose(t, "the first reader", r1.Close)
			if f.Failed() == 0 || f.Passed() == 0 {
				t.Fatalf("%d commits failed and %d passed: want both", f.Failed(), f.Passed())
			}
			recs, _ := logLetters(t, c, "lossy-commit")
			committed := testbroker.Committed(t, testbroker.Admin(t, c.ListenAddrs()), "lossy-commit", gid)
			again := map[int]bool{} // must be delivered again
			for _, rec := range recs {
				var m msg
				_ = json.Unmarshal(rec.Value, &m)
				if rec.Offset >= committed[rec.Partition] {
					again[m.N] = true
				} else if !led.Handled(m.N) {
					t.Errorf("letter %d (partition %d, offset %d) is committed (at %d) but was never settled",
						m.N, rec.Partition, rec.Offset, committed[rec.Partition])
				}
			}
			var mu sync.Mutex
			delivered := map[int]bool{}
			r2 := subscribe(t, q)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				handleAll(ctx, t, r2, led, func(l *topology.Letter[msg]) bool {
					mu.Lock()
					delivered[l.Value.N] = true
					mu.Unlock()
					return true
				})
			})
			wait.Within(t, testbroker.FaultPatience(patience, n), "every letter handled and every uncommitted one delivered again", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for v := range again {
					if !delivered[v] {
						return false
					}
				}
				return len(led.Unhandled()) == 0
			}, unhandled(led))
			f.Every(0)
			testbroker.CommittedToTheEnd(t, c, patience, "lossy-commit", gid, recs)
			cancel()
			wg.Wait()
		})
	}
}

// takeHolding receives k letters of r, settles all but the last hold of
// them (counted in led) and returns those.
func takeHolding(t *testing.T, r topology.Reader[msg], led *testbroker.Ledger, k, hold int) []topology.Letter[msg] {
	t.Helper()
	var held []topology.Letter[msg]
	for i := range k {
		l := receiveLetter(t, r)
		if i >= k-hold {
			held = append(held, l)
			continue
		}
		if err := r.Settle(t.Context(), &l); err != nil {
			t.Fatalf("Settle(%d): %v", l.Value.N, err)
		}
		led.Handle(l.Value.N)
	}
	return held
}

// Guarantee: a reader that closes while it holds unsettled letters, and
// a reader that joins while another holds unsettled letters past the
// revoke timeout, lose nothing: the letters settled too late are not
// counted as handled, and every letter is eventually settled by some
// reader, and committed.
func TestReadersLeavingAndJoiningDuringRebalancesLoseNoLetter(t *testing.T) {
	c := testbroker.Kafka(t)
	q := declare(t, faultBackend(t, c), topology.New("lossy-rebalance"))
	gid := q.(*queues[msg]).groupID()
	a, b := subscribe(t, q), subscribe(t, q)
	n := testbroker.FaultCount(t)
	led := testbroker.NewLedger()
	testbroker.PublishRange(led, 0, n, publisher(t, q), nil)

	// Each holds two partitions, some n/2 letters.
	heldA := takeHolding(t, a, led, n/5, 5)
	heldB := takeHolding(t, b, led, n/5, 5)
	topologytest.MustClose(t, "a reader holding letters", a.Close)
	for i := range heldA {
		// Too late: not counted, and Settle says so.
		if err := a.Settle(t.Context(), &heldA[i]); !errors.Is(err, ErrRevoked) {
			t.Fatalf("Settle after the reader closed = %v, want %v", err, ErrRevoked)
		}
	}
	// A third reader joins while b holds five letters past the revoke
	// timeout; b settles them once it has let their partition go: not
	// counted, and Settle says so.
	c3 := subscribe(t, q)
	gb := b.(*groupReader[msg])
	wait.Within(t, patience, "b to let go of the partition of the letters it holds", func() bool {
		gb.mu.Lock()
		defer gb.mu.Unlock()
		for _, l := range heldB {
			if !l.Receipt.(*receipt).c.Revoked() {
				return false
			}
		}
		return true
	})
	for i := range heldB {
		if err := b.Settle(t.Context(), &heldB[i]); !errors.Is(err, ErrRevoked) {
			t.Fatalf("Settle after the letter's partition was revoked = %v, want %v", err, ErrRevoked)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []topology.Reader[msg]{b, c3} {
		wg.Go(func() { handleAll(ctx, t, r, led, nil) })
	}
	wait.Within(t, testbroker.FaultPatience(patience, n), "every letter settled", func() bool { return len(led.Unhandled()) == 0 }, unhandled(led))
	recs, _ := logLetters(t, c, "lossy-rebalance")
	testbroker.CommittedToTheEnd(t, c, patience, "lossy-rebalance", gid, recs)
	cancel()
	wg.Wait()
}

// Guarantee: a hold and release cycle loses no letter when the hold
// topic's releaser has its commits refused (its first one and one in two
// after it, or their connection dropped) and its releases to the main
// topic fail (the first produce and one in three after it), and its
// backend crashes midway: every held letter comes back to its group, from
// the first backend's releaser or from the next one's. The first of each
// fails so that a releaser producing its due letters in few produces, and
// so committing in few requests, still meets failures; the failed commit
// is sent again and passes.
func TestHoldAndReleaseLoseNoLetterWhenTheReleasersCommitsFail(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			tb := topology.New("lossy-hold").Hold(time.Second)
			b1 := faultBackend(t, c)
			q1 := declare(t, b1, tb)
			hold := q1.(*queues[msg]).holds[0].name
			commits := testbroker.Inject(c, kmsg.OffsetCommit, fault.Code(kmsg.OffsetCommit), testbroker.CommitsOf(hold+":release"))
			releases := testbroker.Inject(c, kmsg.Produce, fault.Code(kmsg.Produce), testbroker.ProducesTo("lossy-hold"))
			r1, err := q1.Subscribe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n := testbroker.FaultCount(t)
			led := testbroker.NewLedger()
			testbroker.PublishRange(led, 0, n, publisher(t, q1), nil)
			commits.FirstThenEvery(2)
			releases.FirstThenEvery(3)
			var mu sync.Mutex
			back := map[int]int{} // letters come back from their hold
			// A first delivery is held (its retry count set to 1); a letter
			// back from its hold is handled.
			handle := func(q topology.Queues[msg]) func(*topology.Letter[msg]) bool {
				return func(l *topology.Letter[msg]) bool {
					if l.Retries > 0 {
						mu.Lock()
						back[l.Value.N]++
						mu.Unlock()
						return true
					}
					l.Retries = 1
					_ = q.Hold(t.Context(), 0, *l) // a failed hold is delivered again
					return false
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { handleAll(ctx, t, r1, led, handle(q1)) })
			grown := testbroker.FaultPatience(patience, n)
			wait.Within(t, grown, "a third of the held letters back", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(back) >= n/3
			})
			topologytest.MustClose(t, "the first backend, crashing", b1.crash)
			cancel()
			wg.Wait()

			q2 := declare(t, faultBackend(t, c), tb)
			r2 := subscribe(t, q2)
			ctx, cancel = context.WithCancel(context.Background())
			wg.Go(func() { handleAll(ctx, t, r2, led, handle(q2)) })
			wait.Within(t, grown, "every held letter back", func() bool { return len(led.Unhandled()) == 0 }, unhandled(led))
			wait.Within(t, grown, "releaser commits failed and passed, releases failed", func() bool {
				return commits.Failed() > 0 && commits.Passed() > 0 && releases.Failed() > 0
			}, func() string {
				return fmt.Sprintf("%d releaser commits failed, %d passed, %d releases failed",
					commits.Failed(), commits.Passed(), releases.Failed())
			})
			commits.Every(0)
			releases.Every(0)
			// The handler holds letters: stopped, it adds none to the hold
			// topic after its log end is read.
			cancel()
			wg.Wait()
			recs, _ := logLetters(t, c, hold)
			testbroker.CommittedToTheEnd(t, c, grown, hold, hold+":release", recs)
			twice := 0
			for _, k := range back {
				if k > 1 {
					twice++
				}
			}
			t.Logf("%d releaser commits failed, %d passed, %d releases failed; %d letters came back more than once",
				commits.Failed(), commits.Passed(), releases.Failed(), twice)
		})
	}
}

// Guarantee: a letter whose dead-lettering fails (every produce to the
// DLQ refused, or its connection dropped, until one gives up) is not
// committed: the group delivers it again, and once dead-lettered it is
// in the DLQ. Every letter ends in the DLQ.
func TestADeadLetterThatCannotBeProducedIsDeliveredAgain(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			q := declare(t, faultBackend(t, c), topology.New("lossy-dlq").DLQ())
			dlq := q.(*queues[msg]).dlq
			f := testbroker.Inject(c, kmsg.Produce, fault.Code(kmsg.Produce), testbroker.ProducesTo(dlq))
			n := testbroker.FaultCount(t)
			led := testbroker.NewLedger()
			testbroker.PublishRange(led, 0, n, publisher(t, q), nil)
			r1, err := q.Subscribe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			f.Every(3)
			failed := map[int]bool{}
			for i := range n {
				l := receiveLetter(t, r1)
				if i == n/3 {
					f.Every(1) // an outage, until a dead-lettering gives up
				}
				err := q.DeadLetter(t.Context(), l)
				if err != nil {
					failed[l.Value.N] = true
					f.Every(3)
				}
				switch serr := r1.Settle(t.Context(), &l); {
				case err != nil && !errors.Is(serr, ErrNotCommitted):
					t.Errorf("Settle(%d) after its dead-lettering failed = %v, want ErrNotCommitted", l.Value.N, serr)
				case err == nil && serr != nil:
					t.Errorf("Settle(%d): %v", l.Value.N, serr)
				}
			}
			topologytest.MustClose(t, "the first reader", r1.Close)
			f.Every(0)
			if len(failed) == 0 {
				t.Fatalf("no dead-lettering failed (%d produce requests failed)", f.Failed())
			}
			// The next reader dead-letters what is delivered again.
			var mu sync.Mutex
			again := map[int]bool{}
			r2 := subscribe(t, q)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				handleAll(ctx, t, r2, testbroker.NewLedger(), func(l *topology.Letter[msg]) bool {
					mu.Lock()
					again[l.Value.N] = true
					mu.Unlock()
					if err := q.DeadLetter(ctx, *l); err != nil && ctx.Err() == nil {
						t.Errorf("DeadLetter(%d) with the DLQ up: %v", l.Value.N, err)
					}
					return true
				})
			})
			wait.Within(t, testbroker.FaultPatience(patience, n), "every letter whose dead-lettering failed delivered again", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for v := range failed {
					if !again[v] {
						return false
					}
				}
				return true
			})
			cancel()
			wg.Wait()
			// Every letter is in the DLQ.
			dead := subscribeDead(t, q)
			buf := make([]topology.Letter[msg], 64)
			wait.Within(t, testbroker.FaultPatience(patience, n), "every letter in the DLQ", func() bool {
				k, err := dead.TryReceive(t.Context(), buf)
				if err != nil {
					t.Fatalf("TryReceive on the DLQ: %v", err)
				}
				for i := range buf[:k] {
					led.Handle(buf[i].Value.N)
				}
				return len(led.Unhandled()) == 0
			}, unhandled(led))
			t.Logf("%d dead-letterings failed, %d letters delivered again", len(failed), len(again))
		})
	}
}

// subscribeDead is a reader of q's DLQ, closed when the test ends.
func subscribeDead(t *testing.T, q topology.Queues[msg]) topology.Reader[msg] {
	t.Helper()
	r, err := q.SubscribeDead(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { topologytest.MustClose(t, "a dead reader", r.Close) })
	return r
}
