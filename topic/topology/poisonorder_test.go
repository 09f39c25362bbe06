package topology_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// returnsRecorded records the values of the letters given back
// (Queues.Return), in order.
type returnsRecorded struct {
	*choosyDLQ
	mu       sync.Mutex
	returned []int
}

func (q *returnsRecorded) Return(ctx context.Context, ls []topology.Letter[int]) error {
	q.mu.Lock()
	for _, l := range ls {
		q.returned = append(q.returned, l.Value)
	}
	q.mu.Unlock()
	return q.choosyDLQ.Return(ctx, ls)
}

// poisonWhileKept starts the ledger, whose dead-letterings of the values
// failDead reports (value 1 among them) fail failures times each, publishes 1 and 2 of key "A" (1 poisons the key, 2 waits
// behind it), waits until the dead-lettering of 1 is kept, then publishes
// 3 and 4 and waits until the source has received all four.
func poisonWhileKept(t *testing.T, failures int, failDead func(v int) bool) (*returnsRecorded, topology.Queues[int], *topology.Source[int], func()) {
	t.Helper()
	m, _ := topology.NewMemory[int](topology.MemoryOptions{})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	var q *returnsRecorded
	_, declared, src, p := startLedger(t, m, 1, func(mq topology.Queues[int]) topology.Queues[int] {
		q = &returnsRecorded{choosyDLQ: &choosyDLQ{Queues: mq, failed: map[int]int{}, failures: failures,
			failDead: failDead}}
		return q
	})
	pub, _ := topology.NewPublisher[int](q, topology.PublisherOptions[int]{Key: func(int) string { return "A" }})
	publish := func(vs ...int) {
		t.Helper()
		for _, v := range vs {
			if err := pub.Publish(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	until := func(what string, cond func(topology.Stats) bool) {
		t.Helper()
		for end := time.Now().Add(time.Minute); !cond(src.Stats()); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("stats %+v after a minute, want %s", src.Stats(), what)
			}
		}
	}
	publish(1, 2)
	until("the dead-lettering of 1 kept", func(st topology.Stats) bool { return st.DeadLetterFailed == 1 })
	publish(3, 4)
	until("4 received", func(st topology.Stats) bool { return st.Received == 4 })
	var once sync.Once
	stop := func() {
		t.Helper()
		var err error
		once.Do(func() { err = p.Stop(context.Background()) })
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(stop)
	return q, declared, src, stop
}

// Guarantee: under FailAll, while the dead-lettering of the message that
// poisoned a key is kept (the DLQ failed it), the key's later messages,
// held back behind it or arriving meanwhile, wait behind it, counted in
// HandOffKept, and the DLQ receives the key's messages in publish order
// once it takes the first.
func TestPoisonedKeyKeepsItsOrderInTheDLQWhileItsDeadLetteringIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { dlqKeepsPoisonedKeysOrder(t, func(v int) bool { return v == 1 }, 1) })
}

// Guarantee: under FailAll, a poisoned key's message that waited behind
// its kept dead-lettering and whose own dead-lettering then fails is kept
// in turn, counted once in DeadLetterFailed, and the key's messages behind
// it wait for it: the DLQ still receives them in publish order.
func TestPoisonedKeysFollowerWhoseDeadLetteringFailsIsKeptAheadOfTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { dlqKeepsPoisonedKeysOrder(t, func(v int) bool { return v == 1 || v == 3 }, 2) })
}

// dlqKeepsPoisonedKeysOrder poisons key "A" while the dead-letterings of
// the values failDead reports fail twice each (see poisonWhileKept), and
// checks that once the DLQ took them all, failed of them counted in
// DeadLetterFailed, it holds the key's four messages in publish order.
func dlqKeepsPoisonedKeysOrder(t *testing.T, failDead func(v int) bool, failed uint64) {
	t.Helper()
	_, declared, src, stop := poisonWhileKept(t, 2, failDead)
	readings := &statsReadings{t: t, src: src}
	st := readings.until("dead-lettering", func(st topology.Stats) bool {
		return st.DeadLettered == 4 && st.HandOffKept == 0
	})
	if st.Poisoned != 4 || st.DeadLetterFailed != failed || st.HandOffFailed != failed {
		t.Errorf("stats %+v; want 4 poisoned, %d failed dead-letterings", st, failed)
	}
	stop()
	if got := dlqValues(t, declared); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("DLQ holds %v, want [1 2 3 4]", got)
	}
}

// Guarantee: under FailAll, a poisoned key's messages waiting behind its
// kept dead-lettering count in HandOffKept, and Close gives them back
// (Queues.Return) after it, in publish order.
func TestCloseGivesBackAPoisonedKeysKeptDeadLetteringsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, declared, src, stop := poisonWhileKept(t, 1<<30, func(v int) bool { return v == 1 })
		readings := &statsReadings{t: t, src: src}
		readings.until("kept", func(st topology.Stats) bool { return st.HandOffKept == 4 })
		stop()
		dead := dlqValues(t, declared)
		q.mu.Lock()
		defer q.mu.Unlock()
		if fmt.Sprint(q.returned) != "[1 2 3 4]" || len(dead) != 0 {
			t.Errorf("given back %v, DLQ holds %v; want [1 2 3 4] given back, none in the DLQ", q.returned, dead)
		}
	})
}
