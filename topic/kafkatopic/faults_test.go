package kafkatopic_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
)

// faultTopic makes a backend on c whose topics have 4 partitions, each
// value keyed by itself, and its topic name.
func faultTopic(t *testing.T, c *kfake.Cluster, name topic.Name, edit func(*kafkatopic.Options[int])) *topic.Handle[int] {
	t.Helper()
	o := testOptions[int](c, topic.IntCodec{})
	o.Partitions = 4
	o.Key = func(v int) []byte { return []byte(strconv.Itoa(v)) }
	o.Config.Producer.Retry.Backoff = 10 * time.Millisecond
	if edit != nil {
		edit(&o)
	}
	return newTopic(t, newBackend(t, o), name, topic.Options{})
}

// logValues reads the values the log of kname holds.
func logValues(t *testing.T, c *kfake.Cluster, kname string) ([]testbroker.Record, map[int]bool) {
	t.Helper()
	return testbroker.LogValues(t, c.ListenAddrs(), kname, func(b []byte) (int, error) {
		if len(b) != 8 {
			return 0, fmt.Errorf("a value of %d bytes, want 8", len(b))
		}
		return int(binary.BigEndian.Uint64(b)), nil
	})
}

// Guarantee: while the broker fails produce requests (refuses them with
// a retriable error, or drops their connection), every Publish that
// returned nil is in the log, and every record missing from it was
// reported failed: one produce in three fails, then every one until a
// publish gives up.
func TestAPublishThatReturnedNilIsStoredWhileProducesFail(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			h := faultTopic(t, c, "lossy-publish", nil)
			f := testbroker.Inject(c, kmsg.Produce, fault.Code(kmsg.Produce), nil)
			testbroker.PublishThroughFaults(t, f, testbroker.FaultCount(t), func(v int) error { return h.Publish(ctxT(t), v) },
				func() map[int]bool { _, vs := logValues(t, c, "lossy-publish"); return vs })
		})
	}
}

// consume receives from s until ctx ends, acking each message and
// counting in led those whose ack succeeded; seen is told of every value.
func consume(ctx context.Context, t *testing.T, s *topic.Subscription[int], led *testbroker.Ledger, seen func(int)) {
	for {
		it, err := s.Receive(ctx)
		if err != nil {
			return
		}
		if seen != nil {
			seen(it.Value)
		}
		switch err := s.Ack(it.ID); {
		case err == nil:
			led.Handle(it.Value)
		case !errors.Is(err, kafkatopic.ErrRevoked):
			t.Errorf("Ack(%d): %v", it.Value, err)
		}
	}
}

// Guarantee: while the broker fails offset commits (refuses one in two,
// or drops its connection), a member commits only offsets whose message
// and every earlier one of the partition were acked, and after it leaves
// the next member receives again every message past the committed
// offsets, acked or not: nothing is lost, nothing unacked is committed.
func TestCommitFailuresCommitOnlyAckedMessagesAndLoseNone(t *testing.T) {
	for _, fault := range testbroker.FaultKinds {
		t.Run(fault.Name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			h := faultTopic(t, c, "lossy-commit", nil)
			gid := kafkatopic.GroupID("lossy-commit", "g")
			a := subscribe(t, h, topic.Balanced("g"))
			n := testbroker.FaultCount(t)
			led := testbroker.NewLedger()
			testbroker.PublishRange(led, 0, n, func(v int) error { return h.Publish(ctxT(t), v) }, nil)
			if p, _ := led.Counts(); p != n {
				t.Fatalf("%d of %d publishes returned nil", p, n)
			}
			f := testbroker.Inject(c, kmsg.OffsetCommit, fault.Code(kmsg.OffsetCommit), testbroker.CommitsOf(gid))
			f.Every(2)
			// a acks every message, waiting for a commit (accepted or
			// failed) after every twenty; of the last fifth it leaves one
			// in seven unacked.
			unacked := map[int]bool{}
			for i := range n {
				it := recv(t, a)
				if i >= n-n/5 && it.Value%7 == 3 {
					unacked[it.Value] = true
				} else if err := a.Ack(it.ID); err != nil {
					t.Fatalf("Ack(%d): %v", it.Value, err)
				} else {
					led.Handle(it.Value)
				}
				if i%20 == 19 && i < n-n/5 {
					before := f.Failed() + f.Passed()
					wait.Within(t, patience, "a commit", func() bool { return f.Failed()+f.Passed() > before })
				}
			}
			a.Close()
			if f.Failed() == 0 || f.Passed() == 0 {
				t.Fatalf("%d commits failed and %d passed: want both", f.Failed(), f.Passed())
			}
			recs, _ := logValues(t, c, "lossy-commit")
			committed := testbroker.Committed(t, testbroker.Admin(t, c.ListenAddrs()), "lossy-commit", gid)
			again := map[int]bool{} // must be delivered again
			for _, r := range recs {
				v := int(binary.BigEndian.Uint64(r.Value))
				if r.Offset >= committed[r.Partition] {
					again[v] = true
				} else if !led.Handled(v) {
					t.Errorf("message %d (partition %d, offset %d) is committed (at %d) but was never acked",
						v, r.Partition, r.Offset, committed[r.Partition])
				}
			}
			var mu sync.Mutex
			delivered := map[int]bool{}
			b := subscribe(t, h, topic.Balanced("g"))
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() {
				consume(ctx, t, b, led, func(v int) { mu.Lock(); delivered[v] = true; mu.Unlock() })
			})
			wait.Within(t, testbroker.FaultPatience(patience, n), "every message handled and every uncommitted one delivered again", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for v := range again {
					if !delivered[v] {
						return false
					}
				}
				return len(led.Unhandled()) == 0
			}, func() string { return "unhandled " + strconv.Itoa(len(led.Unhandled())) })
			f.Every(0)
			testbroker.CommittedToTheEnd(t, c, patience, "lossy-commit", gid, recs)
			cancel()
			wg.Wait()
			t.Logf("%d commits failed, %d passed; %d messages unacked by the first member, %d delivered again",
				f.Failed(), f.Passed(), len(unacked), len(again))
		})
	}
}

