package kafkatopology

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// claimed returns the partitions r claims in a running session, sorted;
// nil when no session runs.
func claimed(r topology.Reader[msg]) []int32 {
	g := r.(*groupReader[msg])
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.inSess {
		return nil
	}
	ps := []int32{}
	for p := range g.claims {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// caughtUp checks that r's TryReceive, with nothing to fetch, tells it
// has caught up (0 letters, nil) well before Options.AdminTimeout (30s):
// its context's 10s deadline would end it first with ErrCatchUp.
func caughtUp(t *testing.T, who string, r topology.Reader[msg]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := r.TryReceive(ctx, make([]topology.Letter[msg], 1))
	if n != 0 || err != nil {
		t.Errorf("TryReceive of %s, claiming %v = %d, %v; want 0, nil at once", who, claimed(r), n, err)
	}
}

// Guarantee: under a cooperative rebalance protocol, whose group session
// goes on across rebalances, a group reader whose session loses a
// partition to another member, or gains one after it began (the joining
// member's, the one given back as that member leaves), tells that it has
// caught up with the partitions it holds now as soon as it has: TryReceive
// with nothing to fetch returns 0 letters and no error, and does not wait
// out Options.AdminTimeout for the partitions its session held as it
// began.
func TestTryReceiveCatchesUpWithThePartitionsACooperativeSessionHoldsNow(t *testing.T) {
	brokers := testbroker.Kafka(t).ListenAddrs()
	two := func(o *Options[msg]) { o.Partitions = 2 }
	qa := declare(t, newBackend(t, brokers, cooperative, two), topology.New("coopmoves"))
	a := subscribe(t, qa)
	wait.Within(t, 30*time.Second, "member A to claim both partitions",
		func() bool { return slices.Equal(claimed(a), []int32{0, 1}) }, func() string { return fmt.Sprint(claimed(a)) })
	caughtUp(t, "member A, alone", a)

	qb := declare(t, newBackend(t, brokers, cooperative, two), topology.New("coopmoves"))
	b := subscribe(t, qb)
	state := func() string { return fmt.Sprintf("A claims %v, B %v", claimed(a), claimed(b)) }
	wait.Within(t, 60*time.Second, "the rebalance to give each member one partition",
		func() bool { return len(claimed(a)) == 1 && len(claimed(b)) == 1 }, state)
	caughtUp(t, "member A, a partition revoked", a)
	caughtUp(t, "member B, a partition assigned after its session began", b)

	if err := b.Close(t.Context()); err != nil { // leaves the group
		t.Fatal(err)
	}
	wait.Within(t, 60*time.Second, "member A to claim both partitions again",
		func() bool { return slices.Equal(claimed(a), []int32{0, 1}) }, state)
	caughtUp(t, "member A, the partition back", a)
}
