package producer_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

// exitingRun is a Run that ends its goroutine with runtime.Goexit, as
// t.FailNow does in a test's fake source.
func exitingRun() {
	runtime.Goexit()
}

// Guarantee: a source's Run that ends its goroutine (runtime.Goexit, as
// t.FailNow does) is a failed run, as an error return is: its feeds are
// closed, the messages it delivered are dispatched once, the failure is
// logged once with the stack of the exit, the stage restarts it after the
// backoff and gives up under Restart's rules with a *RestartError whose
// last error is an *ExitError.
func TestRunGoexitIsAFailedRunAndIsRestarted(t *testing.T) {
	lines := &logtest.Lines{}
	log := slog.New(slog.NewTextHandler(lines, nil))
	feeds := make(chan *producer.Feed[item], 2)
	src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
		f := st.NewFeed("f", nil)
		feeds <- f
		if call == 1 {
			f.Deliver(message.New(item{Feed: "f", Seq: 0}, nil, 0), message.New(item{Feed: "f", Seq: 1}, nil, 1))
		}
		exitingRun()
		return nil
	}}
	out := newRecorder()
	h := start(t, "p", producer.Options[item]{Source: src,
		Restart: producer.Restart{MaxRestarts: 1, Window: time.Hour, Backoff: time.Millisecond}}, out, log)
	waitDone(t, h)
	if n := src.calls(); n != 2 {
		t.Errorf("Run called %d times, want 2 (an exit is restarted like an error)", n)
	}
	if got := out.seqs("f"); len(got) != 2 {
		t.Errorf("dispatched %v, want the 2 messages the exiting run delivered, once each", got)
	}
	close(feeds)
	for f := range feeds {
		if _, err := f.Acquire(context.Background(), 1); !errors.Is(err, producer.ErrFeedClosed) {
			t.Errorf("Acquire on a feed of an exited run = %v, want ErrFeedClosed", err)
		}
	}
	fatals := h.fatalErrs()
	if len(fatals) != 1 {
		t.Fatalf("fatal called %d times (%v), want once", len(fatals), fatals)
	}
	var re *producer.RestartError
	var ee *producer.ExitError
	if !errors.As(fatals[0], &re) || !errors.As(fatals[0], &ee) || ee.Method != "Run" || !errors.Is(fatals[0], message.ErrHandlerExited) {
		t.Errorf("fatal error %v, want a *RestartError wrapping an *ExitError of Run and message.ErrHandlerExited", fatals[0])
	}
	if st := h.p.Stages()[0].Status(); st.State != producer.StateFailed {
		t.Errorf("stage state %q, want %q", st.State, producer.StateFailed)
	}
	restarted := lines.Matching("source failed; restarting")
	if len(restarted) != 1 || !strings.Contains(restarted[0], "exitingRun") || !strings.Contains(restarted[0], "Goexit") {
		t.Errorf("restart log lines %q, want one naming the exit with its stack (exitingRun)", restarted)
	}
	gaveUp := lines.Matching("producer stage gave up")
	if len(gaveUp) != 1 || !strings.Contains(gaveUp[0], "exitingRun") {
		t.Errorf("give-up log lines %q, want one with the stack of the last exit (exitingRun)", gaveUp)
	}
}

// Guarantee: a Run that ends its goroutine after the stage was told to stop
// fetching ends the stage as a return would: Done closes, nothing is
// reported as a failure and no goroutine is left.
func TestRunGoexitWhileStoppingEndsTheStage(t *testing.T) {
	entered := make(chan struct{})
	src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
		st.NewFeed("f", nil)
		close(entered)
		<-ctx.Done()
		exitingRun()
		return nil
	}}
	h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
	<-entered
	h.p.StopFetching()
	waitDone(t, h)
	if n := src.calls(); n != 1 {
		t.Errorf("Run called %d times, want 1", n)
	}
	if errs := h.fatalErrs(); len(errs) != 0 {
		t.Errorf("fatal called with %v", errs)
	}
	wait.For(t, "the stage to be stopped", func() bool { return h.p.Stages()[0].Status().State == producer.StateStopped })
}