// takeHolding receives k messages of s, acks all but the last hold of
// them (counted in led) and returns those.
func takeHolding(t *testing.T, s *topic.Subscription[int], led *testbroker.Ledger, k, hold int) []topic.Item[int] {
	t.Helper()
	var held []topic.Item[int]
	for i := range k {
		it := recv(t, s)
		if i >= k-hold {
			held = append(held, it)
			continue
		}
		if err := s.Ack(it.ID); err != nil {
			t.Fatalf("Ack(%d): %v", it.Value, err)
		}
		led.Handle(it.Value)
	}
	return held
}

// Guarantee: a member that leaves the group while it holds unacked
// messages, and a member that joins while another holds unacked messages
// past the revoke timeout, lose nothing: the acks that come too late are
// refused (ErrRevoked) and every message is eventually acked by some
// member, and committed.
func TestMembersLeavingAndJoiningDuringRebalancesLoseNoMessage(t *testing.T) {
	c := testbroker.Kafka(t)
	h := faultTopic(t, c, "lossy-rebalance", func(o *kafkatopic.Options[int]) { o.RevokeTimeout = 300 * time.Millisecond })
	gid := kafkatopic.GroupID("lossy-rebalance", "g")
	a := subscribe(t, h, topic.Balanced("g"))
	b := subscribe(t, h, topic.Balanced("g"))
	n := testbroker.FaultCount(t)
	led := testbroker.NewLedger()
	testbroker.PublishRange(led, 0, n, func(v int) error { return h.Publish(ctxT(t), v) }, nil)

	// Each holds two partitions, some n/2 messages.
	heldA := takeHolding(t, a, led, n/5, 5)
	heldB := takeHolding(t, b, led, n/5, 5)
	a.Close() // leaves with five messages in flight
	for _, it := range heldA {
		if err := a.Ack(it.ID); err == nil {
			t.Errorf("Ack(%d) after the member left = nil, want an error", it.Value)
		}
	}
	// c joins while b holds five messages past the revoke timeout.
	c2 := subscribe(t, h, topic.Balanced("g"))
	refused := 0
	for _, it := range heldB {
		switch err := b.Ack(it.ID); {
		case err == nil:
			led.Handle(it.Value)
		case errors.Is(err, kafkatopic.ErrRevoked):
			refused++
		default:
			t.Errorf("Ack(%d) after the rebalance: %v", it.Value, err)
		}
	}
	if refused == 0 {
		t.Errorf("every ack held past the revoke timeout was taken, want ErrRevoked")
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []*topic.Subscription[int]{b, c2} {
		wg.Go(func() { consume(ctx, t, s, led, nil) })
	}
	wait.Within(t, testbroker.FaultPatience(patience, n), "every message acked", func() bool { return len(led.Unhandled()) == 0 },
		func() string { return "unhandled " + strconv.Itoa(len(led.Unhandled())) })
	recs, _ := logValues(t, c, "lossy-rebalance")
	testbroker.CommittedToTheEnd(t, c, patience, "lossy-rebalance", gid, recs)
	cancel()
	wg.Wait()
}
