package processing_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/batcher"
	"github.com/boulevard-go/boulevard/internal/queue"
	"github.com/boulevard-go/boulevard/internal/stage/batching"
	"github.com/boulevard-go/boulevard/internal/stage/processing"
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/processor"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// patience bounds every wait in these tests; it only matters when a test is
// about to fail.
const patience = 10 * time.Second

// newStage builds a processor stage without starting it.
func newStage[In, Out any](t *testing.T, opts processor.Options[In, Out], routes ...processing.NamedRoute[Out]) *processing.Pool[In, Out] {
	t.Helper()
	return processing.New(opts.WithDefaults(), processing.Config[Out]{Name: t.Name(), Routes: routes})
}

// run starts s. The test's cleanup cancels the stage's context and waits for
// every goroutine it started. The returned function cancels the context
// (the hard stop).
func run[In, Out any](t *testing.T, s *processing.Pool[In, Out]) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := stagetest.Go(ctx, s)
	t.Cleanup(func() {
		cancel()
		stagetest.WaitStopped(t, done, patience)
	})
	return cancel
}

// publish hands msgs to s and fails the test unless all were taken.
func publish[In, Out any](t *testing.T, s *processing.Pool[In, Out], msgs []*message.Message[In]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if n, err := s.Publish(ctx, msgs); err != nil || n != len(msgs) {
		t.Fatalf("Publish took %d of %d messages: %v", n, len(msgs), err)
	}
}

// waitDone waits for ch to be closed.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// drain closes the input of s and waits until every processor returned.
func drain[In, Out any](t *testing.T, s *processing.Pool[In, Out]) {
	t.Helper()
	s.CloseInput()
	waitDone(t, stagetest.Done(s), "the processors to return")
}

// waitAcks waits until rec recorded at least n outcomes.
func waitAcks(t *testing.T, rec *acker.Recorder, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := rec.Wait(ctx, n); err != nil {
		t.Fatalf("%d outcomes recorded, want %d: %v", rec.Total(), n, err)
	}
}

// ints returns n messages whose data and ack id are from, from+1, ….
func ints(ack acker.Acknowledger, from, n int) []*message.Message[int] {
	out := make([]*message.Message[int], n)
	for i := range out {
		out[i] = message.New(from+i, ack, uint64(from+i))
	}
	return out
}

// ids returns the ack ids of os.
func ids(os []acker.Outcome) []uint64 {
	out := make([]uint64, len(os))
	for i, o := range os {
		out[i] = o.ID
	}
	slices.Sort(out)
	return out
}

// seq returns from, from+1, …, to-1 as ack ids.
func seq(from, to int) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, uint64(i))
	}
	return out
}

// assertOnce fails unless every id in want was acknowledged exactly once.
func assertOnce(t *testing.T, rec *acker.Recorder, want []uint64) {
	t.Helper()
	counts := rec.Counts()
	for _, id := range want {
		if counts[id] != 1 {
			t.Errorf("message %d acknowledged %d times, want once", id, counts[id])
		}
	}
	if len(counts) != len(want) {
		t.Errorf("%d distinct messages acknowledged, want %d", len(counts), len(want))
	}
}

// goid returns the current goroutine's id. Each processor is one goroutine
// for its whole life, so the id identifies the processor that runs a
// handler.
func goid() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, err := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// fakeRoute records what processors route to it.
type fakeRoute[T any] struct {
	mu   sync.Mutex
	msgs []*message.Message[T]
	err  error // returned after taking nothing, when set
}

func (r *fakeRoute[T]) Publish(_ context.Context, msgs []*message.Message[T]) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	r.msgs = append(r.msgs, msgs...) // msgs itself is reused by the caller
	return len(msgs), nil
}

func (r *fakeRoute[T]) routed() []*message.Message[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func routedIDs[T any](msgs []*message.Message[T]) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		_, out[i], _ = m.Acknowledger()
	}
	slices.Sort(out)
	return out
}

