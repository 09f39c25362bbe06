package observe_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/topic"
)

// countedPipeline is a Pipeline that counts the calls of its Stats, and
// those running.
type countedPipeline struct {
	name             string
	calls, inFlight  atomic.Int64
	afterClose       *atomic.Bool
	calledAfterClose atomic.Bool
}

func (p *countedPipeline) Stats() pipeline.Stats {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	p.calls.Add(1)
	if p.afterClose.Load() {
		p.calledAfterClose.Store(true)
	}
	return pipeline.Stats{Name: p.name}
}

// countedTopic is a Topic that counts the calls of its Stats made once
// afterClose is set.
type countedTopic struct {
	afterClose       *atomic.Bool
	calledAfterClose atomic.Bool
}

func (c *countedTopic) Stats() topic.Stats {
	if c.afterClose.Load() {
		c.calledAfterClose.Store(true)
	}
	return topic.Stats{}
}

// Guarantee: the Observer is safe for concurrent use: scrapes of /metrics
// and /stats, checks and snapshots, Add, Replace and Remove of pipelines,
// and AddTopic and RemoveTopic, racing its Close, neither panic nor race;
// Close returns nil once no Stats call is running, the Adds, Replaces and
// AddTopics it refuses return ErrClosed, and no read calls a Stats once
// Close has returned.
func TestReadsAndChangesRacingTheObserversCloseCallNoStatsOnceItReturned(t *testing.T) {
	const rounds, readers = 5, 4
	for round := range rounds {
		obs := observe.New(observe.Options{})
		var closed atomic.Bool
		fixed := &countedPipeline{name: "fixed", afterClose: &closed}
		add(t, obs, fixed)
		fixedTopic := &countedTopic{afterClose: &closed}
		if err := obs.AddTopic("fixed", fixedTopic); err != nil {
			t.Fatal(err)
		}
		h := obs.Handler(nil)
		reads := []func(){
			func() { scrape(h, "/metrics") },
			func() { scrape(h, "/stats") },
			func() { obs.Health(t.Context()) },
			func() { obs.Snapshot(t.Context()) },
		}
		stop := make(chan struct{})
		var running sync.WaitGroup
		read := make(chan struct{}, readers)
		for i := range readers {
			running.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					reads[(i+n)%len(reads)]()
					if n == 0 {
						read <- struct{}{}
					}
				}
			})
		}
		changers := []func(n int) error{
			func(n int) error {
				p := &countedPipeline{name: fmt.Sprintf("changing-%d", n%2), afterClose: &closed}
				var err error
				if n%2 == 0 {
					err = obs.Add(t.Context(), p)
				} else {
					_, err = obs.Replace(t.Context(), p)
				}
				obs.Remove(fmt.Sprintf("changing-%d", (n+1)%2))
				return err
			},
			func(n int) error {
				err := obs.AddTopic(fmt.Sprintf("changing-%d", n%2), &countedTopic{afterClose: &closed})
				obs.RemoveTopic(fmt.Sprintf("changing-%d", (n+1)%2))
				return err
			},
		}
		changed := make(chan error, len(changers))
		for _, change := range changers {
			running.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						// Once more, now that Close has returned: refused
						// (a slow changer may have made no call since).
						changed <- change(n)
						return
					default:
					}
					if err := change(n); err != nil {
						changed <- err
						return
					}
				}
			})
		}
		for range readers {
			<-read // every reader under way
		}
		if err := obs.Close(t.Context()); err != nil {
			t.Fatalf("round %d: Close racing reads and changes = %v, want nil", round, err)
		}
		if n := fixed.inFlight.Load(); n != 0 {
			t.Fatalf("round %d: %d Stats calls still running once Close returned, want 0", round, n)
		}
		closed.Store(true)
		before := fixed.calls.Load()
		for _, r := range reads {
			r() // once more, with every reader still reading
		}
		close(stop)
		running.Wait()
		for range changers {
			if err := <-changed; !errors.Is(err, observe.ErrClosed) {
				t.Fatalf("round %d: an Add, Replace or AddTopic racing Close = %v, want observe.ErrClosed", round, err)
			}
		}
		if fixed.calledAfterClose.Load() || fixedTopic.calledAfterClose.Load() {
			t.Fatalf("round %d: a read called Stats once Close had returned (%d calls before)", round, before)
		}
	}
}
