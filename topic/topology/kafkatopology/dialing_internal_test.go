package kafkatopology

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaconn"
)

// Guarantee: each client a backend makes plans its consumer group's
// rebalances with an instance of its own of each of sarama's strategies
// that keep state between plans (sticky, cooperative-sticky), so that
// two of the backend's groups whose leaders plan at once do not race;
// the backend's config keeps its own, and a strategy without state is
// used as it is.
func TestEachConsumerGroupPlansWithItsOwnStatefulStrategy(t *testing.T) {
	d := &dialing{parent: kafkaconn.New(sarama.NewConfig())}
	cfg := sarama.NewConfig()
	sticky, coop, rng := sarama.NewBalanceStrategySticky(), sarama.NewBalanceStrategyCooperativeSticky(), sarama.NewBalanceStrategyRange()
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{coop, rng, sticky}
	a, _ := d.child(cfg)
	b, _ := d.child(cfg)
	if got := cfg.Consumer.Group.Rebalance.GroupStrategies; got[0] != coop || got[1] != rng || got[2] != sarama.BalanceStrategy(sticky) {
		t.Fatalf("the backend's config now names %v", got)
	}
	as, bs := a.Consumer.Group.Rebalance.GroupStrategies, b.Consumer.Group.Rebalance.GroupStrategies
	for i, orig := range cfg.Consumer.Group.Rebalance.GroupStrategies {
		if as[i].Name() != orig.Name() || bs[i].Name() != orig.Name() {
			t.Errorf("strategy %d is %q and %q in the clients' configs, want %q", i, as[i].Name(), bs[i].Name(), orig.Name())
		}
		stateful := orig != rng
		if shared := as[i] == bs[i] || as[i] == orig; shared == stateful {
			t.Errorf("strategy %q shared by the clients: %v, want %v", orig.Name(), shared, !stateful)
		}
	}
}
