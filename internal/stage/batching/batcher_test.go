package batching_test

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
	"github.com/boulevard-go/boulevard/internal/stage/stagetest"
	"github.com/boulevard-go/boulevard/message"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// patience bounds every wait in these tests; it only matters when a test is
// about to fail.
const patience = 10 * time.Second

// never is a BatchTimeout that does not fire during a test.
const never = time.Hour

// seen is what a batch handler was given.
type seen struct {
	ids  []int
	keys []string
	info message.BatchInfo
	at   time.Time // when the handler was called
	g    uint64    // the batch processor (goroutine) that called it
}

// harness runs one batcher whose handler reports every batch on a channel.
type harness struct {
	s       *batching.Batcher[int]
	batches chan seen
	cancel  context.CancelFunc
}

// start builds and starts a batcher from opts. If opts.Handle is nil, the
// handler only reports batches; otherwise it reports them and then calls
// opts.Handle. Cleanup cancels the stage's context and waits for all its
// goroutines.
func start(t *testing.T, opts batcher.Options[int]) *harness {
	t.Helper()
	h := &harness{batches: make(chan seen, 10000)}
	user := opts.Handle
	opts.Handle = func(ctx context.Context, batch []*message.Message[int], info message.BatchInfo) error {
		sn := seen{info: info, at: time.Now(), g: goid()}
		for _, m := range batch {
			sn.ids = append(sn.ids, m.Data)
			sn.keys = append(sn.keys, m.BatchKey())
		}
		h.batches <- sn
		if user != nil {
			return user(ctx, batch, info)
		}
		return nil
	}
	if opts.Name == "" {
		opts.Name = "test"
	}
	h.s = batching.New(opts.WithDefaults(), batching.Config{Name: t.Name()})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	done := stagetest.Go(ctx, h.s)
	t.Cleanup(func() {
		cancel()
		stagetest.WaitStopped(t, done, patience)
	})
	return h
}