// Guarantee: without batchers every message is acknowledged exactly once, and
// outcomes are grouped: one Ack call per acknowledger per chunk, each call
// carrying only that acknowledger's messages.
func TestEveryMessageAckedOnceGroupedPerAcknowledger(t *testing.T) {
	const (
		n           = 4000
		nAcks       = 4
		concurrency = 4
		maxDemand   = 10
		// Documented queue capacity: max(2·Concurrency·MaxDemand, 64).
		prefill = 2 * concurrency * maxDemand
	)
	recs := make([]*acker.Recorder, nAcks)
	index := make(map[acker.Acknowledger]int)
	for i := range recs {
		recs[i] = acker.NewRecorder(false)
		index[recs[i]] = i
	}
	var chunks, expectedCalls, fullChunks atomic.Int64
	var handled atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: concurrency,
		MaxDemand:   maxDemand,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			chunks.Add(1)
			if len(msgs) == maxDemand {
				fullChunks.Add(1)
			}
			distinct := map[acker.Acknowledger]bool{}
			for _, m := range msgs {
				a, _, _ := m.Acknowledger()
				distinct[a] = true
			}
			expectedCalls.Add(int64(len(distinct)))
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			return m.Data, nil
		},
	})
	msgs := make([]*message.Message[int], n)
	for i := range msgs {
		msgs[i] = message.New(i, recs[i%nAcks], uint64(i))
	}
	// Fill the queue before the processors start, so that they find it full.
	publish(t, s, msgs[:prefill])
	run(t, s)
	publish(t, s, msgs[prefill:])
	drain(t, s)

	if got := handled.Load(); got != n {
		t.Fatalf("handler called %d times, want %d", got, n)
	}
	calls, biggest := 0, 0
	for i, rec := range recs {
		var want []uint64
		for id := i; id < n; id += nAcks {
			want = append(want, uint64(id))
		}
		assertOnce(t, rec, want)
		for _, c := range rec.Calls() {
			calls++
			biggest = max(biggest, len(c.Successful)+len(c.Failed))
			for _, o := range append(c.Successful, c.Failed...) {
				if int(o.ID)%nAcks != i {
					t.Fatalf("acknowledger %d got message %d of acknowledger %d", i, o.ID, int(o.ID)%nAcks)
				}
			}
		}
	}
	if want := int(expectedCalls.Load()); calls != want {
		t.Errorf("%d Ack calls, want one per acknowledger per chunk = %d", calls, want)
	}
	if limit := int(chunks.Load()) * nAcks; calls > limit {
		t.Errorf("%d Ack calls for %d chunks and %d acknowledgers", calls, chunks.Load(), nAcks)
	}
	if fullChunks.Load() == 0 || biggest < 2 {
		t.Errorf("with a full queue, chunks should be full and calls carry several messages: %d full chunks, biggest call %d",
			fullChunks.Load(), biggest)
	}
	if calls >= n {
		t.Errorf("%d Ack calls for %d messages: outcomes are not grouped", calls, n)
	}
}

// Guarantee: a handler error fails that message only, with the error
// preserved; the other messages succeed.
func TestHandlerErrorFailsOnlyThatMessage(t *testing.T) {
	errBad := errors.New("bad message")
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 7 {
				return 0, fmt.Errorf("handling %d: %w", m.Data, errBad)
			}
			return m.Data, nil
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 20))
	drain(t, s)

	assertOnce(t, rec, seq(0, 20))
	failed := rec.Failed()
	if len(failed) != 1 || failed[0].ID != 7 {
		t.Fatalf("failed outcomes %v, want only message 7", ids(failed))
	}
	if !errors.Is(failed[0].Err, errBad) || failed[0].Err.Error() != "handling 7: bad message" {
		t.Errorf("failed with %v, want the handler's error", failed[0].Err)
	}
	if got := ids(rec.Successful()); len(got) != 19 || slices.Contains(got, 7) {
		t.Errorf("successful outcomes %v, want every message but 7", got)
	}
}

// Guarantee: a handler panic fails that message with a *message.PanicError
// and the processor keeps handling later messages.
func TestHandlerPanicFailsMessageAndStageContinues(t *testing.T) {
	rec := acker.NewRecorder(false)
	var handled atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			if m.Data == 2 {
				panic("boom")
			}
			return m.Data, nil
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 5))
	waitAcks(t, rec, 5)
	// The single processor survived the panic: it handles what comes next.
	publish(t, s, ints(rec, 5, 5))
	drain(t, s)

	assertOnce(t, rec, seq(0, 10))
	failed := rec.Failed()
	if len(failed) != 1 || failed[0].ID != 2 {
		t.Fatalf("failed outcomes %v, want only message 2", ids(failed))
	}
	var pe *message.PanicError
	if !errors.As(failed[0].Err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Errorf("failed with %#v, want a *message.PanicError with value boom and a stack", failed[0].Err)
	}
	if handled.Load() != 10 {
		t.Errorf("handler called %d times, want 10", handled.Load())
	}
}

