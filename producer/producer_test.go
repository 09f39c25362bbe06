package producer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/producer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ---------------------------------------------------------------------------
// Test doubles shared by the tests of this package.

// item is the payload of the test messages: the feed that delivered it and
// its position in that feed's delivery order.
type item struct {
	Feed string
	Seq  int
}

// recorder is a fake Output: it records every message it accepts, per feed,
// with the time and size of every Publish call. before, when set, runs at the
// start of each call (before anything is accepted); an error from it makes
// the call accept nothing. jitter makes the processors randomly slow.
type recorder struct {
	before func(ctx context.Context, msgs []*message.Message[item]) error
	jitter bool

	mu     sync.Mutex
	byFeed map[string][]int
	total  int
	calls  []call
}

type call struct {
	at   time.Time
	size int
}

func newRecorder() *recorder { return &recorder{byFeed: map[string][]int{}} }

func (r *recorder) Publish(ctx context.Context, msgs []*message.Message[item]) (int, error) {
	if r.before != nil {
		if err := r.before(ctx, msgs); err != nil {
			return 0, err
		}
	}
	if r.jitter && rand.IntN(3) == 0 {
		// Busy processors: the stage has to wait for room.
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.byFeed[m.Data.Feed] = append(r.byFeed[m.Data.Feed], m.Data.Seq)
	}
	r.total += len(msgs)
	r.calls = append(r.calls, call{at: now, size: len(msgs)})
	return len(msgs), nil
}

// count is how many messages of feed were accepted.
func (r *recorder) count(feed string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byFeed[feed])
}

// published is how many messages were accepted in all.
func (r *recorder) published() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *recorder) seqs(feed string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byFeed[feed])
}