// publish hands msgs to the batcher and fails the test unless all were taken.
func (h *harness) publish(t *testing.T, msgs ...*message.Message[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if n, err := h.s.Publish(ctx, msgs); err != nil || n != len(msgs) {
		t.Fatalf("Publish took %d of %d messages: %v", n, len(msgs), err)
	}
}

// next returns the next batch handled.
func (h *harness) next(t *testing.T) seen {
	t.Helper()
	select {
	case b := <-h.batches:
		return b
	case <-time.After(patience):
		t.Fatal("timed out waiting for a batch")
		return seen{}
	}
}

// none fails if a batch has been handled that the test has not taken.
func (h *harness) none(t *testing.T, why string) {
	t.Helper()
	select {
	case b := <-h.batches:
		t.Fatalf("unexpected batch %v %+v: %s", b.ids, b.info, why)
	default:
	}
}

// drain closes the input and waits until the batcher and its batch
// processors returned; it returns every batch handled and not yet taken.
func (h *harness) drain(t *testing.T) []seen {
	t.Helper()
	h.s.CloseInput()
	waitDone(t, stagetest.Done(h.s), "the batcher to return")
	var out []seen
	for {
		select {
		case b := <-h.batches:
			out = append(out, b)
		default:
			return out
		}
	}
}

func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// msg returns a bulk message with data and ack id id and batch key key.
func msg(ack acker.Acknowledger, id int, key string) *message.Message[int] {
	m := message.New(id, ack, uint64(id))
	m.SetBatchKey(key)
	return m
}

// msgs returns messages from, from+1, … with batch key key.
func msgs(ack acker.Acknowledger, from, n int, key string) []*message.Message[int] {
	out := make([]*message.Message[int], n)
	for i := range out {
		out[i] = msg(ack, from+i, key)
	}
	return out
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func outcomeIDs(os []acker.Outcome) []int {
	out := make([]int, len(os))
	for i, o := range os {
		out[i] = int(o.ID)
	}
	slices.Sort(out)
	return out
}

// assertOnce fails unless every id in want was acknowledged exactly once and
// nothing else was.
func assertOnce(t *testing.T, rec *acker.Recorder, want []int) {
	t.Helper()
	counts := rec.Counts()
	for _, id := range want {
		if counts[uint64(id)] != 1 {
			t.Errorf("message %d acknowledged %d times, want once", id, counts[uint64(id)])
		}
	}
	if len(counts) != len(want) {
		t.Errorf("%d distinct messages acknowledged, want %d", len(counts), len(want))
	}
}

// goid returns the current goroutine's id: a batch processor is one
// goroutine for its whole life.
func goid() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, err := strconv.ParseUint(s[:strings.IndexByte(s, ' ')], 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// Guarantee: a batch is emitted as soon as it reaches BatchSize, with
// trigger size; what is left is emitted by CloseInput with trigger flush;
// messages keep their order.
func TestBatchSizeTrigger(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{Name: "sized", BatchSize: 100, BatchTimeout: never})
	h.publish(t, msgs(rec, 0, 250, "")...)
	for i := range 2 {
		b := h.next(t)
		want := message.BatchInfo{Batcher: "sized", Size: 100, Trigger: message.TriggerSize, Started: b.info.Started}
		if b.info != want || !slices.Equal(b.ids, span(100*i, 100*(i+1))) {
			t.Errorf("batch %d: %+v ids %v…, want %+v ids %d..%d", i, b.info, b.ids[:min(3, len(b.ids))], want, 100*i, 100*i+99)
		}
	}
	h.none(t, "the last 50 messages must wait for the batch size, the timeout or the drain")
	rest := h.drain(t)
	if len(rest) != 1 {
		t.Fatalf("%d batches after CloseInput, want 1", len(rest))
	}
	b := rest[0]
	if b.info.Size != 50 || b.info.Trigger != message.TriggerFlush || b.info.Batcher != "sized" || !slices.Equal(b.ids, span(200, 250)) {
		t.Errorf("last batch %+v ids %v, want 50 messages 200..249 with trigger flush", b.info, b.ids)
	}
	assertOnce(t, rec, span(0, 250))
}

// Guarantee: a batch that does not fill up is emitted with trigger timeout,
// not before BatchTimeout has passed since its first message.
func TestBatchTimeoutEmitsPartialBatch(t *testing.T) {
	const timeout = 200 * time.Millisecond
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 100, BatchTimeout: timeout})
	before := time.Now()
	h.publish(t, msgs(rec, 0, 3, "k")...)
	b := h.next(t)
	if b.info.Trigger != message.TriggerTimeout || b.info.Size != 3 || b.info.BatchKey != "k" || !slices.Equal(b.ids, []int{0, 1, 2}) {
		t.Errorf("batch %+v ids %v, want the 3 messages of key k with trigger timeout", b.info, b.ids)
	}
	if b.info.Started.Before(before) {
		t.Errorf("batch started %v before its first message was published", before.Sub(b.info.Started))
	}
	if elapsed := b.at.Sub(b.info.Started); elapsed < timeout {
		t.Errorf("batch handled %v after its first message, before the %v timeout", elapsed, timeout)
	}
	if len(h.drain(t)) != 0 {
		t.Error("batches left after the timeout emitted the only one")
	}
	assertOnce(t, rec, span(0, 3))
}

