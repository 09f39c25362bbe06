package sink_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/topic"
)

// Guarantee: every Close returns only once the publishes still
// unresolved are reported upstream, also a Close called while another is
// reporting them; and it returns as soon as that one has.
func TestAConcurrentCloseReturnsOnceThePendingPublishesAreReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, s := rig(t, autoOpts(0), topic.Block, topic.Balanced("g"))
		acking, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		defer unblock() // so that nothing is left blocked if the test fails
		reported := false
		ack := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) {
			close(acking)
			<-release
			reported = true
		})
		if err := s.Publish(t.Context(), message.New(1, &ack, 1)); err != nil {
			t.Fatal(err)
		}
		first, second := make(chan struct{}), make(chan bool, 1)
		go func() {
			defer close(first)
			s.Close()
		}()
		<-acking
		go func() {
			s.Close()
			second <- reported
		}()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a Close called while another reported the pending publish returned before the report was made")
		default:
		}
		unblock()
		<-first
		if !<-second {
			t.Fatal("the second Close returned before the pending publish was reported")
		}
	})
}