func (r *recorder) history() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// hold makes Publish block until the returned release function is called
// (or the hard-stop context is cancelled, as busy processors would); blocked
// counts the calls that are waiting.
func (r *recorder) hold() (release func(), blocked *atomic.Int32) {
	ch := make(chan struct{})
	blocked = new(atomic.Int32)
	var once sync.Once
	r.before = func(ctx context.Context, _ []*message.Message[item]) error {
		blocked.Add(1)
		defer blocked.Add(-1)
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return func() { once.Do(func() { close(ch) }) }, blocked
}

// brokerSource is a Source whose feeds behave like broker consumers (a
// Pulsar consumer, a Kafka partition): each feed keeps the count of permits
// it was granted and has not used yet, fetches (delivers) only while it has
// permits, in batches of random size, and records every grant it receives.
// Each stage's Run registers feedsPerStage feeds, each holding perFeed
// messages; Run returns nil (exhausted) once every feed delivered them all,
// or ctx.Err() when the stage stops fetching first.
type brokerSource struct {
	producer.Basic
	feedsPerStage int
	perFeed       int
	panicInGrant  bool // the grant callback panics after recording the permits

	mu    sync.Mutex
	feeds []*brokerFeed
}

type brokerFeed struct {
	name  string
	stage int
	wake  chan struct{}
	feed  atomic.Pointer[producer.Feed[item]]

	fetched atomic.Int64 // messages delivered, counted once Deliver returned

	mu       sync.Mutex
	permits  int   // granted and not yet used to fetch
	granted  int   // sum of grants
	grants   []int // every grant, in order
	maxStats int   // largest Stats().Granted-Stats().Dispatched seen at a refill
	maxOut   int   // largest granted - published seen when the stage publishes
	problems []string
}

func (s *brokerSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	var wg sync.WaitGroup
	errs := make([]error, s.feedsPerStage)
	for i := range s.feedsPerStage {
		bf := &brokerFeed{name: fmt.Sprintf("s%d/f%d", st.Index(), i), stage: st.Index(), wake: make(chan struct{}, 1)}
		s.mu.Lock()
		s.feeds = append(s.feeds, bf)
		s.mu.Unlock()
		grant := bf.grant
		if s.panicInGrant {
			grant = func(n int) {
				bf.grant(n)
				panic("grant callback exploded")
			}
		}
		pf := st.NewFeed(bf.name, grant)
		bf.feed.Store(pf)
		wg.Go(func() { errs[i] = bf.fetch(ctx, pf, s.perFeed) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// grant records the permits like a broker does on a Flow command.
func (f *brokerFeed) grant(n int) {
	f.mu.Lock()
	f.permits += n
	f.granted += n
	f.grants = append(f.grants, n)
	if pf := f.feed.Load(); pf != nil {
		// A refill, called by the stage while charging: its counters must
		// agree with what this consumer saw.
		st := pf.Stats()
		if st.Granted != f.granted {
			f.problems = append(f.problems, fmt.Sprintf("Stats().Granted = %d, the consumer was granted %d", st.Granted, f.granted))
		}
		if st.Remaining != st.Granted-st.Dispatched {
			f.problems = append(f.problems, fmt.Sprintf("Stats() = %+v: Remaining != Granted-Dispatched", st))
		}
		f.maxStats = max(f.maxStats, st.Granted-st.Dispatched)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// fetch delivers total messages, never more than the permits at hand.
func (f *brokerFeed) fetch(ctx context.Context, pf *producer.Feed[item], total int) error {
	next := 0
	for next < total {
		f.mu.Lock()
		n := min(f.permits, total-next)
		if n > 0 {
			n = 1 + rand.IntN(n)
		}
		f.permits -= n
		f.mu.Unlock()
		if n == 0 {
			select {
			case <-f.wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		msgs := make([]*message.Message[item], n)
		for i := range msgs {
			msgs[i] = message.New(item{Feed: f.name, Seq: next}, nil, uint64(next))
			next++
		}
		pf.Deliver(msgs...)
		f.fetched.Add(int64(n))
	}
	return nil
}

func (f *brokerFeed) grantList() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.grants)
}

func (s *brokerSource) all() []*brokerFeed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.feeds)
}

func (s *brokerSource) byName(name string) *brokerFeed {
	for _, f := range s.all() {
		if f.name == name {
			return f
		}
	}
	return nil
}

// watchWindows makes rec measure, at the start of every Publish call, the
// outstanding permits (granted by the stage minus accepted by the Output) of
// every feed of the publishing stage. At that moment the stage has charged
// everything the Output accepted from it before, and every refill that
// charge caused has been granted, so the figure is exact and is the largest
// it gets between two calls.
func (s *brokerSource) watchWindows(rec *recorder) {
	rec.before = func(_ context.Context, msgs []*message.Message[item]) error {
		stage := s.byName(msgs[0].Data.Feed).stage
		for _, f := range s.all() {
			if f.stage != stage {
				continue
			}
			published := rec.count(f.name)
			f.mu.Lock()
			f.maxOut = max(f.maxOut, f.granted-published)
			f.mu.Unlock()
		}
		return nil
	}
}

// verifyFlow checks, once the producer is done, every guarantee of the
// permit window and of delivery for every feed of src.
func verifyFlow(t *testing.T, src *brokerSource, rec *recorder, flow producer.Flow, feeds int) {
	t.Helper()
	all := src.all()
	if len(all) != feeds {
		t.Fatalf("%d feeds registered, want %d", len(all), feeds)
	}
	window := flow.MaxWindow()
	for _, f := range all {
		f.mu.Lock()
		grants := slices.Clone(f.grants)
		maxOut := max(f.maxOut, f.granted-rec.count(f.name)) // the last refill, after the last call
		maxStats, problems := f.maxStats, slices.Clone(f.problems)
		f.mu.Unlock()
		for _, p := range problems {
			t.Errorf("feed %s: %s", f.name, p)
		}
		if len(grants) == 0 || grants[0] != flow.Initial {
			t.Errorf("feed %s: grants %v, want the first to be Initial=%d", f.name, grants, flow.Initial)
		}
		for i, g := range grants[min(1, len(grants)):] {
			if g != flow.Refill {
				t.Errorf("feed %s: grant #%d is %d, want Refill=%d (grants %v)", f.name, i+1, g, flow.Refill, grants)
				break
			}
		}
		if maxOut > window {
			t.Errorf("feed %s: %d permits outstanding at the Output, more than max(Initial, Threshold+Refill) = %d", f.name, maxOut, window)
		}
		if maxStats > window {
			t.Errorf("feed %s: Stats showed %d permits outstanding at a refill, more than %d", f.name, maxStats, window)
		}
		if got, want := rec.seqs(f.name), seqRange(src.perFeed); !slices.Equal(got, want) {
			t.Errorf("feed %s: published %d messages %v, want each of its %d deliveries once, in order", f.name, len(got), abbrev(got), src.perFeed)
		}
		st := f.feed.Load().Stats()
		if st.Delivered != src.perFeed || st.Dispatched != src.perFeed {
			t.Errorf("feed %s: Stats() = %+v, want Delivered = Dispatched = %d", f.name, st, src.perFeed)
		}
	}
}

func seqRange(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func abbrev(s []int) string {
	if len(s) <= 12 {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v…%v", s[:6], s[len(s)-6:])
}

// harness runs a producer; the test's cleanup cancels the hard-stop context
// and waits for every goroutine the producer started.
type harness struct {
	p      *producer.Producer[item]
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	fatals []error
}

func start(t *testing.T, name string, opts producer.Options[item], out producer.Output[item], log *slog.Logger) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{cancel: cancel}
	h.p = producer.New(opts.WithDefaults(), producer.Config[item]{Name: name, Logger: log, Output: out})
	h.p.Start(ctx, &h.wg, func(err error) {
		h.mu.Lock()
		h.fatals = append(h.fatals, err)
		h.mu.Unlock()
	})
	t.Cleanup(func() {
		cancel()
		h.wg.Wait()
	})
	return h
}

func (h *harness) fatalErrs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.fatals)
}

const deadline = 10 * time.Second

// waitDone waits for the producer's Done, failing after a generous deadline.
func waitDone(t *testing.T, h *harness) {
	t.Helper()
	select {
	case <-h.p.Done():
	case <-time.After(deadline):
		buf := make([]byte, 1<<20)
		t.Fatalf("timed out waiting for the producer's Done\n%s", buf[:runtime.Stack(buf, true)])
	}
	h.wg.Wait()
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// logRecorder is a slog.Handler that keeps every record's message and
// attributes (including those added with Logger.With).
type logRecorder struct {
	mu    *sync.Mutex
	recs  *[]string
	attrs []slog.Attr
}

func newLogRecorder() (*slog.Logger, func() []string) {
	h := logRecorder{mu: new(sync.Mutex), recs: new([]string)}
	return slog.New(h), func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(*h.recs)
	}
}

// countLines counts the lines that contain every one of parts.
func countLines(lines []string, parts ...string) int {
	n := 0
next:
	for _, l := range lines {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, b.String())
	h.mu.Unlock()
	return nil
}

func (h logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clone(h.attrs), as...)
	return h
}

func (h logRecorder) WithGroup(string) slog.Handler { return h }

// ---------------------------------------------------------------------------
// Lifecycle.

// Guarantee: stages are named "<pipeline>.producer.<i>", indexed 0..Concurrency-1, and carry the feeds' Flow.
func TestStageIdentity(t *testing.T) {
	flow := producer.Flow{Initial: 10, Threshold: 3, Refill: 4}
	p := producer.New(producer.Options[item]{Source: &brokerSource{}, Concurrency: 3, Flow: flow}.WithDefaults(),
		producer.Config[item]{Name: "orders", Output: newRecorder()})
	stages := p.Stages()
	if len(stages) != 3 {
		t.Fatalf("%d stages, want Concurrency = 3", len(stages))
	}
	for i, s := range stages {
		if s.Index() != i || s.Name() != fmt.Sprintf("orders.producer.%d", i) || s.Flow() != flow || s.Logger() == nil {
			t.Errorf("stage %d: Index %d, Name %q, Flow %+v, Logger %v", i, s.Index(), s.Name(), s.Flow(), s.Logger())
		}
	}
}

// Guarantee: an exhausted source (Run returned nil) finishes the producer once its buffer is dispatched, not before.
func TestExhaustedSourceFinishesAfterDispatch(t *testing.T) {
	rec := newRecorder()
	release, _ := rec.hold()
	src := &brokerSource{feedsPerStage: 2, perFeed: 30}
	h := start(t, "p", producer.Options[item]{Source: src}, rec, nil)

	wait.For(t, "every message to be delivered", func() bool {
		fs := src.all()
		return len(fs) == 2 && fs[0].fetched.Load() == 30 && fs[1].fetched.Load() == 30
	})
	// The Output holds everything, so the buffer cannot be empty: Done must wait.
	if isClosed(h.p.Done()) {
		t.Fatal("Done closed while delivered messages were still buffered")
	}
	release()
	waitDone(t, h)
	verifyFlow(t, src, rec, producer.Flow{}.WithDefaults(), 2)
	if errs := h.fatalErrs(); len(errs) != 0 {
		t.Errorf("fatal called for an exhausted source: %v", errs)
	}
}

// Guarantee: StopFetching cancels Run's context, and what the source delivered before is still dispatched.
func TestStopFetchingCancelsRunAndDrainsBuffer(t *testing.T) {
	rec := newRecorder()
	release, blocked := rec.hold()
	runErr := make(chan error, 1)
	var feed atomic.Pointer[producer.Feed[item]]
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("only", func(int) {})
		feed.Store(f)
		for i := range 40 {
			f.Deliver(message.New(item{Feed: "only", Seq: i}, nil, 0))
		}
		<-ctx.Done()
		runErr <- ctx.Err()
		return ctx.Err()
	})
	h := start(t, "p", producer.Options[item]{Source: src}, rec, nil)
	wait.For(t, "the Output to be busy", func() bool { return blocked.Load() == 1 && feed.Load() != nil && feed.Load().Stats().Delivered == 40 })

	h.p.StopFetching()
	h.p.StopFetching() // safe to call twice
	select {
	case err := <-runErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run's ctx error = %v, want context.Canceled", err)
		}
	case <-time.After(deadline):
		t.Fatal("Run's context was not cancelled by StopFetching")
	}
	if isClosed(h.p.Done()) {
		t.Fatal("Done closed before the buffered messages were dispatched")
	}
	release()
	waitDone(t, h)
	if got := rec.seqs("only"); !slices.Equal(got, seqRange(40)) {
		t.Errorf("published %v, want the 40 buffered messages in order", abbrev(got))
	}
}