// Guarantee: the timeout runs from the first message of each batch, per
// batch key: a key that started later times out later and separately (never
// at the earlier key's deadline), the earlier key still times out first when
// it receives a message in between, and a new batch of a key starts a new
// timeout.
func TestBatchTimeoutPerKeyFromFirstMessage(t *testing.T) {
	const (
		timeout = 600 * time.Millisecond
		gap     = 150 * time.Millisecond
	)
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 100, BatchTimeout: timeout})
	// The pauses are not synchronisation: they make key b start later than
	// key a, and message 2 join key a's batch after key b started.
	ta := time.Now()
	h.publish(t, msg(rec, 0, "a"))
	time.Sleep(gap)
	tb := time.Now()
	h.publish(t, msg(rec, 1, "b"))
	time.Sleep(gap)
	h.publish(t, msg(rec, 2, "a"))

	var batches []seen
	for n := 0; n < 3; n += len(batches[len(batches)-1].ids) {
		batches = append(batches, h.next(t))
	}
	// Key a started first, so it times out first, even when message 2
	// joined its batch after key b started.
	if a := batches[0]; a.info.BatchKey != "a" || a.ids[0] != 0 {
		t.Fatalf("first batch emitted: key %q ids %v, want key a (started first) with message 0", a.info.BatchKey, a.ids)
	}
	if len(batches[0].ids) == 1 {
		t.Logf("message 2 arrived after key a's batch timed out; it formed a batch of its own")
	}
	published := map[int]time.Time{0: ta, 1: tb}
	for _, b := range batches {
		if b.info.Trigger != message.TriggerTimeout {
			t.Errorf("batch %v of key %s: trigger %v, want timeout", b.ids, b.info.BatchKey, b.info.Trigger)
		}
		first, ok := published[b.ids[0]]
		if !ok {
			continue // message 2's own batch: checked like the one below
		}
		if b.info.Started.Before(first) {
			t.Errorf("key %s: batch started before its first message was published", b.info.BatchKey)
		}
		if d := b.at.Sub(first); d < timeout {
			t.Errorf("key %s emitted %v after its first message, before the %v timeout", b.info.BatchKey, d, timeout)
		}
	}

	// A new batch of key a times out from its own first message.
	ta3 := time.Now()
	h.publish(t, msg(rec, 3, "a"))
	a3 := h.next(t)
	if a3.info.Trigger != message.TriggerTimeout || !slices.Equal(a3.ids, []int{3}) || a3.info.Started.Before(ta3) {
		t.Errorf("new batch of key a: %+v ids %v, want message 3 with trigger timeout started after %v", a3.info, a3.ids, ta3)
	}
	if d := a3.at.Sub(ta3); d < timeout {
		t.Errorf("new batch of key a emitted %v after its first message, before the %v timeout", d, timeout)
	}
	h.drain(t)
	assertOnce(t, rec, span(0, 4))
}

// Guarantee: a batch never mixes batch keys, BatchInfo.BatchKey names its
// key, and within a key messages keep their order.
func TestBatchesNeverMixKeys(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 10, BatchTimeout: 50 * time.Millisecond})
	keys := []string{"red", "green", "blue", ""}
	var all []*message.Message[int]
	for i := range 400 {
		all = append(all, msg(rec, i, keys[(i*7/3)%len(keys)]))
	}
	for i := 0; i < len(all); i += 37 {
		h.publish(t, all[i:min(i+37, len(all))]...)
	}
	// Batches are emitted by size, by timeout and by the drain.
	batches := h.drain(t)
	byKey := map[string][]int{}
	total := 0
	for _, b := range batches {
		if b.info.Size != len(b.ids) || b.info.Size == 0 || b.info.Size > 10 {
			t.Errorf("batch %+v has %d messages", b.info, len(b.ids))
		}
		for i, k := range b.keys {
			if k != b.info.BatchKey {
				t.Fatalf("batch of key %q holds message %d of key %q", b.info.BatchKey, b.ids[i], k)
			}
		}
		byKey[b.info.BatchKey] = append(byKey[b.info.BatchKey], b.ids...)
		total += len(b.ids)
	}
	for k, got := range byKey {
		if !slices.IsSorted(got) {
			t.Errorf("key %q: messages out of order: %v", k, got)
		}
	}
	if total != len(all) || len(byKey) != len(keys) {
		t.Errorf("%d messages in %d keys batched, want %d in %d", total, len(byKey), len(all), len(keys))
	}
	assertOnce(t, rec, span(0, len(all)))
}

// Guarantee: a message in flush mode emits its batch at once with trigger
// flush, together with the messages already waiting under its key, and
// leaves other keys' batches open.
func TestFlushModeEmitsImmediately(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 100, BatchTimeout: never})
	flush := msg(rec, 4, "k")
	flush.SetBatchMode(message.Flush)
	h.publish(t, msg(rec, 0, "k"), msg(rec, 1, "k"), msg(rec, 2, "k"), msg(rec, 3, "other"), flush)

	b := h.next(t) // neither size nor timeout can emit it
	if b.info.Trigger != message.TriggerFlush || b.info.BatchKey != "k" || b.info.Size != 4 || !slices.Equal(b.ids, []int{0, 1, 2, 4}) {
		t.Errorf("batch %+v ids %v, want key k messages [0 1 2 4] with trigger flush", b.info, b.ids)
	}
	// A flush message on its own is a batch of one.
	alone := msg(rec, 5, "alone")
	alone.SetBatchMode(message.Flush)
	h.publish(t, alone)
	b = h.next(t)
	if b.info.Trigger != message.TriggerFlush || !slices.Equal(b.ids, []int{5}) {
		t.Errorf("batch %+v ids %v, want message 5 alone with trigger flush", b.info, b.ids)
	}
	h.none(t, "key other has neither filled up nor timed out")
	rest := h.drain(t)
	if len(rest) != 1 || rest[0].info.BatchKey != "other" || !slices.Equal(rest[0].ids, []int{3}) || rest[0].info.Trigger != message.TriggerFlush {
		t.Errorf("batches at drain %+v, want key other's message 3 with trigger flush", rest)
	}
	assertOnce(t, rec, span(0, 6))
}

