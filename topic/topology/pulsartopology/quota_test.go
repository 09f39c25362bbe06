package pulsartopology_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/pulsar/pulsartest"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/pulsartopology"
)

// countingQueues counts the hand-offs (DeadLetter, Hold) a source makes,
// and those that failed, each failure's error wrapping ErrSend.
type countingQueues struct {
	topology.Queues[int]
	attempts, failed atomic.Int32
	mu               sync.Mutex
	errs             []error
}

func (q *countingQueues) count(err error) error {
	q.attempts.Add(1)
	if err != nil {
		q.failed.Add(1)
		q.mu.Lock()
		q.errs = append(q.errs, err)
		q.mu.Unlock()
	}
	return err
}

func (q *countingQueues) DeadLetter(ctx context.Context, l topology.Letter[int]) error {
	return q.count(q.Queues.DeadLetter(ctx, l))
}

func (q *countingQueues) Hold(ctx context.Context, i int, l topology.Letter[int]) error {
	return q.count(q.Queues.Hold(ctx, i, l))
}

// notSend returns the first failure that does not wrap ErrSend.
func (q *countingQueues) notSend() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, err := range q.errs {
		if !errors.Is(err, pulsartopology.ErrSend) {
			return err
		}
	}
	return nil
}

// quotaLimit is the tests' destination_storage quota, and overQuota a
// payload that puts a subscription's backlog over it alone.
const quotaLimit = 1000

var overQuota = []byte(strings.Repeat("x", 2*quotaLimit))

// quotaPipeline runs a pipeline reading q through a topology source that
// logs to log, its handler counting its runs by value and returning what
// outcome returns for the run's value and rank (1 for the first run).
func quotaPipeline(t *testing.T, q topology.Queues[int], log *slog.Logger, outcome func(v, run int) error) (*topology.Source[int], func(v int) int) {
	t.Helper()
	src, err := topology.NewSource(topology.SourceOptions[int]{Queues: q, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[int]int{}
	p, err := pipeline.New(pipeline.Options[int, int]{
		Name:     "quota",
		Logger:   log,
		Producer: producer.Options[int]{Source: src},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			runs[m.Data]++
			run := runs[m.Data]
			mu.Unlock()
			return m.Data, outcome(m.Data, run)
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stopping the pipeline: %v", err)
		}
	})
	return src, func(v int) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[v]
	}
}

// letters returns the values of the messages of full that decode.
func letters(br *pulsartest.Broker, full string) []int {
	var vs []int
	for _, m := range br.Messages(full) {
		if v, err := decodeInt(m.Payload); err == nil && len(m.Payload) < len(overQuota) {
			vs = append(vs, v)
		}
	}
	return vs
}

const handOffFailedLine = "could not hand a letter to the backend"

// quotaBackend returns a broker, a backend on it logging to lines (log)
// and whose sends give up after a second: each attempt under a
// producer_request_hold quota ends at that deadline.
func quotaBackend(t *testing.T) (*pulsartest.Broker, *logtest.Lines, *slog.Logger, *pulsartopology.Backend[int]) {
	t.Helper()
	br := testbroker.Pulsar(t)
	lines := &logtest.Lines{}
	log := slog.New(slog.NewTextHandler(lines, nil))
	o := options(br, topic.Codec[int](topic.IntCodec{}))
	o.Logger = log
	o.OperationTimeout = time.Second
	return br, lines, log, newBackend(t, o)
}

// Guarantee: on the Pulsar backend, a dead-lettering refused by a DLQ over
// a producer backlog quota (producer_exception: refused at once;
// producer_request_hold: held until each attempt's deadline) fails with
// ErrSend; the source keeps the letter (Stats.HandOffKept), logs its first
// failure at ERROR and not one line per attempt, hands it off again, and
// once the quota clears the letter lands in the DLQ once, nothing lost,
// its handler not run again.
func TestADeadLetterRefusedByADLQOverItsBacklogQuotaLandsOnceTheQuotaClears(t *testing.T) {
	for _, policy := range []string{"producer_exception", "producer_request_hold"} {
		t.Run(policy, func(t *testing.T) {
			br, lines, log, be := quotaBackend(t)
			declaredQ, err := be.Declare(ctxT(t), build(t, topology.New("quota-dead").DLQ()))
			if err != nil {
				t.Fatal(err)
			}
			dlq := dlqTopic(be, declaredQ)
			testbroker.PulsarSizeQuota(t, br, quotaLimit, policy)
			// The dead subscription's backlog over the quota.
			if _, err := br.Publish(ctxT(t), dlq, pulsartest.Message{Payload: overQuota}); err != nil {
				t.Fatal(err)
			}
			q := &countingQueues{Queues: declaredQ}
			src, runs := quotaPipeline(t, q, log, func(int, int) error { return topology.Reject(errors.New("poison")) })
			if err := declaredQ.Publish(ctxT(t), topology.Letter[int]{Value: 7}); err != nil {
				t.Fatal(err)
			}

			const attempts = 3
			wait.Within(t, faultPatience, "the dead-lettering refused several times", func() bool { return q.failed.Load() >= attempts },
				func() string { return fmt.Sprintf("%d attempts failed, stats %+v", q.failed.Load(), src.Stats()) })
			if err := q.notSend(); err != nil {
				t.Errorf("a dead-lettering over the quota failed with %v, want an error wrapping ErrSend", err)
			}
			st := src.Stats()
			if st.HandOffKept != 1 || st.HandOffFailed != 1 || st.DeadLettered != 0 {
				t.Errorf("over the quota: HandOffKept %d, HandOffFailed %d, DeadLettered %d; want 1, 1, 0", st.HandOffKept, st.HandOffFailed, st.DeadLettered)
			}
			if n := lines.Count("level=ERROR", handOffFailedLine); n != 1 {
				t.Errorf("%d ERROR lines %q after %d failed attempts, want 1:\n%s", n, handOffFailedLine, q.failed.Load(), strings.Join(lines.Matching(handOffFailedLine), "\n"))
			}

			testbroker.PulsarSizeQuota(t, br, 0, "")
			wait.Within(t, faultPatience, "the dead letter taken once the quota is removed", func() bool {
				st := src.Stats()
				return st.DeadLettered == 1 && st.HandOffKept == 0
			}, func() string { return fmt.Sprintf("stats %+v", src.Stats()) })
			if got := letters(br, dlq); len(got) != 1 || got[0] != 7 {
				t.Errorf("the DLQ holds letters %v, want [7] once", got)
			}
			if n := runs(7); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	}
}