// Guarantee: StopFetching called before Start still stops the source (Run sees a cancelled context) and the producer finishes.
func TestStopFetchingBeforeStart(t *testing.T) {
	calls := atomic.Int32{}
	src := producer.SourceFunc[item](func(ctx context.Context, _ *producer.Stage[item]) error {
		calls.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := producer.New(producer.Options[item]{Source: src}.WithDefaults(), producer.Config[item]{Name: "p", Output: newRecorder()})
	p.StopFetching()
	var wg sync.WaitGroup
	p.Start(ctx, &wg, func(err error) { t.Errorf("fatal: %v", err) })
	select {
	case <-p.Done():
	case <-time.After(deadline):
		t.Error("the producer kept fetching after StopFetching was called before Start")
		cancel()
	}
	wg.Wait()
}

// Guarantee: Abandon closes the Abandoned channel of every stage, and may be
// called again: a later call changes nothing and does not panic.
func TestAbandonClosesEveryStagesAbandonedAndMayBeCalledAgain(t *testing.T) {
	src := producer.SourceFunc[item](func(ctx context.Context, _ *producer.Stage[item]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	p := producer.New(producer.Options[item]{Source: src, Concurrency: 2}.WithDefaults(), producer.Config[item]{Name: "p", Output: newRecorder()})
	stages := p.Stages()
	if len(stages) != 2 {
		t.Fatalf("%d stages, want 2", len(stages))
	}
	for i, st := range stages {
		if isClosed(st.Abandoned()) {
			t.Fatalf("stage %d: Abandoned closed before Abandon", i)
		}
	}
	p.Abandon()
	p.Abandon()
	for i, st := range stages {
		if !isClosed(st.Abandoned()) {
			t.Errorf("stage %d: Abandoned still open after Abandon", i)
		}
	}
}

// Guarantee: cancelling the hard-stop context stops dispatching — buffered messages are left undispatched — and Done still closes.
func TestHardStopLeavesBufferUndispatched(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The first Publish call is in the processors' hands when the hard stop
	// comes; after it, the Output has room and would accept anything it is
	// given (a Publish need not look at ctx when it does not block).
	rec := newRecorder()
	entered, firstDone := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	rec.before = func(context.Context, []*message.Message[item]) error {
		if first.CompareAndSwap(false, true) {
			close(entered)
			<-firstDone
		}
		return nil
	}
	var feed atomic.Pointer[producer.Feed[item]]
	delivered := make(chan struct{})
	src := producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		f := st.NewFeed("only", func(int) {})
		feed.Store(f)
		f.Deliver(message.New(item{Feed: "only", Seq: 0}, nil, 0))
		select {
		case <-entered:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := 1; i < 10; i++ {
			f.Deliver(message.New(item{Feed: "only", Seq: i}, nil, 0))
		}
		close(delivered)
		<-ctx.Done()
		return ctx.Err()
	})
	p := producer.New(producer.Options[item]{Source: src}.WithDefaults(), producer.Config[item]{Name: "p", Output: rec})
	p.Start(ctx, &wg, func(err error) { t.Errorf("fatal: %v", err) })

	select {
	case <-delivered:
	case <-time.After(deadline):
		close(firstDone)
		t.Fatal("the source did not deliver its messages")
	}
	cancel()
	close(firstDone)
	select {
	case <-p.Done():
	case <-time.After(deadline):
		t.Fatal("Done did not close after the hard stop")
	}
	wg.Wait()
	if got := rec.published(); got != 1 {
		t.Errorf("%d messages published, want only the 1 handed over before the hard stop", got)
	}
	if st := feed.Load().Stats(); st.Delivered != 10 || st.Dispatched != 1 {
		t.Errorf("Stats() = %+v, want Delivered 10, Dispatched 1", st)
	}
}

// Guarantee: a push-only producer (no Source) has no stage and is done only once StopFetching is called.
func TestPushOnlyDoneAfterStopFetching(t *testing.T) {
	h := start(t, "p", producer.Options[item]{}, newRecorder(), nil)
	if n := len(h.p.Stages()); n != 0 {
		t.Fatalf("%d stages for a push-only producer, want 0", n)
	}
	// No sync point exists for "not yet": watch Done for a while.
	select {
	case <-h.p.Done():
		t.Fatal("Done closed before StopFetching")
	case <-time.After(50 * time.Millisecond):
	}
	h.p.StopFetching()
	waitDone(t, h)
	if err := h.p.Close(context.Background()); err != nil {
		t.Errorf("Close of a push-only producer = %v", err)
	}
}

// Guarantee: a push-only producer is also done when the hard-stop context is cancelled.
func TestPushOnlyDoneOnHardStop(t *testing.T) {
	h := start(t, "p", producer.Options[item]{}, newRecorder(), nil)
	h.cancel()
	waitDone(t, h)
}

type closingSource struct {
	producer.SourceFunc[item]
	closed atomic.Int32
}

func (c *closingSource) Close(context.Context) error {
	c.closed.Add(1)
	return errors.New("close failed")
}

// Guarantee: Close closes the source and returns its error.
func TestCloseClosesSource(t *testing.T) {
	src := &closingSource{SourceFunc: func(context.Context, *producer.Stage[item]) error { return nil }}
	h := start(t, "p", producer.Options[item]{Source: src}, newRecorder(), nil)
	waitDone(t, h)
	if err := h.p.Close(context.Background()); err == nil || err.Error() != "close failed" {
		t.Errorf("Close = %v, want the source's error", err)
	}
	if n := src.closed.Load(); n != 1 {
		t.Errorf("source closed %d times, want 1", n)
	}
}

// ---------------------------------------------------------------------------
// Restart.

// scriptedSource calls script (or run, which also gets the stage) with the
// 1-based number of each Run call and records when each call started and
// returned.
type scriptedSource struct {
	producer.Basic
	script func(ctx context.Context, call int) error
	run    func(ctx context.Context, st *producer.Stage[item], call int) error

	mu      sync.Mutex
	started []time.Time
	ended   []time.Time
}

func (s *scriptedSource) Run(ctx context.Context, st *producer.Stage[item]) error {
	s.mu.Lock()
	s.started = append(s.started, time.Now())
	n := len(s.started)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.ended = append(s.ended, time.Now())
		s.mu.Unlock()
	}()
	if s.run != nil {
		return s.run(ctx, st, n)
	}
	return s.script(ctx, n)
}

func (s *scriptedSource) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.started)
}