// Guarantee: with BatchSize 1 every message is a batch of its own, emitted
// at once, whose trigger says why: size for a bulk message, flush for one
// in flush mode, as it would with a larger BatchSize.
func TestBatchOfOneHasTriggerFlushForAFlushMessage(t *testing.T) {
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: 1, BatchTimeout: never})
	flush := msg(rec, 1, "k")
	flush.SetBatchMode(message.Flush)
	h.publish(t, msg(rec, 0, "k"), flush, msg(rec, 2, "k"))
	want := []message.Trigger{message.TriggerSize, message.TriggerFlush, message.TriggerSize}
	for i, tr := range want {
		b := h.next(t)
		if !slices.Equal(b.ids, []int{i}) || b.info.Size != 1 || b.info.Trigger != tr {
			t.Errorf("batch %d: %+v ids %v, want message %d alone with trigger %v", i, b.info, b.ids, i, tr)
		}
	}
	h.drain(t)
	assertOnce(t, rec, span(0, 3))
}

// Guarantee: CloseInput emits every open batch with trigger flush, every
// message is acknowledged exactly once before Done closes, and Publish then
// fails with queue.ErrClosed.
func TestCloseInputDrainsOpenBatches(t *testing.T) {
	const (
		n     = 100
		nKeys = 5
		size  = 7
	)
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{BatchSize: size, BatchTimeout: never, Concurrency: 2})
	var all []*message.Message[int]
	for i := range n {
		all = append(all, msg(rec, i, "key"+strconv.Itoa(i%nKeys)))
	}
	h.publish(t, all...)
	batches := h.drain(t)

	assertOnce(t, rec, span(0, n))
	if rec.FailedCount() != 0 {
		t.Errorf("%d messages failed", rec.FailedCount())
	}
	perKey := n / nKeys // 20 = 2 full batches of 7 and 6 left over
	flushes := map[string]int{}
	for _, b := range batches {
		switch {
		case b.info.Trigger == message.TriggerSize && b.info.Size == size:
		case b.info.Trigger == message.TriggerFlush && b.info.Size == perKey%size:
			flushes[b.info.BatchKey]++
		default:
			t.Errorf("unexpected batch %+v", b.info)
		}
	}
	if len(batches) != nKeys*(perKey/size+1) || len(flushes) != nKeys {
		t.Errorf("%d batches, flushed keys %v; want %d batches and one flush per key", len(batches), flushes, nKeys*(perKey/size+1))
	}
	if k, err := h.s.Publish(context.Background(), msgs(rec, n, 1, "late")); k != 0 || !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Publish after CloseInput = %d, %v; want 0, queue.ErrClosed", k, err)
	}
}

// Guarantee: a batch handler may fail single messages with m.Fail; only those
// are acknowledged as failed, and a batch's outcomes go to its acknowledger in
// one call.
func TestHandlerFailsSingleMessage(t *testing.T) {
	errThree := errors.New("not three")
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{
		BatchSize:    5,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			for _, m := range batch {
				if m.Data == 3 {
					m.Fail(errThree)
				}
			}
			return nil
		},
	})
	h.publish(t, msgs(rec, 0, 5, "")...)
	h.next(t)
	h.drain(t)

	assertOnce(t, rec, span(0, 5))
	calls := rec.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d Ack calls for one batch, want 1", len(calls))
	}
	if got := outcomeIDs(calls[0].Successful); !slices.Equal(got, []int{0, 1, 2, 4}) {
		t.Errorf("successful %v, want [0 1 2 4]", got)
	}
	if f := calls[0].Failed; len(f) != 1 || f[0].ID != 3 || !errors.Is(f[0].Err, errThree) {
		t.Errorf("failed %v, want message 3 with the handler's error", f)
	}
}

