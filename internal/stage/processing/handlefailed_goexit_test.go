package processing_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

// handleFailedPanicLog is what a processor logs when HandleFailed panics.
const handleFailedPanicLog = "HandleFailed panicked; acknowledging the messages as they were"

// seenSet records the ids of the messages HandleFailed saw.
type seenSet struct {
	mu  sync.Mutex
	ids map[uint64]bool
}

func (s *seenSet) add(msgs []*message.Message[int]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[uint64]bool{}
	}
	for _, m := range msgs {
		s.ids[uint64(m.Data)] = true
	}
}

func (s *seenSet) has(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// exitOn3 is user code (a handler, or Prepare) that ends its goroutine
// (runtime.Goexit) on message 3, or panics there when panics is set.
func exitOn3(panics bool) func(m *message.Message[int]) {
	return func(m *message.Message[int]) {
		if m.Data != 3 {
			return
		}
		if panics {
			panic("message 3")
		}
		runtime.Goexit()
	}
}

// Guarantee: the messages a handler or Prepare failed by ending its
// goroutine (runtime.Goexit) go through HandleFailed before they are
// acknowledged, as those of a handler or Prepare that panics do (Broadway
// calls handle_failed for messages that failed because handle_message
// raised): HandleFailed sees every one of them, what it sets (here the
// disposition) is what the acknowledger gets, each message is
// acknowledged once, and another processor takes over.
func TestHandleFailedSeesTheMessagesAHandlerOrPrepareExitFailed(t *testing.T) {
	for _, c := range []struct {
		name           string
		panics, inPrep bool
	}{
		{"handler panics", true, false},
		{"handler exits", false, false},
		{"Prepare panics", true, true},
		{"Prepare exits", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen seenSet
			user := exitOn3(c.panics)
			opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
				Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
					if !c.inPrep {
						user(m)
					}
					return m.Data, nil
				},
				HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
					seen.add(failed)
					for _, m := range failed {
						m.SetDisposition(acker.DispositionDiscard)
					}
				},
			}
			if c.inPrep {
				opts.Prepare = func(_ context.Context, msgs []*message.Message[int]) error {
					for _, m := range msgs {
						user(m)
					}
					return nil
				}
			}
			s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(&logtest.Records{})})
			run(t, s)
			rec := acker.NewRecorder(false)
			publish(t, s, ints(rec, 0, 10))
			waitAcks(t, rec, 10)
			publish(t, s, ints(rec, 10, 10))
			waitAcks(t, rec, 20)
			drain(t, s)
			assertOnce(t, rec, seq(0, 20))
			failed := rec.Failed()
			if len(failed) == 0 || !seen.has(3) {
				t.Errorf("HandleFailed saw message 3: %v; %d messages failed", seen.has(3), len(failed))
			}
			for _, o := range failed {
				if !seen.has(o.ID) {
					t.Errorf("message %d failed (%v) without HandleFailed seeing it", o.ID, o.Err)
				}
				if o.Disposition != acker.DispositionDiscard {
					t.Errorf("message %d acknowledged with disposition %v, want the %v HandleFailed set", o.ID, o.Disposition, acker.DispositionDiscard)
				}
				if want := c.panics || errors.Is(o.Err, message.ErrHandlerExited); !want {
					t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
				}
			}
		})
	}
}

// Guarantee: a HandleFailed called for the messages of a handler that
// ended its goroutine (runtime.Goexit) may itself panic or end its
// goroutine: every message of the chunk is still acknowledged once, as
// failed with message.ErrHandlerExited; each event is logged once (the
// handler's exit, then HandleFailed's panic or exit); and another
// processor takes over and handles later messages.
func TestHandleFailedPanicOrGoexitAfterAHandlerExitKeepsEveryOutcome(t *testing.T) {
	for _, c := range []string{"panics", "exits"} {
		t.Run(c, func(t *testing.T) {
			log := &logtest.Records{}
			exit := stagetest.GoexitOnce()
			opts := processor.Options[int, int]{Concurrency: 1, MaxDemand: 10,
				Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
					exitOn3(false)(m)
					return m.Data, nil
				},
				HandleFailed: func(context.Context, []*message.Message[int]) {
					if c == "panics" {
						panic("HandleFailed")
					}
					exit()
				},
			}
			s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(log)})
			run(t, s)
			rec := acker.NewRecorder(false)
			publish(t, s, ints(rec, 0, 10))
			waitAcks(t, rec, 10)
			publish(t, s, ints(rec, 10, 10))
			waitAcks(t, rec, 20)
			if got := s.Running(); len(got) != 1 {
				t.Errorf("processors running: %v, want one", got)
			}
			drain(t, s)
			assertOnce(t, rec, seq(0, 20))
			stagetest.ExpectOnlyFirstExited(t, rec, 10, "chunk")
			if rec.Count(3) != 1 || len(rec.Failed()) == 0 {
				t.Errorf("message 3 acknowledged %d times; %d failed", rec.Count(3), len(rec.Failed()))
			}
			wantExits, wantPanics := 1, 1
			if c == "exits" {
				wantExits, wantPanics = 2, 0
			}
			if n := log.Count(slog.LevelError, processing.ExitedLog); n != wantExits {
				t.Errorf("%d log lines %q, want %d", n, processing.ExitedLog, wantExits)
			}
			if n := log.Count(slog.LevelError, handleFailedPanicLog); n != wantPanics {
				t.Errorf("%d log lines %q, want %d", n, handleFailedPanicLog, wantPanics)
			}
		})
	}
}