// Guarantee: within one chunk, every handler panic fails only its own
// message, with a *message.PanicError that carries the panic's value and
// the stack of the handler that panicked, and the processor goes on with
// the rest of the chunk in order: the first message of a chunk, the last,
// and two in a row included.
func TestHandlerPanicsInOneChunkFailOnlyTheirMessages(t *testing.T) {
	rec := acker.NewRecorder(false)
	panics := map[int]bool{0: true, 4: true, 5: true, 9: true, 13: true}
	errBad := errors.New("bad")
	var order []int // one processor: no lock needed
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   10,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			order = append(order, m.Data)
			if panics[m.Data] {
				panic(fmt.Sprintf("boom %d", m.Data))
			}
			if m.Data == 7 {
				return 0, errBad
			}
			return m.Data, nil
		},
	})
	// Queued before the processor runs: it takes them as two chunks of 10.
	publish(t, s, ints(rec, 0, 20))
	run(t, s)
	drain(t, s)

	assertOnce(t, rec, seq(0, 20))
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
		t.Errorf("handler called for %v, want every message once, in order", order)
	}
	failed := rec.Failed()
	if got := ids(failed); !slices.Equal(got, []uint64{0, 4, 5, 7, 9, 13}) {
		t.Fatalf("failed outcomes %v, want 0, 4, 5, 7, 9 and 13", got)
	}
	for _, o := range failed {
		if o.ID == 7 {
			if !errors.Is(o.Err, errBad) {
				t.Errorf("message 7 failed with %v, want the handler's error", o.Err)
			}
			continue
		}
		var pe *message.PanicError
		if !errors.As(o.Err, &pe) || pe.Value != fmt.Sprintf("boom %d", o.ID) {
			t.Errorf("message %d failed with %#v, want a *message.PanicError with value \"boom %d\"", o.ID, o.Err, o.ID)
			continue
		}
		if !strings.Contains(string(pe.Stack), "TestHandlerPanicsInOneChunkFailOnlyTheirMessages.func") {
			t.Errorf("message %d: the panic's stack does not show the handler that panicked:\n%s", o.ID, pe.Stack)
		}
	}
}

type meta struct{ partition int }

// Guarantee: when the handler changes the payload type, the acknowledger
// receives the new payload with the message's metadata and ack id and data.
func TestConvertedPayloadReachesAcknowledger(t *testing.T) {
	rec := acker.NewRecorder(true)
	s := newStage(t, processor.Options[int, string]{
		Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (string, error) {
			return "v" + strconv.Itoa(m.Data*2), nil
		},
	})
	run(t, s)
	msgs := ints(rec, 0, 100) // more than one slab of converted messages
	for i, m := range msgs {
		m.Metadata = &meta{partition: i % 3}
		m.SetAckData(fmt.Sprintf("ack-%d", i))
	}
	publish(t, s, msgs)
	drain(t, s)

	assertOnce(t, rec, seq(0, 100))
	for _, o := range rec.Successful() {
		om, ok := o.Message.(*message.Message[string])
		if !ok {
			t.Fatalf("outcome %d carries %T, want *message.Message[string]", o.ID, o.Message)
		}
		if want := "v" + strconv.Itoa(int(o.ID)*2); om.Data != want {
			t.Errorf("message %d: payload %q, want %q", o.ID, om.Data, want)
		}
		if md, ok := message.MetadataAs[*meta](om); !ok || md.partition != int(o.ID)%3 {
			t.Errorf("message %d: metadata %v, want partition %d", o.ID, om.Metadata, o.ID%3)
		}
		if want := fmt.Sprintf("ack-%d", o.ID); o.Data != want {
			t.Errorf("message %d: ack data %v, want %q", o.ID, o.Data, want)
		}
		if a, id, _ := om.Acknowledger(); a != acker.Acknowledger(rec) || id != o.ID {
			t.Errorf("message %d: acknowledger %v id %d after conversion", o.ID, a, id)
		}
	}
}

// Guarantee: when the handler changes the payload type, the route receives
// the new payload with the metadata, acknowledger, ack id, batcher, batch key
// and batch mode the handler gave the message.
func TestConvertedPayloadReachesRouteWithRouting(t *testing.T) {
	rec := acker.NewRecorder(false)
	route := &fakeRoute[string]{}
	s := newStage(t, processor.Options[int, string]{
		Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (string, error) {
			m.SetBatcher("out")
			m.SetBatchKey("key-" + strconv.Itoa(m.Data%4))
			if m.Data%5 == 0 {
				m.SetBatchMode(message.Flush)
			}
			return strconv.Itoa(m.Data), nil
		},
	}, processing.NamedRoute[string]{Name: "out", Route: route})
	run(t, s)
	msgs := ints(rec, 0, 100)
	for i, m := range msgs {
		m.Metadata = &meta{partition: i}
		m.SetAckData(i)
	}
	publish(t, s, msgs)
	drain(t, s)

	if rec.Total() != 0 {
		t.Errorf("%d messages acknowledged by the processors, want 0: the batcher acknowledges routed messages", rec.Total())
	}
	got := route.routed()
	if !slices.Equal(routedIDs(got), seq(0, 100)) {
		t.Fatalf("routed ids %v, want 0..99 once each", routedIDs(got))
	}
	for _, m := range got {
		a, id, data := m.Acknowledger()
		i := int(id)
		if a != acker.Acknowledger(rec) || data != i {
			t.Errorf("message %d: acknowledger %v ack data %v", i, a, data)
		}
		if m.Data != strconv.Itoa(i) {
			t.Errorf("message %d: payload %q", i, m.Data)
		}
		if md, ok := message.MetadataAs[*meta](m); !ok || md.partition != i {
			t.Errorf("message %d: metadata %v", i, m.Metadata)
		}
		if m.Batcher() != "out" || m.BatchKey() != "key-"+strconv.Itoa(i%4) {
			t.Errorf("message %d: batcher %q key %q", i, m.Batcher(), m.BatchKey())
		}
		if want := map[bool]message.BatchMode{true: message.Flush, false: message.Bulk}[i%5 == 0]; m.BatchMode() != want {
			t.Errorf("message %d: batch mode %v, want %v", i, m.BatchMode(), want)
		}
		if m.Failed() {
			t.Errorf("message %d routed as failed: %v", i, m.Err())
		}
	}
}

