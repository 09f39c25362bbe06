package topology_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/internal/reachrelay"
)

// reachQueues wraps queues so that their readers are
// topology.ReachReporters, whose reach the test reports through them
// (Degrade, Recovered), as a broker backend's reader does. downFrom, when
// set, is reported by each reader before Subscribe returns it.
type reachQueues struct {
	topology.Queues[int]
	downFrom error

	mu      sync.Mutex
	readers []*reachReader
}

type reachReader struct {
	topology.Reader[int]
	reachrelay.Relay

	mu       sync.Mutex
	observer topic.ReachObserver // what ReportReach set last
}

func (r *reachReader) ReportReach(o topic.ReachObserver) {
	r.mu.Lock()
	r.observer = o
	r.mu.Unlock()
	r.Set(o)
}

// observed reports whether the reader has an observer set.
func (r *reachReader) observed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.observer != nil
}

func (q *reachQueues) Subscribe(ctx context.Context) (topology.Reader[int], error) {
	r, err := q.Queues.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	rr := &reachReader{Reader: r}
	if q.downFrom != nil {
		rr.Degrade(q.downFrom)
	}
	q.mu.Lock()
	q.readers = append(q.readers, rr)
	q.mu.Unlock()
	return rr, nil
}

// reader returns the i-th reader subscribed (0 is the first), failing
// the test when there is none.
func (q *reachQueues) reader(t *testing.T, i int) *reachReader {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if i >= len(q.readers) {
		t.Fatalf("reader %d of %d", i, len(q.readers))
	}
	return q.readers[i]
}

// wantState fails the test unless p's stage is in state, with LastError
// err when err is not nil.
func wantState(t *testing.T, p *pipeline.Pipeline[int, int], state producer.State, err error, when string) {
	t.Helper()
	synctest.Wait()
	st := p.SourceStatus()[0]
	if st.State != state || (err != nil && !errors.Is(st.LastError, err)) {
		t.Fatalf("%s: stage %+v, want %s (error %v)", when, st, state, err)
	}
}

// echo is a handler that handles every message.
func echo(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil }

// Guarantee: a topology source's stage is degraded while the reader its
// run receives through reports that it cannot read from its broker, with
// the reader's error as LastError, and runs again once the reader reports
// that it reads, within the same run.
func TestAStageIsDegradedWhileItsReaderCannotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fq := declareFailing(t, topology.New("reach"), 0)
		q := &reachQueues{Queues: fq}
		_, p := startPipeline(t, q, echo)
		wantState(t, p, producer.StateRunning, nil, "before any report")
		r := q.reader(t, 0)
		away := errors.New("broker away")
		r.Degrade(away)
		wantState(t, p, producer.StateDegraded, away, "after Degrade")
		r.Recovered()
		wantState(t, p, producer.StateRunning, nil, "after Recovered")
		if st := p.SourceStatus()[0]; st.Restarts != 0 {
			t.Fatalf("stage %+v, want the first run still", st)
		}
	})
}

// Guarantee: a run whose reader cannot read from its broker as the run
// starts (it learnt so before the source set its observer) is degraded
// from the start, until the reader reports that it reads.
func TestARunWhoseReaderCannotReadIsDegradedFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fq := declareFailing(t, topology.New("reach"), 0)
		away := errors.New("broker away")
		q := &reachQueues{Queues: fq, downFrom: away}
		_, p := startPipeline(t, q, echo)
		wantState(t, p, producer.StateDegraded, away, "after the start")
		q.reader(t, 0).Recovered()
		wantState(t, p, producer.StateRunning, nil, "after Recovered")
	})
}

// Guarantee: the reader of a failed run, which stays open while a letter
// it handed out is in the pipeline, reports to nobody (the source took
// back the observer it set as the run returned): its reports change
// nothing of the stage's next run, which hears its own reader's.
func TestAFailedRunsReaderReportsToNoLaterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, fq := declareFailing(t, topology.New("reach"), 1)
		q := &reachQueues{Queues: fq}
		gate := make(chan struct{})
		_, p := startPipeline(t, q, func(_ context.Context, m *message.Message[int]) (int, error) {
			<-gate
			return m.Data, nil
		})
		defer close(gate)
		if err := fq.Publish(t.Context(), topology.Letter[int]{Value: 1}); err != nil {
			t.Fatal(err)
		}
		// The next run sets its reader's observer once it has
		// subscribed the reader.
		wait.Within(t, time.Minute, "the next run's reader, with an observer", func() bool {
			all, _ := fq.subscribed()
			return all == 2 && q.reader(t, 1).observed()
		})
		if _, open := fq.subscribed(); open != 2 {
			t.Fatalf("%d readers open, want the failed run's, with its letter out, and the next run's", open)
		}
		if q.reader(t, 0).observed() {
			t.Fatal("the failed run's reader still has an observer")
		}
		away := errors.New("broker away")
		q.reader(t, 0).Degrade(away)
		wantState(t, p, producer.StateRunning, nil, "after a Degrade of the failed run's reader")
		again := errors.New("broker away again")
		q.reader(t, 1).Degrade(again)
		wantState(t, p, producer.StateDegraded, again, "after a Degrade of the next run's reader")
		if st := p.SourceStatus()[0]; st.Restarts != 1 {
			t.Fatalf("stage %+v, want its second run", st)
		}
	})
}
