package kafkatopic_test

import (
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: a balanced member whose group session fails joins again only
// after Config.Consumer.Group.Rebalance.Retry.Backoff, not at once: while
// the coordinator refuses its JoinGroup requests, the refused requests are
// at most one per backoff over the time measured (slowness only lengthens
// that time, so the bound holds on a busy machine), and once the refusals
// stop the member joins and receives again. The refusal is one sarama
// does not retry itself (refuseJoins): those it retries (a coordinator
// loading or moving, a rebalance in progress) it retries after the same
// backoff, Rebalance.Retry.Max times, before the session fails.
func TestAMemberWhoseSessionFailsJoinsAgainOnlyAfterTheRebalanceBackoff(t *testing.T) {
	const backoff = 200 * time.Millisecond
	const observed = 6 // refused requests counted: at least 5 backoffs
	c := testbroker.Kafka(t)
	o := testOptions[int](c, topic.IntCodec{})
	o.Config.Consumer.Group.Rebalance.Retry.Backoff = backoff
	h := newTopic(t, newBackend(t, o), "rejoin", topic.Options{})
	s := subscribe(t, h, topic.Balanced("g"))
	refusals, kick := refuseJoins(c)

	const all = 1 << 20
	refusals.Store(all)
	kick.Store(true) // the session ends; every join is refused from then on
	refused := func() int { return all - int(refusals.Load()) }
	wait.Within(t, patience, "a join refused", func() bool { return refused() > 0 })
	first, start := refused(), time.Now()
	wait.Within(t, patience, "more joins refused", func() bool { return refused() >= first+observed })
	n := refused() - first
	elapsed := time.Since(start)
	// Each of the n requests refused since start follows the one before
	// by the backoff at least, so all but the first came after start
	// plus a backoff each; one more is allowed for good measure.
	if most := int(elapsed/backoff) + 2; n > most {
		t.Fatalf("%d JoinGroup requests refused within %v: a backoff of %v allows at most %d", n, elapsed.Round(time.Millisecond), backoff, most)
	}
	t.Logf("%d JoinGroup requests refused within %v", n, elapsed.Round(time.Millisecond))

	refusals.Store(0)
	if err := h.Publish(ctxT(t), 7); err != nil {
		t.Fatal(err)
	}
	if it := recv(t, s); it.Value != 7 {
		t.Fatalf("received %v, want 7", it.Value)
	}
}