type keyed struct {
	key string
	seq int
}

// Guarantee: with PartitionBy, messages with the same key are handled by the
// same processor in publish order, and different keys spread over the
// processors.
func TestPartitionBySameKeySameProcessorInOrder(t *testing.T) {
	const (
		concurrency = 4
		nKeys       = 16
		n           = 2000
	)
	type handling struct {
		g   uint64
		seq int
	}
	var mu sync.Mutex
	byKey := map[string][]handling{}
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[keyed, keyed]{
		Concurrency: concurrency,
		MaxDemand:   3,
		PartitionBy: func(m *message.Message[keyed]) string { return m.Data.key },
		Handle: func(_ context.Context, m *message.Message[keyed]) (keyed, error) {
			g := goid()
			mu.Lock()
			byKey[m.Data.key] = append(byKey[m.Data.key], handling{g, m.Data.seq})
			mu.Unlock()
			runtime.Gosched() // let the other processors interleave
			return m.Data, nil
		},
	})
	run(t, s)
	msgs := make([]*message.Message[keyed], n)
	partitions := map[int]bool{}
	for i := range msgs {
		k := "key-" + strconv.Itoa(i%nKeys)
		partitions[queue.KeyPartition(k, concurrency)] = true
		msgs[i] = message.New(keyed{key: k, seq: i}, rec, uint64(i))
	}
	if len(partitions) < 2 {
		t.Fatalf("test setup: the keys map to %d partition(s), need several", len(partitions))
	}
	// Several publish calls, as a producer would make.
	for i := 0; i < n; i += 100 {
		publish(t, s, msgs[i:i+100])
	}
	drain(t, s)

	assertOnce(t, rec, seq(0, n))
	processors := map[uint64]bool{}
	for k, hs := range byKey {
		if len(hs) != n/nKeys {
			t.Errorf("key %s: %d messages handled, want %d", k, len(hs), n/nKeys)
		}
		for i, h := range hs {
			if h.g != hs[0].g {
				t.Fatalf("key %s handled by two processors (goroutines %d and %d)", k, hs[0].g, h.g)
			}
			if i > 0 && h.seq <= hs[i-1].seq {
				t.Fatalf("key %s: message %d handled after %d, want publish order", k, h.seq, hs[i-1].seq)
			}
		}
		processors[hs[0].g] = true
	}
	if len(processors) != len(partitions) {
		t.Errorf("keys handled by %d processors, want %d (one per partition the keys map to)", len(processors), len(partitions))
	}
}

// Guarantee: Prepare is called with chunks of at most MaxDemand messages,
// before the handler sees them, and together the chunks hold every message
// once.
func TestPrepareSeesChunksAtMostMaxDemand(t *testing.T) {
	const maxDemand = 5
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	prepared := map[int]int{}
	var early atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 2,
		MaxDemand:   maxDemand,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			if len(msgs) == 0 || len(msgs) > maxDemand {
				t.Errorf("Prepare got a chunk of %d messages, want 1..%d", len(msgs), maxDemand)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				prepared[m.Data]++
				m.Data *= 10 // Prepare may change the messages
			}
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data%10 != 0 {
				early.Add(1)
			}
			return m.Data, nil
		},
	})
	run(t, s)
	for i := 0; i < 200; i += 40 {
		publish(t, s, ints(rec, i, 40))
	}
	drain(t, s)

	assertOnce(t, rec, seq(0, 200))
	if rec.FailedCount() != 0 {
		t.Errorf("%d messages failed", rec.FailedCount())
	}
	for i := range 200 {
		if prepared[i] != 1 {
			t.Errorf("message %d prepared %d times, want once", i, prepared[i])
		}
	}
	if early.Load() != 0 {
		t.Errorf("handler saw %d messages before Prepare changed them", early.Load())
	}
}