// Guarantee: a batch handler's error fails every message of the batch that
// has not failed already, with that error; messages it failed keep their own
// error.
func TestHandlerErrorFailsRemainingMessages(t *testing.T) {
	errOne, errBatch := errors.New("one is bad"), errors.New("batch is bad")
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{
		BatchSize:    5,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			batch[1].Fail(errOne)
			return errBatch
		},
	})
	h.publish(t, msgs(rec, 0, 5, "")...)
	h.drain(t)

	assertOnce(t, rec, span(0, 5))
	if len(rec.Successful()) != 0 {
		t.Errorf("successful %v, want none", outcomeIDs(rec.Successful()))
	}
	for _, o := range rec.Failed() {
		want := errBatch
		if o.ID == 1 {
			want = errOne
		}
		if !errors.Is(o.Err, want) {
			t.Errorf("message %d failed with %v, want %v", o.ID, o.Err, want)
		}
	}
}

// Guarantee: the batch slice is the handler's to keep and to rewrite:
// filtering it in place (slices.DeleteFunc clears what it removes), with
// an error for the whole batch or without, changes nothing of which
// messages are acknowledged, each exactly once with the outcome it had when
// the handler returned; a kept slice is never touched after the call, and
// the batch processor keeps handling later batches.
func TestHandlerMayKeepAndRewriteTheBatchSlice(t *testing.T) {
	errOdd, errBatch := errors.New("odd"), errors.New("batch is bad")
	rec := acker.NewRecorder(false)
	var kept [][]*message.Message[int]
	h := start(t, batcher.Options[int]{
		BatchSize:    5,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			for _, m := range batch {
				if m.Data%2 == 1 {
					m.Fail(errOdd)
				}
			}
			// Keep the even messages: the rest of the slice is cleared.
			kept = append(kept, slices.DeleteFunc(batch, func(m *message.Message[int]) bool { return m.Failed() }))
			if batch[0].Data >= 10 {
				return errBatch
			}
			return nil
		},
	})
	h.publish(t, msgs(rec, 0, 15, "")...)
	h.drain(t)

	assertOnce(t, rec, span(0, 15))
	if got, want := outcomeIDs(rec.Successful()), []int{0, 2, 4, 6, 8}; !slices.Equal(got, want) {
		t.Errorf("successful %v, want %v", got, want)
	}
	for _, o := range rec.Failed() {
		want := errBatch
		if o.ID%2 == 1 {
			want = errOdd
		}
		if !errors.Is(o.Err, want) {
			t.Errorf("message %d failed with %v, want %v", o.ID, o.Err, want)
		}
	}
	for i, b := range kept {
		var got []int
		for _, m := range b {
			got = append(got, m.Data)
		}
		var want []int
		for id := 5 * i; id < 5*i+5; id++ {
			if id%2 == 0 {
				want = append(want, id)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("batch %d kept %v after the call, want %v", i, got, want)
		}
	}
}

// Guarantee: a batch handler's panic fails the whole batch with a
// *message.PanicError, and the batch processor keeps handling later batches.
func TestHandlerPanicFailsWholeBatch(t *testing.T) {
	rec := acker.NewRecorder(false)
	var calls atomic.Int64
	h := start(t, batcher.Options[int]{
		BatchSize:    5,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			if calls.Add(1) == 1 {
				batch[1].Fail(errors.New("one is bad"))
				panic("batch exploded")
			}
			return nil
		},
	})
	h.publish(t, msgs(rec, 0, 5, "")...)
	h.next(t)
	h.publish(t, msgs(rec, 5, 5, "")...)
	h.next(t)
	h.drain(t)

	assertOnce(t, rec, span(0, 10))
	if got := outcomeIDs(rec.Failed()); !slices.Equal(got, span(0, 5)) {
		t.Fatalf("failed %v, want the whole first batch", got)
	}
	for _, o := range rec.Failed() {
		var pe *message.PanicError
		if !errors.As(o.Err, &pe) || pe.Value != "batch exploded" || len(pe.Stack) == 0 {
			t.Errorf("message %d failed with %v, want a *message.PanicError", o.ID, o.Err)
		}
	}
	if got := outcomeIDs(rec.Successful()); !slices.Equal(got, span(5, 10)) {
		t.Errorf("successful %v, want the second batch", got)
	}
}