// panickingRun is a Run that panics.
func panickingRun() { panic("connection table corrupt") }

// Guarantee: a panic in the source's Run is logged with the stack of the
// panic, both when the stage restarts the source and when it gives up.
func TestRunPanicIsLoggedWithItsStack(t *testing.T) {
	lines := &logtest.Lines{}
	log := slog.New(slog.NewTextHandler(lines, nil))
	src := &scriptedSource{script: func(context.Context, int) error { panickingRun(); return nil }}
	h := start(t, "p", producer.Options[item]{Source: src,
		Restart: producer.Restart{MaxRestarts: 1, Window: time.Hour, Backoff: time.Millisecond}}, newRecorder(), log)
	waitDone(t, h)
	restarted := lines.Matching("source failed; restarting")
	if len(restarted) != 1 || !strings.Contains(restarted[0], "connection table corrupt") || !strings.Contains(restarted[0], "panickingRun") {
		t.Errorf("restart log lines %q, want one with the panic and its stack (panickingRun)", restarted)
	}
	gaveUp := lines.Matching("producer stage gave up")
	if len(gaveUp) != 1 || !strings.Contains(gaveUp[0], "panickingRun") {
		t.Errorf("give-up log lines %q, want one with the stack of the last panic (panickingRun)", gaveUp)
	}
}

// exitingGrant ends its goroutine, as t.FailNow in a test's fake source's
// grant callback does.
func exitingGrant() { runtime.Goexit() }

// Guarantee: a feed's grant callback that ends its goroutine
// (runtime.Goexit) when the stage's dispatcher calls it (a refill) does not
// stall the stage: one error line with the stack of the exit is logged,
// another goroutine takes over the dispatching, every delivered message
// is handed to the processors once, the feeds are charged and refilled,
// and Done closes when the stage stops.
func TestGrantCallbackGoexitOnTheDispatcherLeavesTheStageDispatching(t *testing.T) {
	const total = 200
	lines := &logtest.Lines{}
	log := slog.New(slog.NewTextHandler(lines, nil))
	granted := make(chan int, 1024)
	var exits atomic.Int32
	src := &scriptedSource{run: func(ctx context.Context, st *producer.Stage[item], call int) error {
		calls := 0
		feed := st.NewFeed("f", func(n int) {
			granted <- n
			calls++
			if calls%3 == 2 { // every third refill from the dispatcher exits
				exits.Add(1)
				exitingGrant()
			}
		})
		sent := 0
		for sent < total {
			select {
			case n := <-granted:
				batch := make([]*message.Message[item], 0, n)
				for ; n > 0 && sent < total; n-- {
					batch = append(batch, message.New(item{Feed: "f", Seq: sent}, nil, uint64(sent)))
					sent++
				}
				feed.Deliver(batch...)
			case <-ctx.Done():
				return nil
			}
		}
		<-ctx.Done()
		return nil
	}}
	out := newRecorder()
	h := start(t, "p", producer.Options[item]{Source: src,
		Flow: producer.Flow{Initial: 8, Threshold: 4, Refill: 4}}, out, log)
	wait.For(t, "every delivered message to be dispatched", func() bool { return out.count("f") == total })
	h.p.StopFetching()
	waitDone(t, h)
	if got := out.seqs("f"); len(got) != total {
		t.Errorf("dispatched %d messages, want %d once each", len(got), total)
	}
	exited := lines.Matching("dispatching goroutine (runtime.Goexit)")
	if int32(len(exited)) != exits.Load() || len(exited) == 0 {
		t.Fatalf("%d exit log lines for %d exits, want one each", len(exited), exits.Load())
	}
	if !strings.Contains(exited[0], "exitingGrant") || !strings.Contains(exited[0], "grant callback") {
		t.Errorf("exit log line %q, want the stack of the exit (exitingGrant) and where it happened", exited[0])
	}
}

