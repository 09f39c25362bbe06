package topology_test

import (
	"fmt"
	"time"

	"github.com/boulevard-go/boulevard/topic/topology"
)

// A topology's names derive from its name, namespaced by a consumer group
// when there is one; Build names every conflict.
func ExampleBuilder() {
	a, _ := topology.New("order-settlement").Hold(5 * time.Second).Hold(30 * time.Second).DLQ().Build()
	b, _ := topology.New("order-settlement").Hold(5 * time.Second).DLQ().ForConsumerGroup("settlement-audit").Build()
	fmt.Println(a.Names())
	fmt.Println(b.Names(), b.ConsumerGroup())
	_, err := topology.New("ticks").Broadcast().DLQ().Sequenced(topology.FailAll).Build()
	fmt.Println(err)
	// Output:
	// [order-settlement order-settlement-hold-5s order-settlement-hold-30s order-settlement-dlq]
	// [order-settlement order-settlement.settlement-audit-hold-5s order-settlement.settlement-audit-dlq] settlement-audit
	// topology "ticks": Broadcast conflicts with DLQ; topology "ticks": Broadcast conflicts with Sequenced
}