// Guarantee: HandleFailed sees exactly the failed messages of a batch, with
// its BatchInfo, before they are acknowledged, and the acknowledger sees the
// disposition it sets.
func TestHandleFailedSeesFailedAndSetsDisposition(t *testing.T) {
	rec := acker.NewRecorder(false)
	var mu sync.Mutex
	var sawIDs []int
	var sawInfo message.BatchInfo
	h := start(t, batcher.Options[int]{
		Name:         "hooked",
		BatchSize:    5,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			batch[1].Fail(errors.New("bad 1"))
			batch[3].Fail(errors.New("bad 3"))
			return nil
		},
		HandleFailed: func(_ context.Context, failed []*message.Message[int], info message.BatchInfo) {
			mu.Lock()
			defer mu.Unlock()
			sawInfo = info
			for _, m := range failed {
				sawIDs = append(sawIDs, m.Data)
				if !m.Failed() {
					t.Errorf("HandleFailed got message %d, which did not fail", m.Data)
				}
				if rec.Count(uint64(m.Data)) != 0 {
					t.Errorf("message %d acknowledged before HandleFailed saw it", m.Data)
				}
				if m.Data == 1 {
					m.SetDisposition(acker.DispositionDiscard)
				}
			}
		},
	})
	h.publish(t, msgs(rec, 0, 5, "key")...)
	h.drain(t)

	assertOnce(t, rec, span(0, 5))
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sawIDs, []int{1, 3}) || sawInfo.Batcher != "hooked" || sawInfo.BatchKey != "key" || sawInfo.Size != 5 {
		t.Errorf("HandleFailed saw %v with %+v, want [1 3] of batch hooked/key of 5", sawIDs, sawInfo)
	}
	for _, o := range rec.Failed() {
		want := map[uint64]acker.Disposition{1: acker.DispositionDiscard, 3: acker.DispositionDefault}[o.ID]
		if o.Disposition != want || o.Err.Error() != fmt.Sprintf("bad %d", o.ID) {
			t.Errorf("message %d: disposition %v err %v, want %v and the handler's error", o.ID, o.Disposition, o.Err, want)
		}
	}
	if got := outcomeIDs(rec.Failed()); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("failed %v, want [1 3]", got)
	}
}

// Guarantee: a panic in HandleFailed is recovered: the failed messages are
// still acknowledged as failed and later batches are handled.
func TestHandleFailedPanicRecovered(t *testing.T) {
	errBad := errors.New("bad")
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{
		BatchSize:    2,
		BatchTimeout: never,
		Handle: func(_ context.Context, batch []*message.Message[int], _ message.BatchInfo) error {
			batch[0].Fail(errBad)
			return nil
		},
		HandleFailed: func(context.Context, []*message.Message[int], message.BatchInfo) { panic("hook exploded") },
	})
	h.publish(t, msgs(rec, 0, 2, "")...)
	h.next(t)
	h.publish(t, msgs(rec, 2, 2, "")...)
	h.next(t)
	h.drain(t)

	assertOnce(t, rec, span(0, 4))
	if got := outcomeIDs(rec.Failed()); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("failed %v, want [0 2]", got)
	}
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, errBad) || o.Disposition != acker.DispositionDefault {
			t.Errorf("message %d: err %v disposition %v, want the handler's error, default", o.ID, o.Err, o.Disposition)
		}
	}
}

// Guarantee: with Concurrency > 1, every batch processor receives batches and
// they handle batches at the same time.
func TestConcurrentBatchProcessorsAllReceiveBatches(t *testing.T) {
	const concurrency = 3
	rec := acker.NewRecorder(false)
	var arrived atomic.Int64
	together := make(chan struct{})
	h := start(t, batcher.Options[int]{
		BatchSize:    1,
		BatchTimeout: never,
		Concurrency:  concurrency,
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
			if arrived.Add(1) == concurrency {
				close(together)
			}
			// Hold the batch until every batch processor is holding one.
			select {
			case <-together:
				return nil
			case <-time.After(patience):
				return errors.New("the other batch processors never took a batch")
			}
		},
	})
	h.publish(t, msgs(rec, 0, 30, "")...)
	batches := h.drain(t)

	assertOnce(t, rec, span(0, 30))
	if rec.FailedCount() != 0 {
		t.Errorf("%d messages failed: fewer than %d batches were handled at once", rec.FailedCount(), concurrency)
	}
	procs := map[uint64]bool{}
	for _, b := range batches {
		procs[b.g] = true
	}
	if len(procs) != concurrency {
		t.Errorf("batches handled by %d batch processors, want %d", len(procs), concurrency)
	}
}