// gaps returns, for each restart, the time between a failed Run's return and the next call.
func (s *scriptedSource) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(s.started) && i <= len(s.ended); i++ {
		g = append(g, s.started[i].Sub(s.ended[i-1]))
	}
	return g
}

// Guarantee: a source whose Run fails is called again after the backoff, which doubles per consecutive failure.
func TestRestartAfterBackoff(t *testing.T) {
	const backoff = 15 * time.Millisecond
	src := &scriptedSource{script: func(ctx context.Context, call int) error {
		if call <= 3 {
			return fmt.Errorf("broker unreachable (%d)", call)
		}
		<-ctx.Done()
		return nil
	}}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 5, Window: time.Hour, Backoff: backoff, MaxBackoff: time.Second}}, newRecorder(), nil)
	wait.For(t, "the fourth Run call", func() bool { return src.calls() == 4 })
	for i, g := range src.gaps() {
		if want := backoff << i; g < want {
			t.Errorf("restart %d came %v after the failure, want at least the backoff %v", i+1, g, want)
		}
	}
	h.p.StopFetching()
	waitDone(t, h)
	if errs := h.fatalErrs(); len(errs) != 0 {
		t.Errorf("fatal called with %v, want no give-up within MaxRestarts", errs)
	}
}

// Guarantee: more than MaxRestarts failures within Window call fatal once with a *RestartError naming the stage and wrapping ErrTooManyRestarts and the last error.
func TestTooManyRestartsIsFatal(t *testing.T) {
	var errs [5]error
	for i := range errs {
		errs[i] = fmt.Errorf("broker unreachable (%d)", i+1)
	}
	src := &scriptedSource{script: func(_ context.Context, call int) error { return errs[call-1] }}
	window := time.Hour
	h := start(t, "orders", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 3, Window: window, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}}, newRecorder(), nil)
	waitDone(t, h)

	if n := src.calls(); n != 4 {
		t.Errorf("Run called %d times, want 1 + MaxRestarts = 4", n)
	}
	fatals := h.fatalErrs()
	if len(fatals) != 1 {
		t.Fatalf("fatal called %d times (%v), want once", len(fatals), fatals)
	}
	err := fatals[0]
	var re *producer.RestartError
	if !errors.As(err, &re) {
		t.Fatalf("fatal error %T %v, want a *RestartError", err, err)
	}
	if !errors.Is(err, producer.ErrTooManyRestarts) {
		t.Errorf("%v does not wrap ErrTooManyRestarts", err)
	}
	if !errors.Is(err, errs[3]) || errors.Is(err, errs[2]) {
		t.Errorf("%v should wrap the last error %q only", err, errs[3])
	}
	if re.Stage != "orders.producer.0" || re.Restarts != 3 || re.Window != window {
		t.Errorf("RestartError = %+v, want Stage orders.producer.0, Restarts 3, Window %v", re, window)
	}
	if !strings.Contains(err.Error(), "orders.producer.0") || !strings.Contains(err.Error(), errs[3].Error()) {
		t.Errorf("error text %q should name the stage and the last error", err)
	}
}

