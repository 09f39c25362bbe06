package pulsar_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// Two sources never give their consumers the same name, even under the same
// pipeline name (as two replicas of one pipeline in two processes would
// run), and a stage restarted after its consumer closed subscribes again
// under the name it had.
func TestConsumerNamesUniquePerSourceStableAcrossRestarts(t *testing.T) {
	e := newEnv(t)
	e.publish("names", "m", 10)
	replica := func(src *bpulsar.Source) pipeline.Options[[]byte, []byte] {
		return pipeline.Options[[]byte, []byte]{Name: "replica", Logger: testLogger(), ShutdownTimeout: 10 * time.Second,
			Producer:   producer.Options[[]byte]{Source: src, Restart: producer.Restart{Backoff: 20 * time.Millisecond}},
			Processors: processor.Options[[]byte, []byte]{Handle: recordAll(newReceived())}}
	}
	a := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"names"}, Subscription: "sub", Consumer: earliest()})
	b := bpulsar.New(bpulsar.Options{Client: e.client, Topics: []string{"names"}, Subscription: "sub", Consumer: earliest()})
	start(t, replica(a))
	start(t, replica(b))
	connected := func() []string {
		var names []string
		for _, c := range e.broker.Consumers("names", "sub") {
			if c.Connected {
				names = append(names, c.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	wait.Within(t, waitLimit, "both consumers to subscribe", func() bool { return len(connected()) == 2 })
	before := connected()
	if before[0] == before[1] {
		t.Fatalf("both sources named their consumer %q", before[0])
	}
	for _, n := range before {
		if !strings.HasPrefix(n, "replica.producer.0-") {
			t.Errorf("consumer name %q does not start with its stage name", n)
		}
	}
	// The broker lists a consumer as soon as it subscribes, a moment before
	// the source holds it; close it once the source does.
	wait.Within(t, waitLimit, "the source to hold its consumer and close it", a.CloseConsumerForTest)
	wait.Within(t, waitLimit, "the stage to subscribe again", func() bool { return a.Stats().Replaced == 1 && len(connected()) == 2 })
	if after := connected(); !slices.Equal(after, before) {
		t.Errorf("consumer names %q after the restart, want %q", after, before)
	}
}