// Guarantee: an error or a panic in Prepare fails every message of its chunk
// (with that error, or a *message.PanicError), the handler does not see them,
// and the other chunks are unaffected.
func TestPrepareErrorOrPanicFailsWholeChunk(t *testing.T) {
	errPrepare := errors.New("prepare failed")
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	want := map[uint64]string{} // message id -> "error" or "panic"
	handled := map[int]bool{}
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 2,
		MaxDemand:   5,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			kind := ""
			for _, m := range msgs {
				switch m.Data {
				case 42:
					kind = "error"
				case 77:
					if kind == "" {
						kind = "panic"
					}
				}
			}
			if kind == "" {
				return nil
			}
			mu.Lock()
			for _, m := range msgs {
				want[uint64(m.Data)] = kind
			}
			mu.Unlock()
			if kind == "panic" {
				panic("prepare exploded")
			}
			return errPrepare
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			mu.Lock()
			handled[m.Data] = true
			mu.Unlock()
			return m.Data, nil
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 100))
	drain(t, s)

	assertOnce(t, rec, seq(0, 100))
	if len(want) == 0 {
		t.Fatal("Prepare never saw messages 42 and 77")
	}
	failed := rec.Failed()
	if len(failed) != len(want) {
		t.Errorf("failed outcomes %v, want the chunks of 42 and 77: %v", ids(failed), want)
	}
	for _, o := range failed {
		var pe *message.PanicError
		switch want[o.ID] {
		case "error":
			if !errors.Is(o.Err, errPrepare) {
				t.Errorf("message %d failed with %v, want the Prepare error", o.ID, o.Err)
			}
		case "panic":
			if !errors.As(o.Err, &pe) || pe.Value != "prepare exploded" {
				t.Errorf("message %d failed with %v, want a *message.PanicError", o.ID, o.Err)
			}
		default:
			t.Errorf("message %d failed with %v but its chunk was prepared fine", o.ID, o.Err)
		}
	}
	for id := range want {
		if handled[int(id)] {
			t.Errorf("handler saw message %d whose chunk failed in Prepare", id)
		}
	}
}

// Guarantee: Prepare may fail single messages; only those fail and the
// handler does not see them.
func TestPrepareMayFailSingleMessages(t *testing.T) {
	errOne := errors.New("not this one")
	rec := acker.NewRecorder(false)
	var sawFailed atomic.Bool
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			for _, m := range msgs {
				if m.Data == 3 {
					m.Fail(errOne)
				}
			}
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data == 3 {
				sawFailed.Store(true)
			}
			return m.Data, nil
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 10))
	drain(t, s)

	assertOnce(t, rec, seq(0, 10))
	if f := rec.Failed(); len(f) != 1 || f[0].ID != 3 || !errors.Is(f[0].Err, errOne) {
		t.Errorf("failed outcomes %v, want message 3 with Prepare's error", f)
	}
	if sawFailed.Load() {
		t.Error("handler saw the message Prepare failed")
	}
}

// Guarantee: HandleFailed runs before the failed messages are acknowledged,
// sees only the failed ones, and the acknowledger sees the disposition it
// sets.
func TestHandleFailedBeforeAckOnlyFailedDispositionKept(t *testing.T) {
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	var seen []uint64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data%3 == 0 {
				return 0, fmt.Errorf("bad %d", m.Data)
			}
			return m.Data, nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
			for _, m := range failed {
				_, id, _ := m.Acknowledger()
				if !m.Failed() {
					t.Errorf("HandleFailed got message %d, which did not fail", id)
				}
				if n := rec.Count(id); n != 0 {
					t.Errorf("message %d acknowledged before HandleFailed saw it", id)
				}
				if id%2 == 0 {
					m.SetDisposition(acker.DispositionDiscard)
				} else {
					m.SetDisposition(acker.DispositionRetry)
				}
				mu.Lock()
				seen = append(seen, id)
				mu.Unlock()
			}
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 60))
	drain(t, s)

	assertOnce(t, rec, seq(0, 60))
	var wantFailed []uint64
	for i := 0; i < 60; i += 3 {
		wantFailed = append(wantFailed, uint64(i))
	}
	slices.Sort(seen)
	if !slices.Equal(seen, wantFailed) {
		t.Errorf("HandleFailed saw %v, want %v", seen, wantFailed)
	}
	failed := rec.Failed()
	if !slices.Equal(ids(failed), wantFailed) {
		t.Fatalf("failed outcomes %v, want %v", ids(failed), wantFailed)
	}
	for _, o := range failed {
		want := acker.DispositionRetry
		if o.ID%2 == 0 {
			want = acker.DispositionDiscard
		}
		if o.Disposition != want || o.Err.Error() != fmt.Sprintf("bad %d", o.ID) {
			t.Errorf("message %d: disposition %v err %v, want %v and the handler's error", o.ID, o.Disposition, o.Err, want)
		}
	}
}