// Guarantee: a panicking Run is recovered and treated as a failure: restarted, then fatal with the panic as the last error.
func TestPanickingSourceIsRestarted(t *testing.T) {
	boom := errors.New("boom")
	src := &scriptedSource{script: func(context.Context, int) error { panic(boom) }}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 1, Window: time.Hour, Backoff: 5 * time.Millisecond}}, newRecorder(), nil)
	waitDone(t, h)
	if n := src.calls(); n != 2 {
		t.Errorf("Run called %d times, want 2 (a panic is restarted like an error)", n)
	}
	if g := src.gaps(); len(g) != 1 || g[0] < 5*time.Millisecond {
		t.Errorf("restart gaps %v, want one of at least the 5ms backoff", g)
	}
	fatals := h.fatalErrs()
	if len(fatals) != 1 {
		t.Fatalf("fatal called %d times (%v), want once", len(fatals), fatals)
	}
	var pe *message.PanicError
	if !errors.As(fatals[0], &pe) || !errors.Is(fatals[0], boom) || !errors.Is(fatals[0], producer.ErrTooManyRestarts) {
		t.Errorf("fatal error %v, want ErrTooManyRestarts wrapping a *message.PanicError of boom", fatals[0])
	}
}

// Guarantee: failures further apart than Window never add up to a give-up.
func TestFailuresSpreadWiderThanWindowKeepRestarting(t *testing.T) {
	const window = 25 * time.Millisecond
	src := &scriptedSource{script: func(ctx context.Context, call int) error {
		if call > 4 {
			<-ctx.Done()
			return nil
		}
		// The source works for a while (longer than Window), then fails.
		select {
		case <-time.After(2 * window):
		case <-ctx.Done():
			return nil
		}
		return errors.New("connection reset")
	}}
	h := start(t, "p", producer.Options[item]{Source: src, Restart: producer.Restart{MaxRestarts: 1, Window: window, Backoff: time.Millisecond}}, newRecorder(), nil)
	wait.For(t, "the fifth Run call", func() bool { return src.calls() == 5 })
	h.p.StopFetching()
	waitDone(t, h)
	if errs := h.fatalErrs(); len(errs) != 0 {
		t.Errorf("fatal called with %v for failures spread wider than Window", errs)
	}
}

