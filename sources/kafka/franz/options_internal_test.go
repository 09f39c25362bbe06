package franz

import "testing"

// Guarantee: each value of Options.Rebalance makes the member offer the
// group the strategy it names, under the protocol name Kafka's other
// clients use for it (a sarama member on "sticky" joins a group of
// franz-go members on "sticky"), and an empty one keeps the client's
// balancers.
func TestRebalanceOffersTheNamedStrategy(t *testing.T) {
	for _, name := range []string{RebalanceRange, RebalanceRoundRobin, RebalanceSticky, RebalanceCooperativeSticky} {
		o := Options{Rebalance: name}
		b := o.balancer()
		if b == nil {
			t.Errorf("Rebalance %q offers no balancer", name)
			continue
		}
		if got := b.ProtocolName(); got != name {
			t.Errorf("Rebalance %q offers %q", name, got)
		}
	}
	if b := (&Options{}).balancer(); b != nil {
		t.Errorf("an empty Rebalance offers %q in place of the client's balancers", b.ProtocolName())
	}
}