// Guarantee: with PartitionBy, the messages of a key always go to the same
// partition (BatchInfo.Partition) and batch processor, in publish order, and
// different keys spread over the partitions.
func TestPartitionedBatcherKeepsKeyOnOnePartitionInOrder(t *testing.T) {
	const (
		concurrency = 3
		nKeys       = 6
		perKey      = 20
	)
	rec := acker.NewRecorder(false)
	h := start(t, batcher.Options[int]{
		BatchSize:    4,
		BatchTimeout: 20 * time.Millisecond,
		Concurrency:  concurrency,
		PartitionBy:  func(m *message.Message[int]) string { return m.BatchKey() },
		Handle: func(context.Context, []*message.Message[int], message.BatchInfo) error {
			runtime.Gosched()
			return nil
		},
	})
	partitions := map[int]bool{}
	var all []*message.Message[int]
	for i := range nKeys * perKey {
		k := "key" + strconv.Itoa(i%nKeys)
		partitions[queue.KeyPartition(k, concurrency)] = true
		all = append(all, msg(rec, i, k))
	}
	if len(partitions) < 2 {
		t.Fatalf("test setup: the keys map to %d partition(s), need several", len(partitions))
	}
	for i := 0; i < len(all); i += 25 {
		h.publish(t, all[i:min(i+25, len(all))]...)
	}
	batches := h.drain(t)

	assertOnce(t, rec, span(0, len(all)))
	type where struct {
		partition int
		g         uint64
	}
	byKey := map[string]where{}
	ordered := map[string][]int{}
	procs := map[uint64]bool{}
	for _, b := range batches {
		k := b.info.BatchKey
		if want := queue.KeyPartition(k, concurrency); b.info.Partition != want {
			t.Errorf("key %s batched by partition %d, want %d", k, b.info.Partition, want)
		}
		if w, ok := byKey[k]; ok && w != (where{b.info.Partition, b.g}) {
			t.Errorf("key %s handled in partition %d by %d and in partition %d by %d", k, w.partition, w.g, b.info.Partition, b.g)
		}
		byKey[k] = where{b.info.Partition, b.g}
		ordered[k] = append(ordered[k], b.ids...)
		procs[b.g] = true
	}
	for k, ids := range ordered {
		if len(ids) != perKey || !slices.IsSorted(ids) {
			t.Errorf("key %s: messages %v, want %d in publish order", k, ids, perKey)
		}
	}
	if len(procs) != len(partitions) {
		t.Errorf("batches handled by %d batch processors, want one per partition used = %d", len(procs), len(partitions))
	}
}

// Guarantee: cancelling the stage's context (the hard stop) makes Done
// close, cancels the handler's context, acknowledges nothing twice and
// leaves the messages no handler finished unacknowledged.
func TestHardCancelLeavesUnhandledUnacked(t *testing.T) {
	rec := acker.NewRecorder(false)
	started := make(chan struct{})
	var calls atomic.Int64
	h := start(t, batcher.Options[int]{
		BatchSize:    2,
		BatchTimeout: never,
		Handle: func(ctx context.Context, _ []*message.Message[int], _ message.BatchInfo) error {
			if calls.Add(1) == 1 {
				close(started)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(patience):
				return errors.New("handler context never cancelled")
			}
		},
	})
	h.publish(t, msgs(rec, 0, 21, "")...) // ten full batches and one open
	waitDone(t, started, "the first batch to be handled")
	h.cancel()
	waitDone(t, stagetest.Done(h.s), "the batcher to stop")

	if calls.Load() != 1 {
		t.Errorf("batch handler called %d times, want only the batch in hand when the hard stop came", calls.Load())
	}
	if len(rec.Successful()) != 0 {
		t.Errorf("messages %v acknowledged as successful although no handler finished them", outcomeIDs(rec.Successful()))
	}
	counts := rec.Counts()
	for id, c := range counts {
		if c > 1 {
			t.Errorf("message %d acknowledged %d times", id, c)
		}
	}
	if got := outcomeIDs(rec.Failed()); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("failed %v, want only the batch whose handler saw the cancellation", got)
	}
	for _, o := range rec.Failed() {
		if !errors.Is(o.Err, context.Canceled) {
			t.Errorf("message %d failed with %v, want context.Canceled", o.ID, o.Err)
		}
	}
}