// ---------------------------------------------------------------------------
// Rate limit.

// Guarantee: all stages together publish no more than a token bucket of Allowed tokens refilled at Allowed/Interval lets through.
func TestRateLimitIsATokenBucket(t *testing.T) {
	const allowed, interval, perStage = 50, 100 * time.Millisecond, 150
	rec := newRecorder()
	src := &brokerSource{feedsPerStage: 1, perFeed: perStage}
	t0 := time.Now()
	h := start(t, "p", producer.Options[item]{Source: src, Concurrency: 2, RateLimit: &producer.RateLimit{Allowed: allowed, Interval: interval}}, rec, nil)
	waitDone(t, h)

	total := 0
	for _, c := range rec.history() {
		// A token bucket never lets more than its size through at once.
		if c.size > allowed {
			t.Errorf("one Publish call carried %d messages, more than Allowed = %d", c.size, allowed)
		}
		total += c.size
		// Published by time t ≤ Allowed + Allowed·t/Interval (+1 for rounding).
		limit := allowed + float64(allowed)*float64(c.at.Sub(t0))/float64(interval) + 1
		if float64(total) > limit {
			t.Errorf("%d messages published %v after start, the bucket allows %.0f", total, c.at.Sub(t0), limit)
		}
	}
	if total != 2*perStage {
		t.Errorf("%d messages published, want %d", total, 2*perStage)
	}
}