// Guarantee: when the processors' code ends the stage's dispatching
// goroutine (runtime.Goexit) while it hands a chunk over, the chunk is
// charged to its feed as if handed over: the feed is refilled, and the
// source goes on delivering past its first window.
func TestPublishGoexitChargesTheChunkAndTheFeedIsRefilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &exitOnceOutput{recorder: newRecorder()}
		log, _ := newLogRecorder()
		src := newWithdrawSource("a")
		flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
		h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, rec, log)
		a := (<-src.ready)[0]
		if n := a.TryAcquire(flow.Initial); n != flow.Initial {
			t.Fatalf("TryAcquire = %d, want the Initial %d", n, flow.Initial)
		}
		a.Deliver(items(0, 10)...)
		synctest.Wait()
		if n := a.TryAcquire(100); n != flow.Refill {
			t.Fatalf("TryAcquire = %d after the chunk was handed over, want the refill of %d", n, flow.Refill)
		}
		deliverAgain(a, 10, flow.Refill)
		synctest.Wait()
		if got := rec.seqs("a"); !slices.Equal(got, []int{10, 11, 12, 13}) {
			t.Errorf("published %v, want the 4 messages delivered after the exit", got)
		}
		if st := a.Stats(); st.Dispatched != 14 || st.Remaining != flow.Refill {
			t.Errorf("Stats() = %+v, want 14 dispatched and the refill of %d remaining", st, flow.Refill)
		}
		close(src.done)
		waitDone(t, h)
	})
}

// exitOnceOutput is a recorder whose first Publish call ends its goroutine
// (runtime.Goexit) before it takes anything, as the processors'
// PartitionBy may.
type exitOnceOutput struct {
	*recorder
	exited atomic.Bool
}

func (o *exitOnceOutput) Publish(ctx context.Context, msgs []*message.Message[item]) (int, error) {
	if o.exited.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return o.recorder.Publish(ctx, msgs)
}

// Guarantee: when a feed's grant callback ends the stage's dispatching
// goroutine (runtime.Goexit) during a refill, the other feeds whose refill
// was due with it are still refilled, by the goroutine that takes over.
func TestGrantGoexitLeavesTheOtherDueRefillsGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
		inC, contC := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var grantsB []int
		feeds := make(chan [3]*producer.Feed[item], 1)
		src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
			var callsA, callsC int
			a := st.NewFeed("a", func(int) {
				if callsA++; callsA == 2 {
					exitingGrant()
				}
			})
			b := st.NewFeed("b", func(n int) {
				mu.Lock()
				grantsB = append(grantsB, n)
				mu.Unlock()
			})
			c := st.NewFeed("c", func(int) {
				if callsC++; callsC == 2 {
					// Hold the stage's refilling while a and b become due.
					close(inC)
					<-contC
				}
			})
			feeds <- [3]*producer.Feed[item]{a, b, c}
			<-ctx.Done()
			return ctx.Err()
		})
		log, _ := newLogRecorder()
		h := start(t, "p", producer.Options[item]{Source: src, Flow: flow}, roomyRecorder{newRecorder()}, log)
		fs := <-feeds
		fs[2].Deliver(feedItems("c", 0, 7)...)
		<-inC
		fs[0].Deliver(feedItems("a", 0, 7)...)
		fs[1].Deliver(feedItems("b", 0, 7)...)
		close(contC)
		synctest.Wait()
		mu.Lock()
		got := slices.Clone(grantsB)
		mu.Unlock()
		if want := []int{flow.Initial, flow.Refill}; !slices.Equal(got, want) {
			t.Errorf("feed b got grants %v, want %v: its refill was due with the one whose callback exited", got, want)
		}
		h.p.StopFetching()
		waitDone(t, h)
	})
}
