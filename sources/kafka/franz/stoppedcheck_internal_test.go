package franz

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// stoppableSource is a source whose Run runs once, under a context the
// test cancels (stop), and sends its error to done; the pipeline sees it
// return nil, so that it does not restart it.
type stoppableSource struct {
	*Source
	stop chan context.CancelFunc
	done chan error
}

func (s stoppableSource) Run(ctx context.Context, st *producer.Stage[[]byte]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stop <- cancel
	s.done <- s.Source.Run(ctx, st)
	return nil
}

// Guarantee: a stage's context ending while its member asks the cluster
// for the subscribed topics (the Metadata request, held here until the
// context ended) ends the start: Run returns with no live member, its
// client closed, and the member never joins the group, as the sarama
// source's member does not.
func TestAMemberWhoseStageStopsDuringItsTopicCheckNeverJoinsTheGroup(t *testing.T) {
	const topic, group = "events", "g-stopped-check"
	c := groupCluster(t, topic, 1)
	held, release := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	holding.Store(true)
	c.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		if holding.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
		c.DropControl()
		return nil, nil, false
	})
	var joins atomic.Int32
	c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		joins.Add(1)
		return nil, nil, false
	})
	released := false
	let := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(let) // before the cluster closes
	src := groupSource(t, c, topic, group, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := src.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	stop, done := make(chan context.CancelFunc, 1), make(chan error, 1)
	startPipeline(t, pipeline.Options[[]byte, []byte]{
		Name:     "stopped-check",
		Producer: producer.Options[[]byte]{Source: stoppableSource{src, stop, done}},
		Processors: processor.Options[[]byte, []byte]{
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) { return m.Data, nil },
		},
	})
	cancel := <-stop
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no Metadata request within 30s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil once its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still starting 30s after its context ended")
	}
	if ms := src.Stats().Members; len(ms) != 0 {
		t.Errorf("Run returned with %d live members (%+v), want none: its context ended during the topic check", len(ms), ms)
	}
	let()
	ctx, cancelClose := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClose()
	if err := src.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	if n := joins.Load(); n != 0 {
		t.Errorf("%d JoinGroup requests reached the cluster, want none", n)
	}
}