// feedSource registers one feed named "only" and waits for its context;
// the test delivers through feed(). It gets the default Initial of 100
// permits and never delivers more.
func feedSource() (producer.Source[item], func() *producer.Feed[item]) {
	var feed atomic.Pointer[producer.Feed[item]]
	return producer.SourceFunc[item](func(ctx context.Context, st *producer.Stage[item]) error {
		feed.Store(st.NewFeed("only", func(int) {}))
		<-ctx.Done()
		return ctx.Err()
	}), feed.Load
}

func items(from, to int) []*message.Message[item] {
	var msgs []*message.Message[item]
	for i := from; i < to; i++ {
		msgs = append(msgs, message.New(item{Feed: "only", Seq: i}, nil, 0))
	}
	return msgs
}

// Guarantee: SetRateLimit(nil) while a stage waits on a slow limit lets the rest through promptly.
func TestSetRateLimitLiftsLimitWhileRunning(t *testing.T) {
	rec := newRecorder()
	src, feed := feedSource()
	h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 2, Interval: time.Hour}}, rec, nil)
	wait.For(t, "the feed", func() bool { return feed() != nil })
	feed().Deliver(items(0, 20)...)
	// The bucket's 2 tokens let 2 through; the next ones are due in half an hour.
	wait.For(t, "the bucket's 2 tokens to be used", func() bool { return rec.published() >= 2 })
	if got := rec.published(); got != 2 {
		t.Fatalf("%d messages published under a limit of 2 per hour", got)
	}
	h.p.SetRateLimit(nil)
	wait.For(t, "the rest to be published once the limit is lifted", func() bool { return rec.published() == 20 })
	if got := rec.seqs("only"); !slices.Equal(got, seqRange(20)) {
		t.Errorf("published %v, want the 20 messages in order", abbrev(got))
	}
}

