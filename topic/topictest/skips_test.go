package topictest

import (
	"maps"
	"slices"
	"testing"

	"github.com/boulevard-go/boulevard/topic"
)

// The set a backend is checked against names exactly what it does not
// declare, in the words the skips use.
func TestUnsupportedNamesUndeclaredCapabilities(t *testing.T) {
	if got := slices.Sorted(maps.Keys(unsupported(topic.InMemory[int]{}.Capabilities()))); !slices.Equal(got, []string{"feature durable"}) {
		t.Fatalf("in-memory unsupported = %v, want [feature durable]", got)
	}
	log := topic.Capabilities{
		Modes:       []topic.Mode{topic.BalancedOnly, topic.BroadcastOnly, topic.Mixed},
		OnFull:      []topic.OnFull{topic.Block},
		OnLag:       []topic.OnLag{topic.DropOldest},
		AckModes:    []topic.AckMode{topic.AckFirst},
		Propagation: []topic.PropagationMode{topic.PropagationDisabled},
		Features:    []topic.Feature{topic.FeatureDurable},
	}
	want := []string{
		"ack_propagation.mode auto", "balanced.on_full drop_newest", "broadcast.ack_mode all",
		"broadcast.on_lag disconnect", "feature broadcast_capacity", "feature group_backpressure",
	}
	if got := slices.Sorted(maps.Keys(unsupported(log))); !slices.Equal(got, want) {
		t.Fatalf("unsupported = %v, want %v", got, want)
	}
}
