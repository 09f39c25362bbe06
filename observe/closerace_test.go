package observe_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/kafkatopology"
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

// afterCloseProbe records whether a Stats was called once afterClose is
// set.
type afterCloseProbe struct {
	afterClose       *atomic.Bool
	calledAfterClose atomic.Bool
}

func (p *afterCloseProbe) note() {
	if p.afterClose.Load() {
		p.calledAfterClose.Store(true)
	}
}

// countedTopic, countedKafka, countedPulsar, countedTopology and
// countedKafkaTopology are a Topic, KafkaSource, PulsarSource, Topology
// and KafkaTopology whose Stats record a call made once afterClose is set.
type (
	countedTopic         struct{ afterCloseProbe }
	countedKafka         struct{ afterCloseProbe }
	countedPulsar        struct{ afterCloseProbe }
	countedTopology      struct{ afterCloseProbe }
	countedKafkaTopology struct{ afterCloseProbe }
)

func (c *countedTopic) Stats() topic.Stats { c.note(); return topic.Stats{} }

func (c *countedKafka) Stats() kafka.Stats { c.note(); return kafka.Stats{GroupID: "readers"} }

func (c *countedPulsar) Stats() pulsar.Stats { c.note(); return pulsar.Stats{} }

func (c *countedTopology) Stats() topology.Stats { c.note(); return topology.Stats{} }

func (c *countedKafkaTopology) Stats() kafkatopology.Stats { c.note(); return kafkatopology.Stats{} }

func probe(closed *atomic.Bool) afterCloseProbe { return afterCloseProbe{afterClose: closed} }

// Guarantee: the Observer is safe for concurrent use: scrapes of /metrics
// and /stats, checks and snapshots, Add, Replace and Remove of pipelines,
// AddKafka and RemoveKafka, AddTopic, RemoveTopic and LinkTopic,
// AddPulsar and RemovePulsar, AddTopology and RemoveTopology, and
// AddKafkaTopology and RemoveKafkaTopology, racing its Close, neither
// panic nor race; Close returns nil once no Stats call is running, each
// adder either succeeds or returns ErrClosed (and does once Close has
// returned), no read calls a Stats of anything added once Close has
// returned, and no goroutine is left (TestMain).
func TestReadsAndChangesRacingTheObserversCloseCallNoStatsOnceItReturned(t *testing.T) {
	const rounds, readers = 5, 4
	for round := range rounds {
		obs := observe.New(observe.Options{})
		var closed atomic.Bool
		fixed := &countedPipeline{name: "fixed", afterClose: &closed}
		add(t, obs, fixed)
		fixedTopic := &countedTopic{probe(&closed)}
		fixedKafka := &countedKafka{probe(&closed)}
		fixedPulsar := &countedPulsar{probe(&closed)}
		fixedTopology := &countedTopology{probe(&closed)}
		fixedBackend := &countedKafkaTopology{probe(&closed)}
		probes := []*afterCloseProbe{&fixedTopic.afterCloseProbe, &fixedKafka.afterCloseProbe, &fixedPulsar.afterCloseProbe,
			&fixedTopology.afterCloseProbe, &fixedBackend.afterCloseProbe}
		if err := errors.Join(obs.AddTopic("fixed", fixedTopic), obs.AddKafka(t.Context(), fixedKafka),
			obs.AddPulsar("fixed", fixedPulsar), obs.AddTopology("fixed", fixedTopology),
			obs.AddKafkaTopology("fixed", fixedBackend)); err != nil {
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
				err := obs.AddTopic(fmt.Sprintf("changing-%d", n%2), &countedTopic{probe(&closed)})
				obs.RemoveTopic(fmt.Sprintf("changing-%d", (n+1)%2))
				obs.LinkTopic(fmt.Sprintf("changing-%d", n%2), observe.TopicLinks{Publishers: []string{"fixed"}})
				obs.LinkTopic(fmt.Sprintf("changing-%d", (n+1)%2), observe.TopicLinks{})
				return err
			},
			changeKafka(t, obs, &closed),
			changeNamed(obs.AddPulsar, obs.RemovePulsar, func() observe.PulsarSource { return &countedPulsar{probe(&closed)} }),
			changeNamed(obs.AddTopology, obs.RemoveTopology, func() observe.Topology { return &countedTopology{probe(&closed)} }),
			changeNamed(obs.AddKafkaTopology, obs.RemoveKafkaTopology,
				func() observe.KafkaTopology { return &countedKafkaTopology{probe(&closed)} }),
		}
		changerNames := []string{"Add/Replace", "AddTopic", "AddKafka", "AddPulsar", "AddTopology", "AddKafkaTopology"}
		changed := make([]chan error, len(changers))
		for i, change := range changers {
			changed[i] = make(chan error, 1)
			running.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						// Once more, now that Close has returned: refused
						// (a slow changer may have made no call since).
						changed[i] <- change(n)
						return
					default:
					}
					if err := change(n); err != nil {
						changed[i] <- err
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
		for i := range changers {
			if err := <-changed[i]; !errors.Is(err, observe.ErrClosed) {
				t.Fatalf("round %d: %s racing Close = %v, want observe.ErrClosed", round, changerNames[i], err)
			}
		}
		if fixed.calledAfterClose.Load() {
			t.Fatalf("round %d: a read called a pipeline's Stats once Close had returned (%d calls before)", round, before)
		}
		for i, p := range probes {
			if p.calledAfterClose.Load() {
				t.Fatalf("round %d: a read called the Stats of fixed thing %d (topic, Kafka source, Pulsar source, topology, Kafka topology) once Close had returned", round, i)
			}
		}
	}
}

// changeKafka returns a changer that adds a new Kafka source and removes
// the one it added before.
func changeKafka(t *testing.T, obs *observe.Observer, closed *atomic.Bool) func(int) error {
	var prev observe.KafkaSource
	return func(int) error {
		s := &countedKafka{probe(closed)}
		err := obs.AddKafka(t.Context(), s)
		if prev != nil {
			obs.RemoveKafka(prev)
		}
		prev = s
		return err
	}
}

// changeNamed returns a changer that adds a new thing (made by newT)
// under one of two names and removes the one under the other name.
func changeNamed[T any](add func(string, T) error, remove func(string) bool, newT func() T) func(int) error {
	return func(n int) error {
		err := add(fmt.Sprintf("changing-%d", n%2), newT())
		remove(fmt.Sprintf("changing-%d", (n+1)%2))
		return err
	}
}