// Guarantee: a panic in HandleFailed is recovered: the failed messages are
// still acknowledged as failed and the processor keeps going.
func TestHandleFailedPanicRecovered(t *testing.T) {
	errBad := errors.New("bad")
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			if m.Data%2 == 0 {
				return 0, errBad
			}
			return m.Data, nil
		},
		HandleFailed: func(context.Context, []*message.Message[int]) { panic("hook exploded") },
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 4))
	waitAcks(t, rec, 4)
	publish(t, s, ints(rec, 4, 4))
	drain(t, s)

	assertOnce(t, rec, seq(0, 8))
	failed := rec.Failed()
	if !slices.Equal(ids(failed), []uint64{0, 2, 4, 6}) {
		t.Fatalf("failed outcomes %v, want the even messages", ids(failed))
	}
	for _, o := range failed {
		if !errors.Is(o.Err, errBad) || o.Disposition != acker.DispositionDefault {
			t.Errorf("message %d: err %v disposition %v, want the handler's error, default", o.ID, o.Err, o.Disposition)
		}
	}
}

// Guarantee: Prepare and HandleFailed may do what they like with the slice
// they are given (filter it in place with slices.DeleteFunc, which clears
// the elements it removes): the processor still handles every message of
// the chunk and acknowledges each exactly once, and keeps running.
func TestPrepareAndHandleFailedMayRewriteTheirSlice(t *testing.T) {
	errBad := errors.New("bad")
	rec := acker.NewRecorder(false)
	var handled atomic.Int32
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   10,
		Prepare: func(_ context.Context, msgs []*message.Message[int]) error {
			_ = slices.DeleteFunc(msgs, func(m *message.Message[int]) bool { return m.Data%2 == 0 })
			return nil
		},
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			if m.Data%3 == 0 {
				return 0, errBad
			}
			return m.Data, nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
			_ = slices.Delete(failed, 0, len(failed))
		},
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 20))
	drain(t, s)

	assertOnce(t, rec, seq(0, 20))
	if n := handled.Load(); n != 20 {
		t.Errorf("handler called %d times, want 20: rewriting Prepare's slice changed which messages were handled", n)
	}
	if got, want := ids(rec.Failed()), []uint64{0, 3, 6, 9, 12, 15, 18}; !slices.Equal(got, want) {
		t.Errorf("failed outcomes %v, want %v", got, want)
	}
}

// Guarantee: a message goes to the route named by its batcher; a message
// routed to a batcher that does not exist fails with an
// *processor.UnknownBatcherError naming it, and is acknowledged by the
// processor.
func TestRoutesByBatcherNameUnknownBatcherFails(t *testing.T) {
	rec := acker.NewRecorder(false)
	a, b := &fakeRoute[int]{}, &fakeRoute[int]{}
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 2,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			switch m.Data % 4 {
			case 0:
				m.SetBatcher("a")
			case 1:
				m.SetBatcher("b")
			case 2:
				m.SetBatcher("nope")
			} // case 3: left to message.DefaultBatcher, which this stage lacks
			return m.Data, nil
		},
	}, processing.NamedRoute[int]{Name: "a", Route: a}, processing.NamedRoute[int]{Name: "b", Route: b})
	run(t, s)
	publish(t, s, ints(rec, 0, 40))
	drain(t, s)

	var wantA, wantB, wantFailed []uint64
	for i := range 40 {
		switch i % 4 {
		case 0:
			wantA = append(wantA, uint64(i))
		case 1:
			wantB = append(wantB, uint64(i))
		default:
			wantFailed = append(wantFailed, uint64(i))
		}
	}
	if got := routedIDs(a.routed()); !slices.Equal(got, wantA) {
		t.Errorf("route a got %v, want %v", got, wantA)
	}
	if got := routedIDs(b.routed()); !slices.Equal(got, wantB) {
		t.Errorf("route b got %v, want %v", got, wantB)
	}
	assertOnce(t, rec, wantFailed)
	if len(rec.Successful()) != 0 {
		t.Errorf("processor acknowledged routed messages %v as successful", ids(rec.Successful()))
	}
	for _, o := range rec.Failed() {
		want := "nope"
		if o.ID%4 == 3 {
			want = message.DefaultBatcher
		}
		var ube *processor.UnknownBatcherError
		if !errors.As(o.Err, &ube) || !errors.Is(o.Err, processor.ErrUnknownBatcher) {
			t.Fatalf("message %d failed with %v, want an *UnknownBatcherError", o.ID, o.Err)
		}
		if ube.Batcher != want || !slices.Equal(ube.Known, []string{"a", "b"}) || !strings.Contains(o.Err.Error(), strconv.Quote(want)) {
			t.Errorf("message %d: %v (batcher %q known %q), want batcher %q known [a b]", o.ID, o.Err, ube.Batcher, ube.Known, want)
		}
	}
}

// Guarantee: messages that a route does not take are left unacknowledged,
// never acknowledged as if handled downstream.
func TestRouteErrorLeavesMessagesUnacked(t *testing.T) {
	rec := acker.NewRecorder(false)
	route := &fakeRoute[int]{err: queue.ErrClosed}
	var handled atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			handled.Add(1)
			return m.Data, nil
		},
	}, processing.NamedRoute[int]{Name: message.DefaultBatcher, Route: route})
	run(t, s)
	publish(t, s, ints(rec, 0, 30))
	drain(t, s)

	if handled.Load() != 30 {
		t.Fatalf("handler called %d times, want 30", handled.Load())
	}
	if rec.Total() != 0 {
		t.Errorf("%d outcomes for messages no batcher took, want none", rec.Total())
	}
}

