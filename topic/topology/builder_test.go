package topology_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// Guarantee: Build derives every name exactly: {name}-hold-{secs}s and
// {name}-dlq, namespaced by the consumer group wherever ForConsumerGroup is
// called in the chain; DLQNamed is verbatim; the defaults hold.
func TestBuildNames(t *testing.T) {
	cases := []struct {
		name   string
		b      *topology.Builder
		names  []string
		group  string
		shards int
	}{
		{"main only", topology.New("orders"), []string{"orders"}, "orders", 0},
		{"holds and dlq", topology.New("order-settlement").Hold(5 * time.Second).Hold(30 * time.Second).DLQ(),
			[]string{"order-settlement", "order-settlement-hold-5s", "order-settlement-hold-30s", "order-settlement-dlq"}, "order-settlement", 0},
		{"group first", topology.New("order-settlement").ForConsumerGroup("settlement-audit").Hold(5 * time.Second).DLQ(),
			[]string{"order-settlement", "order-settlement.settlement-audit-hold-5s", "order-settlement.settlement-audit-dlq"}, "settlement-audit", 0},
		{"group last", topology.New("order-settlement").Hold(5 * time.Second).DLQ().ForConsumerGroup("settlement-audit"),
			[]string{"order-settlement", "order-settlement.settlement-audit-hold-5s", "order-settlement.settlement-audit-dlq"}, "settlement-audit", 0},
		{"dlq named verbatim under a group", topology.New("a").ForConsumerGroup("g").DLQNamed("shared-dlq"),
			[]string{"a", "shared-dlq"}, "g", 0},
		{"minutes in seconds", topology.New("a").Hold(2 * time.Minute), []string{"a", "a-hold-120s"}, "a", 0},
		{"sequenced default shards", topology.New("ledger").Sequenced(topology.FailAll).DLQ(), []string{"ledger", "ledger-dlq"}, "ledger", 8},
		{"sequenced shards", topology.New("ledger").Sequenced(topology.Skip).RoutingShards(3).AllowMessageLoss(), []string{"ledger"}, "ledger", 3},
		{"sequenced most shards", topology.New("ledger").Sequenced(topology.Skip).RoutingShards(topology.MaxRoutingShards).AllowMessageLoss(), []string{"ledger"}, "ledger", topology.MaxRoutingShards},
		{"broadcast", topology.New("ticks").Broadcast(), []string{"ticks"}, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, err := c.b.Build()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if got := strings.Join(top.Names(), " "); got != strings.Join(c.names, " ") {
				t.Errorf("Names = %s, want %s", got, strings.Join(c.names, " "))
			}
			if top.ConsumerGroup() != c.group {
				t.Errorf("ConsumerGroup = %q, want %q", top.ConsumerGroup(), c.group)
			}
			if top.RoutingShards() != c.shards {
				t.Errorf("RoutingShards = %d, want %d", top.RoutingShards(), c.shards)
			}
		})
	}
}