// Guarantee: SetRateLimit tightens the limit while running: from then on no Publish call carries more than the new bucket holds, and no more pass than it allows.
func TestSetRateLimitTightensWhileRunning(t *testing.T) {
	rec := newRecorder()
	release, blocked := rec.hold()
	src, feed := feedSource()
	h := start(t, "p", producer.Options[item]{Source: src}, rec, nil)
	wait.For(t, "the feed", func() bool { return feed() != nil })
	feed().Deliver(items(0, 1)...)
	wait.For(t, "the Output to be busy with the first message", func() bool { return blocked.Load() == 1 })
	feed().Deliver(items(1, 100)...) // buffered while the Output is busy

	h.p.SetRateLimit(&producer.RateLimit{Allowed: 5, Interval: time.Hour})
	release()
	wait.For(t, "the call in flight and a call under the new limit", func() bool { return len(rec.history()) >= 2 })
	var sizes []int
	for _, c := range rec.history() {
		sizes = append(sizes, c.size)
	}
	if !slices.Equal(sizes, []int{1, 5}) {
		t.Errorf("Publish calls of %v messages, want the 1 in flight, then the new bucket's 5, then nothing for an hour", sizes)
	}
	h.cancel()
	waitDone(t, h)
}

// Guarantee: a stage waiting on the rate limit stops at the hard stop, leaving its messages undispatched.
func TestHardStopInterruptsRateLimitWait(t *testing.T) {
	rec := newRecorder()
	src := &brokerSource{feedsPerStage: 1, perFeed: 10}
	h := start(t, "p", producer.Options[item]{Source: src, RateLimit: &producer.RateLimit{Allowed: 1, Interval: time.Hour}}, rec, nil)
	wait.For(t, "the bucket's token to be used", func() bool { return rec.published() == 1 })
	h.cancel()
	waitDone(t, h)
	if got := rec.published(); got != 1 {
		t.Errorf("%d published, want 1", got)
	}
}