// Guarantee: an acknowledger that panics does not stop the processor, and
// the other acknowledgers of the same chunk still get their outcomes.
func TestPanickingAcknowledgerDoesNotStopStage(t *testing.T) {
	rec := acker.NewRecorder(false)
	var panics atomic.Int64
	bad := acker.Func(func(context.Context, []acker.Outcome, []acker.Outcome) {
		panics.Add(1)
		panic("acknowledger exploded")
	})
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   10,
		Handle:      func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
	msgs := make([]*message.Message[int], 10)
	for i := range msgs {
		var a acker.Acknowledger = rec
		if i%2 == 0 { // message 0, first in the chunk, goes to the bad one
			a = &bad
		}
		msgs[i] = message.New(i, a, uint64(i))
	}
	// Queued before the processor starts, the ten messages form one chunk.
	publish(t, s, msgs)
	run(t, s)
	waitAcks(t, rec, 5)
	publish(t, s, ints(rec, 10, 10))
	drain(t, s)

	assertOnce(t, rec, []uint64{1, 3, 5, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	if panics.Load() != 1 {
		t.Errorf("panicking acknowledger called %d times, want once for its one chunk", panics.Load())
	}
	if c := rec.Calls(); len(c[0].Successful) != 5 {
		t.Errorf("first call carried %d outcomes, want the 5 of the shared chunk", len(c[0].Successful))
	}
}

// Guarantee: CloseInput drains: every message queued before it is handled
// and acknowledged before Done closes.
func TestCloseInputDrainsQueuedMessages(t *testing.T) {
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 3,
		MaxDemand:   4,
		Handle:      func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
	publish(t, s, ints(rec, 0, 60)) // capacity is at least 64
	s.CloseInput()
	run(t, s)
	waitDone(t, stagetest.Done(s), "the processors to drain")
	assertOnce(t, rec, seq(0, 60))
	if s.Queued() != 0 {
		t.Errorf("%d messages still queued after Done", s.Queued())
	}
}

// Guarantee: Publish after CloseInput takes nothing and returns
// queue.ErrClosed.
func TestPublishAfterCloseInputFails(t *testing.T) {
	rec := acker.NewRecorder(false)
	s := newStage(t, processor.Options[int, int]{
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) { return m.Data, nil },
	})
	run(t, s)
	publish(t, s, ints(rec, 0, 5))
	drain(t, s)
	n, err := s.Publish(context.Background(), ints(rec, 5, 5))
	if n != 0 || !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Publish after CloseInput = %d, %v; want 0, queue.ErrClosed", n, err)
	}
	assertOnce(t, rec, seq(0, 5))
}

// Guarantee: cancelling the stage's context (the hard stop) makes Done
// close, cancels the handler's context, and leaves the queued messages
// unacknowledged.
func TestCancelStopsAndLeavesQueuedUnacked(t *testing.T) {
	rec := acker.NewRecorder(false)
	started := make(chan struct{})
	var calls atomic.Int64
	s := newStage(t, processor.Options[int, int]{
		Concurrency: 1,
		MaxDemand:   1,
		Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			if calls.Add(1) == 1 {
				close(started)
				select {
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(patience):
					return 0, errors.New("handler context never cancelled")
				}
			}
			return m.Data, nil
		},
	})
	cancel := run(t, s)
	publish(t, s, ints(rec, 0, 20))
	waitDone(t, started, "the first message to be handled")
	cancel()
	waitDone(t, stagetest.Done(s), "the processors to stop")

	if calls.Load() != 1 {
		t.Errorf("handler called %d times after the hard stop, want only the message in hand", calls.Load())
	}
	counts := rec.Counts()
	if f := rec.Failed(); len(f) != 1 || f[0].ID != 0 || !errors.Is(f[0].Err, context.Canceled) {
		t.Errorf("failed outcomes %v, want message 0 failed by its cancelled handler", f)
	}
	for id := uint64(1); id < 20; id++ {
		if counts[id] != 0 {
			t.Errorf("queued message %d acknowledged after the hard stop", id)
		}
	}
	if len(rec.Successful()) != 0 {
		t.Errorf("messages %v acknowledged as successful without being handled", ids(rec.Successful()))
	}
}

