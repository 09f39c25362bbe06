package kafkatopology

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: a reader letting a partition go with a single letter of it
// handed out calls what OnRelease set, so that the letter can be settled
// before the partition goes: it is committed, and its next owner does
// not deliver it again.
func TestAPartitionLetGoWithOneLetterInFlightCallsOnRelease(t *testing.T) {
	letGoWithOneLetterInFlight(t, func() {})
}

// Guarantee: what OnRelease set that panics, on the client's goroutine,
// is logged and the partition is let go as if it had returned: the letter
// settled is committed, and the process goes on.
func TestAnOnReleaseThatPanicsLetsThePartitionGo(t *testing.T) {
	letGoWithOneLetterInFlight(t, func() { panic("release hook broke") })
}

// letGoWithOneLetterInFlight has a reader let a partition go with a single
// letter of it handed out, and what OnRelease set tell it then call
// then; it checks that the letter, settled then, is committed: the
// partition's next owner does not deliver it again.
func letGoWithOneLetterInFlight(t *testing.T, then func()) {
	t.Helper()
	b := newBackend(t, testbroker.Kafka(t).ListenAddrs()) // RevokeTimeout 2s
	q := declare(t, b, topology.New("single"))
	r := subscribe(t, q)
	if err := q.Publish(t.Context(), topology.Letter[msg]{Value: msg{N: 1}}); err != nil {
		t.Fatal(err)
	}
	l := receiveOne(t, r)
	releasing := make(chan struct{}, 1)
	r.(topology.ReleaseNotifier).OnRelease(func() func() {
		select {
		case releasing <- struct{}{}:
		default:
		}
		then()
		return nil
	})
	second := subscribe(t, q) // the rebalance takes the partition from r
	select {
	case <-releasing:
	case <-time.After(30 * time.Second):
		t.Fatal("the partition was let go with a letter in flight and OnRelease's function was not called")
	}
	if err := r.Settle(t.Context(), &l); err != nil {
		t.Fatalf("Settle while the partition is let go: %v", err)
	}
	buf := make([]topology.Letter[msg], 1)
	if n, err := second.TryReceive(t.Context(), buf); err != nil || n != 0 {
		t.Fatalf("the partition's next owner: TryReceive = %d, %v; want 0 letters (the one settled was committed)", n, err)
	}
}