// Guarantee: Build reports every conflict the builder can express, each
// naming the methods involved, as a *BuildError wrapping ErrConflict.
func TestBuildConflicts(t *testing.T) {
	cases := []struct {
		name string
		b    *topology.Builder
		want []string // one substring per conflict, in order
	}{
		{"broadcast with group", topology.New("a").Broadcast().ForConsumerGroup("g"), []string{"Broadcast conflicts with ForConsumerGroup"}},
		{"broadcast with dlq", topology.New("a").Broadcast().DLQ(), []string{"Broadcast conflicts with DLQ"}},
		{"broadcast with dlq named", topology.New("a").DLQNamed("x").Broadcast(), []string{"Broadcast conflicts with DLQNamed"}},
		{"broadcast with hold", topology.New("a").Hold(time.Second).Broadcast(), []string{"Broadcast conflicts with Hold"}},
		{"broadcast with sequenced", topology.New("a").Broadcast().Sequenced(topology.Skip), []string{"Broadcast conflicts with Sequenced"}},
		{"sequenced without dlq or hold", topology.New("a").Sequenced(topology.FailAll), []string{"Sequenced without DLQ, DLQNamed or Hold"}},
		{"routing shards without sequenced", topology.New("a").RoutingShards(4), []string{"RoutingShards without Sequenced"}},
		{"routing shards before sequenced", topology.New("a").RoutingShards(4).Sequenced(topology.Skip).DLQ(), []string{"RoutingShards before Sequenced"}},
		{"routing shards zero", topology.New("a").Sequenced(topology.Skip).DLQ().RoutingShards(0), []string{"RoutingShards(0): must be 1 to 4096"}},
		{"routing shards too many", topology.New("a").Sequenced(topology.Skip).DLQ().RoutingShards(5000), []string{"RoutingShards(5000)"}},
		{"dlq and dlq named", topology.New("a").DLQ().DLQNamed("x"), []string{"DLQ conflicts with DLQNamed"}},
		{"hold below a second", topology.New("a").Hold(500 * time.Millisecond), []string{"Hold(500ms): a hold must be at least 1s"}},
		{"hold not whole seconds", topology.New("a").Hold(1500 * time.Millisecond), []string{"Hold(1.5s): a hold must be a whole number of seconds"}},
		{"holds out of order", topology.New("a").Hold(30 * time.Second).Hold(5 * time.Second), []string{"Hold(5s) after Hold(30s)"}},
		{"holds repeated", topology.New("a").Hold(5 * time.Second).Hold(5 * time.Second), []string{"Hold(5s) after Hold(5s)"}},
		{"bad sequence policy", topology.New("a").Sequenced(topology.SequenceFailure(9)).DLQ(), []string{"Sequenced(SequenceFailure(9))"}},
		{"empty name", topology.New(""), []string{"New: "}},
		{"bad name", topology.New("a b"), []string{`New: topic: invalid topic name "a b"`}},
		{"bad group", topology.New("a").ForConsumerGroup("g/h"), []string{"ForConsumerGroup: "}},
		{"bad dlq name", topology.New("a").DLQNamed("x\ny"), []string{"DLQNamed: "}},
		{"derived name too long", topology.New(strings.Repeat("a", 245)).DLQ().Hold(5 * time.Second), []string{"is longer than 249 bytes"}},
		{"several at once", topology.New("a").Broadcast().ForConsumerGroup("g").DLQ().Hold(time.Second),
			[]string{"ForConsumerGroup", "with DLQ", "with Hold"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, err := c.b.Build()
			if err == nil {
				t.Fatalf("Build = %v, want an error", top)
			}
			var be *topology.BuildError
			if !errors.As(err, &be) || !errors.Is(err, topology.ErrConflict) {
				t.Fatalf("Build error %v (%T) is not a *BuildError wrapping ErrConflict", err, err)
			}
			if len(be.Conflicts) != len(c.want) {
				t.Fatalf("conflicts = %q, want %d", be.Conflicts, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(be.Conflicts[i].Error(), w) {
					t.Errorf("conflict %d = %q, want it to contain %q", i, be.Conflicts[i], w)
				}
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("error has a line break: %q", err)
			}
		})
	}
}

// Guarantee: AllowMessageLoss lifts the DLQ-or-hold rule of sequenced
// topologies, and Broadcast implies it.
func TestAllowMessageLoss(t *testing.T) {
	if _, err := topology.New("a").Sequenced(topology.Skip).AllowMessageLoss().Build(); err != nil {
		t.Fatalf("sequenced with AllowMessageLoss: %v", err)
	}
	top, err := topology.New("a").Broadcast().Build()
	if err != nil || !top.AllowsMessageLoss() || !top.IsBroadcast() {
		t.Fatalf("broadcast: %v, allows loss %v", err, top.AllowsMessageLoss())
	}
}

// Guarantee: Build bounds the holds: each at most MaxHold (so that every
// backend can tell when it is due: a Pulsar deliver-at time past the year
// 2262 no longer fits its clock), and at most MaxHolds of them (each is a
// queue, a topic on a broker), naming the method and the bound; the
// bounds themselves build.
func TestBuildBoundsTheHolds(t *testing.T) {
	tooMany := topology.New("a")
	for i := range topology.MaxHolds + 1 {
		tooMany.Hold(time.Duration(i+1) * time.Second)
	}
	for _, c := range []struct {
		name string
		b    *topology.Builder
		want string
	}{
		{"hold past MaxHold", topology.New("a").Hold(topology.MaxHold + time.Second), "Hold(8760h0m1s): a hold must be at most 8760h0m0s"},
		{"hold of 292 years", topology.New("a").Hold(math.MaxInt64 / time.Second * time.Second), "a hold must be at most 8760h0m0s"},
		{"too many holds", tooMany, "65 holds: at most 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top, err := c.b.Build()
			var be *topology.BuildError
			if !errors.As(err, &be) || len(be.Conflicts) != 1 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build = %v, %v; want one conflict saying %q", top, err, c.want)
			}
		})
	}
	atBounds := topology.New("a")
	for i := range topology.MaxHolds - 1 {
		atBounds.Hold(time.Duration(i+1) * time.Second)
	}
	if _, err := atBounds.Hold(topology.MaxHold).Build(); err != nil {
		t.Errorf("MaxHolds holds, the last MaxHold: %v", err)
	}
}

// Guarantee: a topology's queues have distinct names: a DLQNamed that
// names the topology's main topic or one of its hold queues is a
// conflict, not a DLQ that shares their messages (every message published
// would be dead on arrival, and a dead letter published to the main
// topic would be delivered to its consumers again).
func TestBuildRefusesADLQNamedAfterItsOwnQueues(t *testing.T) {
	for _, c := range []struct {
		b    *topology.Builder
		want string
	}{
		{topology.New("orders").DLQNamed("orders"), `DLQNamed("orders") names the main topic`},
		{topology.New("orders").Hold(5 * time.Second).DLQNamed("orders-hold-5s"), `DLQNamed("orders-hold-5s") names a hold queue`},
		{topology.New("orders").ForConsumerGroup("g").Hold(time.Second).DLQNamed("orders.g-hold-1s"), `names a hold queue`},
	} {
		top, err := c.b.Build()
		var be *topology.BuildError
		if !errors.As(err, &be) || len(be.Conflicts) != 1 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Build = %v, %v; want one conflict saying %q", top, err, c.want)
		}
	}
	if _, err := topology.New("orders").DLQNamed("shared-dlq").Build(); err != nil {
		t.Errorf("a DLQ named apart: %v", err)
	}
}

// Guarantee: Sequenced with the zero SequenceFailure (a policy left unset)
// is a conflict naming the method and the values it takes, not a
// topology silently built unordered.
func TestBuildRefusesSequencedWithoutAPolicy(t *testing.T) {
	top, err := topology.New("ledger").Sequenced(0).DLQ().Build()
	var be *topology.BuildError
	if !errors.As(err, &be) || len(be.Conflicts) != 1 || !strings.Contains(err.Error(), "Sequenced(SequenceFailure(0)): not Skip or FailAll") {
		t.Fatalf("Build = %v, %v; want one conflict: Sequenced(SequenceFailure(0)): not Skip or FailAll", top, err)
	}
}