// cutChunk runs one chunk of 5 messages whose first message's handler
// makes the hard stop and fails it, so that the other 4 are not handled,
// with handleFailed as the processors' HandleFailed; it returns once the
// processors have returned.
func cutChunk(t *testing.T, handleFailed func(context.Context, []*message.Message[int])) (*processing.Pool[int, int], *acker.Recorder, *logtest.Records) {
	t.Helper()
	rec := acker.NewRecorder(false)
	stop := make(chan context.CancelFunc, 1)
	log := &logtest.Records{}
	opts := processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 0 {
				(<-stop)() // the hard stop: the rest of the chunk is not handled
				return 0, errors.New("bad message")
			}
			return m.Data, nil
		},
		HandleFailed: handleFailed,
	}
	s := processing.New(opts.WithDefaults(), processing.Config[int]{Name: t.Name(), Logger: slog.New(log)})
	publish(t, s, ints(rec, 0, 5)) // one chunk: queued before the processor starts
	stop <- run(t, s)
	waitDone(t, stagetest.Done(s), "the processors to return")
	return s, rec, log
}

// Guarantee: when the hard stop cuts a chunk short, the failed message is
// reported, the messages not handled stay unacknowledged and counted
// unhandled, and one warning says how many.
func TestAChunkTheHardStopCutShortLogsItsUnhandledMessagesOnce(t *testing.T) {
	s, rec, log := cutChunk(t, func(context.Context, []*message.Message[int]) {})
	assertOnce(t, rec, seq(0, 1))
	if st := s.Stats(0); st.In != 5 || st.Failed.Total() != 1 || st.Succeeded != 0 || st.Unhandled != 4 {
		t.Errorf("Stats: In %d, Failed %d, Succeeded %d, Unhandled %d; want 5, 1, 0, 4", st.In, st.Failed.Total(), st.Succeeded, st.Unhandled)
	}
	if n := log.Count(slog.LevelWarn, processing.CutLog); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, processing.CutLog)
	}
}

// Guarantee: when HandleFailed ends its goroutine (runtime.Goexit) in a
// chunk whose handling the hard stop cut short, every message of the chunk
// fails with message.ErrHandlerExited and is reported once, and Stats
// counts each of them once, as failed: none is counted unhandled as well,
// and no line says they stay unacknowledged.
func TestHandleFailedGoexitInACutChunkCountsEachMessageOnce(t *testing.T) {
	s, rec, log := cutChunk(t, func(context.Context, []*message.Message[int]) { runtime.Goexit() })
	assertOnce(t, rec, seq(0, 5))
	for _, o := range rec.Failed() {
		if o.ID != 0 && !errors.Is(o.Err, message.ErrHandlerExited) {
			t.Errorf("message %d failed with %v, want message.ErrHandlerExited", o.ID, o.Err)
		}
	}
	if st := s.Stats(0); st.In != 5 || st.Failed.Total() != 5 || st.Succeeded != 0 || st.Unhandled != 0 {
		t.Errorf("Stats: In %d, Failed %d, Succeeded %d, Unhandled %d; want 5, 5, 0, 0", st.In, st.Failed.Total(), st.Succeeded, st.Unhandled)
	}
	if n := log.Count(slog.LevelWarn, processing.CutLog); n != 0 {
		t.Errorf("%d log lines %q, though every message of the chunk was reported", n, processing.CutLog)
	}
	if n := log.Count(slog.LevelError, processing.ExitedLog); n != 1 {
		t.Errorf("%d log lines %q, want 1", n, processing.ExitedLog)
	}
}