// Guarantee: processors feed a real batcher: every message a processor routes
// is batched and acknowledged once, by the batcher.
func TestProcessorsFeedBatcher(t *testing.T) {
	rec := acker.NewRecorder(false)
	var batched atomic.Int64
	b := batching.New(batcher.Options[string]{
		Name:         "words",
		BatchSize:    7,
		BatchTimeout: time.Hour,
		Handle: func(_ context.Context, batch []*message.Message[string], info message.BatchInfo) error {
			for _, m := range batch {
				if m.BatchKey() != info.BatchKey || !strings.HasPrefix(m.Data, "w") {
					t.Errorf("batch %q got %v with payload %q", info.BatchKey, m, m.Data)
				}
			}
			batched.Add(int64(len(batch)))
			return nil
		},
	}.WithDefaults(), batching.Config{Name: t.Name()})
	ctx, cancel := context.WithCancel(context.Background())
	done := stagetest.Go(ctx, b)
	t.Cleanup(func() {
		cancel()
		stagetest.WaitStopped(t, done, patience)
	})
	s := newStage(t, processor.Options[int, string]{
		Concurrency: 3,
		Handle: func(_ context.Context, m *message.Message[int]) (string, error) {
			m.SetBatcher("words")
			m.SetBatchKey(strconv.Itoa(m.Data % 3))
			return "w" + strconv.Itoa(m.Data), nil
		},
	}, processing.NamedRoute[string]{Name: b.Name(), Route: b})
	run(t, s)
	publish(t, s, ints(rec, 0, 500))
	drain(t, s)
	b.CloseInput()
	waitDone(t, stagetest.Done(b), "the batcher to drain")

	assertOnce(t, rec, seq(0, 500))
	if batched.Load() != 500 || rec.FailedCount() != 0 {
		t.Errorf("%d messages batched, %d failed; want 500 and 0", batched.Load(), rec.FailedCount())
	}
}

// Guarantee: with Concurrency processors and a message for each queued at
// once, every processor handles at the same time. Processors sharing a
// queue are woken a few at a time, and each woken processor that takes work
// wakes the next while work is left, so none sleeps beside queued messages.
func TestEveryProcessorHandlesAtOnceWhenWorkIsQueued(t *testing.T) {
	const procs = 8
	rec := acker.NewRecorder(false)
	var active atomic.Int32
	all := make(chan struct{})
	s := newStage(t, processor.Options[int, int]{
		Concurrency: procs,
		MaxDemand:   1,
		Handle: func(ctx context.Context, m *message.Message[int]) (int, error) {
			if active.Add(1) == procs {
				close(all)
			}
			select {
			case <-all:
				return m.Data, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	})
	run(t, s)
	// Publish only once every processor waits, so that each must be woken.
	wait.For(t, "every processor waiting for messages", func() bool { return receiversWaiting() == procs },
		func() string { return fmt.Sprintf("%d waiting", receiversWaiting()) })
	publish(t, s, ints(rec, 0, procs))
	select {
	case <-all:
	case <-time.After(patience):
		t.Fatalf("%d of %d processors handling after %s: the others slept beside queued messages", active.Load(), procs, patience)
	}
	waitAcks(t, rec, procs)
	assertOnce(t, rec, seq(0, procs))
	drain(t, s)
}

// receiversWaiting counts the goroutines parked in a queue's receive: the
// processors waiting for messages.
func receiversWaiting() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "internal/queue.(*Queue[") && strings.Contains(g, "]).receive(") {
			n++
		}
	}
	return n
}

// Guarantee: a message the handler fails itself (message.Fail) and returns
// with a nil error is a failed message, as one whose handler returned an
// error: HandleFailed sees it, it goes to no batcher, the processor
// acknowledges it once with that error, and Stats counts it failed.
func TestAMessageTheHandlerFailsWithoutAnErrorIsFailed(t *testing.T) {
	errBad := errors.New("bad message")
	rec := acker.NewRecorder(false)
	route := &fakeRoute[int]{}
	var mu sync.Mutex
	var seen []uint64
	s := newStage(t, processor.Options[int, int]{
		Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			m.SetBatcher("a")
			if m.Data == 3 {
				m.Fail(errBad)
			}
			return m.Data, nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int]) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, routedIDs(failed)...)
		},
	}, processing.NamedRoute[int]{Name: "a", Route: route})
	run(t, s)
	publish(t, s, ints(rec, 0, 5))
	drain(t, s)

	if got := routedIDs(route.routed()); !slices.Equal(got, []uint64{0, 1, 2, 4}) {
		t.Errorf("the batcher got %v, want every message but 3", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []uint64{3}) {
		t.Errorf("HandleFailed saw %v, want message 3", seen)
	}
	assertOnce(t, rec, []uint64{3})
	if f := rec.Failed(); len(f) != 1 || !errors.Is(f[0].Err, errBad) {
		t.Errorf("failed outcomes %+v, want message 3 with the error it was failed with", f)
	}
	if st := s.Stats(0); st.Failed.Total() != 1 || st.Succeeded != 4 {
		t.Errorf("Stats: Succeeded %d, Failed %d; want 4 and 1", st.Succeeded, st.Failed.Total())
	}
}
