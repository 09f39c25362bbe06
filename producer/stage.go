package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/boulevard-go/boulevard/internal/cond"
	"github.com/boulevard-go/boulevard/internal/panics"
	"github.com/boulevard-go/boulevard/internal/release"
	"github.com/boulevard-go/boulevard/message"
)

// dispatchChunk is the largest number of messages a stage hands to the
// processors (and charges to feeds) at once.
const dispatchChunk = 64

// output is where producer stages hand their messages: the processors'
// input. Publish blocks while the processors are busy (that is the
// backpressure the permit window rests on) and returns how many messages it
// took before an error.
type output[T any] interface {
	Publish(ctx context.Context, msgs []*message.Message[T]) (int, error)
}

// directOutput is an output that can also take messages without waiting. When
// the pipeline's processors offer it, a delivery that finds the stage
// buffer empty goes straight to them, as far as they have room, instead of
// through the stage's dispatching goroutine; permits are charged the same
// way, when the messages leave for the processors.
type directOutput[T any] interface {
	output[T]
	// TryPublish takes the longest prefix of msgs it has room for, without
	// blocking, and returns its length, with an error once it is closed.
	TryPublish(msgs []*message.Message[T]) (int, error)
}

// exitOutput is a directOutput that calls user code as it takes messages
// (the processors' PartitionBy), which may end the goroutine handing them
// over (runtime.Goexit). The stage then hands messages over with
// PublishProgress and TryPublishProgress, which set *progress before each
// such call to how many of msgs they have taken, msgs[:*progress]; when
// the goroutine ends, FailExited gives the others their outcome
// (message.ErrHandlerExited), reporting them to their acknowledgers.
// While that user code runs, they hold in keying when it began, as the
// time since epoch, and 0 otherwise (see Stage.HandOffAge); with no such
// user code they read no clock.
type exitOutput[T any] interface {
	directOutput[T]
	PublishProgress(ctx context.Context, msgs []*message.Message[T], progress *int, keying *atomic.Int64, epoch time.Time) (int, error)
	TryPublishProgress(msgs []*message.Message[T], progress *int, keying *atomic.Int64, epoch time.Time) (int, error)
	FailExited(ctx context.Context, msgs []*message.Message[T]) int
}

// Stage is one producer stage: the handle a Source's Run receives. It owns
// the stage buffer that the source's feeds deliver into and the goroutine
// that moves buffered messages to the processors, charging permits as they
// leave.
type Stage[T any] struct {
	index int
	name  string
	log   *slog.Logger
	flow  Flow
	out   output[T]
	try   directOutput[T] // out, when it can take messages without waiting
	exits exitOutput[T]   // out, when user code it calls may end the goroutine
	stop  context.Context // the dispatcher's (hard-stop) context, set by start
	gate  *gate
	// release is the pipeline's release signal (Feed.FlushInFlight).
	release *release.Signal
	// abandoned is the producer's, closed once the stages have returned
	// from a drain the pipeline cut short (see Abandoned).
	abandoned <-chan struct{}

	mu      sync.Mutex
	pending []entry[T] // pending[head:] wait to be dispatched, in delivery order
	head    int
	// queued is len(pending) - head, stored under mu whenever the buffer
	// changes, so that Buffered never waits for mu: a delivery going
	// straight to the processors holds mu while their PartitionBy, user
	// code, runs.
	queued atomic.Int64
	// handed is how many messages of a delivery the processors took
	// while it goes straight to them (put): progress for TryPublish.
	handed   int
	finished bool
	running  bool        // inside a Run call: feeds may be registered
	busy     bool        // the dispatcher holds a chunk taken from pending
	idle     cond.Signal // broadcast when nothing is queued and !busy
	// feeds are the current run's feeds, in registration order; closed
	// counts those of them closed since the list was last compacted
	// (Feed.Close drops the closed ones once they are half of it, so
	// that a run through many rebalances keeps only its open feeds).
	// fmu guards them, is taken after mu when both are held and is never
	// held across a call out of the package, so that FeedStats never
	// waits on user code.
	fmu    sync.Mutex
	feeds  []*Feed[T]
	closed int
	wake   chan struct{}
	// refills are push-model feeds whose permits fell to the threshold in
	// a direct hand-off (deliver): the dispatcher grants their refill, so
	// that a grant callback never runs inside the source's own Deliver.
	refills, spare []*Feed[T]
	// The current run of the source: its number, when it created its first
	// feed (zero: not yet) and whether one of its feeds delivered.
	attempt     int
	connectedAt time.Time
	delivered   bool

	stMu   sync.Mutex // guards status; taken after mu when both are held
	status StageStatus

	unhandled atomic.Uint64 // see Unhandled

	// keying is when the hand-over under way began running the
	// processors' PartitionBy, as the time since epoch in nanoseconds
	// plus 1 (never 0), and 0 when none does (HandOffAge). A stage hands over one batch at a time: a delivery
	// goes straight to the processors only while the dispatcher holds
	// no chunk.
	keying atomic.Int64
	epoch  time.Time

	// Withdrawals (Feed.Withdraw) waiting for mu: whichever of them gets
	// mu first serves them all in one pass over the buffer, so that
	// partitions released together (a rebalance, a stop) cost one pass,
	// not one each. wmu guards withdrawals and is taken after mu when
	// both are held.
	wmu         sync.Mutex
	withdrawals []*withdrawal[T]
	scanned     uint64 // buffer entries the withdrawals visited (tests); guarded by mu
}

// withdrawal is one Withdraw call: a feed whose buffered messages are to
// be taken out (and, with collect, appended to dst). The pass that serves
// it sets n and done, under the stage mutex.
type withdrawal[T any] struct {
	feed    *Feed[T]
	collect bool
	dst     []*message.Message[T]
	n       int
	done    bool
}

type entry[T any] struct {
	msg  *message.Message[T]
	feed *Feed[T]
}

// Index is the stage's position among the pipeline's producer stages, from 0
// to Concurrency-1.
func (s *Stage[T]) Index() int { return s.index }

// Name is the stage's name, "<pipeline>.producer.<index>".
func (s *Stage[T]) Name() string { return s.name }

// Logger is the pipeline's logger, annotated with the stage name.
func (s *Stage[T]) Logger() *slog.Logger { return s.log }

// Flow is the permit window every feed of this stage gets.
func (s *Stage[T]) Flow() Flow { return s.flow }

// Buffered reports how many delivered messages wait in the stage buffer.
// It never waits for a delivery under way, nor for the user code (the
// processors' PartitionBy) that one runs.
func (s *Stage[T]) Buffered() int { return int(s.queued.Load()) }

// Unhandled counts the messages delivered to the stage that it will never
// hand to the processors: those it still held, in its buffer or on their
// way to the processors, when the pipeline's hard stop (a drain cut short
// by the shutdown timeout) ended its dispatching, and those delivered to
// it after that. It is counted once the source's Run and the stage's
// dispatching have both returned, and equals the "messages" of the
// stage's warning then. Withdrawn messages are the source's and are not
// counted.
func (s *Stage[T]) Unhandled() uint64 { return s.unhandled.Load() }

// Abandoned returns a channel closed once the pipeline has cut its drain
// short (its shutdown timeout passed, or Stop's context ended) and its
// stages have returned: every outcome the pipeline's processors and
// batchers were to report is in, and a message delivered to the stage that
// has none by then gets none, but perhaps from user code that ignored its
// context, which the pipeline no longer waits for. The pipeline closes the
// source after that, and the source's Close need not wait for those
// messages: the Kafka sources stop waiting for a released partition's
// in-flight messages and commit what was handled. It stays open while the
// pipeline runs and drains, during the cut-short drain's last outcomes
// too, and after a drain that completed.
func (s *Stage[T]) Abandoned() <-chan struct{} { return s.abandoned }

// HandOffAge reports how long, at now, the stage's hand-over of delivered
// messages to the processors has been running their PartitionBy (user
// code, called on the goroutine of the source's Deliver or on the stage's
// dispatching goroutine): 0 when none runs, and always 0 when the
// processors have no PartitionBy. While a PartitionBy blocks, the stage
// hands nothing over and the source's Deliver waits. It is exact, not
// sampled, and safe to call from any goroutine; the pipeline's stall
// watch and Stats (ProducerStats.LongestHandOff) read it.
func (s *Stage[T]) HandOffAge(now time.Time) time.Duration {
	at := s.keying.Load()
	if at == 0 {
		return 0
	}
	return max(now.Sub(s.epoch)-time.Duration(at-1), 0)
}

// queuedLocked is the number of messages waiting in the stage buffer.
func (s *Stage[T]) queuedLocked() int { return len(s.pending) - s.head }

// NewFeed registers one flow-controlled consumer of the source (a Pulsar
// consumer, a Kafka partition, …) under name, and grants it Flow.Initial
// permits before it returns; later it grants Flow.Refill more each time the
// feed's remaining permits fall to Flow.Threshold.
//
// A source learns of its grants in one of two ways:
//
//   - grant != nil (push model, for sources whose consumers are told of new
//     permits, such as the Kafka and Pulsar sources, whose partition
//     readers and receive loops wait for a grant): grant is called with
//     the number of new
//     permits: the first time from NewFeed itself, later from the stage's
//     dispatching goroutine, possibly several times in a row and after the
//     source's own loop has ended. It must neither block nor call
//     Feed.Close (it may call Deliver): a grant that blocks stops the stage
//     from dispatching and from closing its feeds, so Run never returns.
//     Record the permits and wake the source instead. A panic in it is
//     recovered and logged. An exit (runtime.Goexit) in it is logged, with
//     its stack, and ends the goroutine that called it: when that is the
//     stage's dispatcher (a refill), another goroutine takes over the
//     dispatching; when it is Run's (the first grant, from NewFeed), the
//     run fails.
//   - grant == nil (pull model, for sources that fetch in a loop, such as
//     the topic source): the
//     permits accumulate in the feed, and the source takes them with
//     Feed.Acquire or Feed.TryAcquire before it fetches that many messages.
//
// The feed is closed when Run returns, or when the source calls Feed.Close:
// no grant happens after Close has returned. A feed registered outside Run
// (for example from a goroutine that outlived it) is born closed and gets no
// permits. So is one registered on a Stage the producer did not make (a
// zero value, or nil): it is a zero Feed, and the warning goes to
// slog.Default().
func (s *Stage[T]) NewFeed(name string, grant func(n int)) *Feed[T] {
	if s == nil || s.log == nil {
		slog.Warn("feed registered on a Stage the producer did not make; it gets no permits", slog.String("feed", name))
		return &Feed[T]{name: name}
	}
	f := &Feed[T]{stage: s, name: name, grant: grant, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.Lock()
	if s.running && s.connectedAt.IsZero() {
		s.connectedAt = time.Now()
		s.stMu.Lock()
		if s.status.State == StateConnecting {
			// A degraded run stays degraded until its source says it
			// reads again.
			s.status.State, s.status.Since = StateRunning, s.connectedAt
		}
		s.stMu.Unlock()
	}
	f.attempt = s.attempt
	if !s.running {
		s.mu.Unlock()
		f.closed.Store(true)
		close(f.done)
		s.log.Warn("feed registered outside the source's Run; it gets no permits", slog.String("feed", name))
		return f
	}
	s.fmu.Lock()
	s.feeds = append(s.feeds, f)
	s.fmu.Unlock()
	s.mu.Unlock()
	f.give(s.flow.Initial)
	return f
}

// startRun marks the beginning of a Run call: feeds may be registered.
func (s *Stage[T]) startRun(now time.Time) {
	s.mu.Lock()
	s.running = true
	s.attempt++
	s.connectedAt = time.Time{}
	s.delivered = false
	s.setState(StateConnecting, now, nil)
	s.mu.Unlock()
}

// closeFeeds ends a Run call: every feed it registered is closed. It
// reports when the run created its first feed (zero if it created none) and
// whether it delivered a message.
func (s *Stage[T]) closeFeeds() (connectedAt time.Time, delivered bool) {
	s.mu.Lock()
	s.fmu.Lock()
	feeds := s.feeds
	s.feeds, s.closed = nil, 0
	s.fmu.Unlock()
	s.running = false
	connectedAt, delivered = s.connectedAt, s.delivered
	s.mu.Unlock()
	for _, f := range feeds {
		f.Close()
	}
	return connectedAt, delivered
}

// deliver puts msgs into the buffer, or hands them straight to the
// processors. It reports false, taking none of them, once the source is
// done delivering (finish).
func (s *Stage[T]) deliver(f *Feed[T], msgs []*message.Message[T]) bool {
	direct, ok := s.put(f, msgs)
	if !ok {
		return false
	}
	s.handedOver(f, direct, direct < len(msgs))
	return true
}

// handedOver charges f the direct messages of its delivery that left for
// the processors, queueing its refill for the dispatcher when one is due,
// and wakes the dispatcher when it has work (or wake is set).
func (s *Stage[T]) handedOver(f *Feed[T], direct int, wake bool) {
	if direct > 0 && f.chargeDirect(direct) {
		s.mu.Lock()
		s.refills = append(s.refills, f)
		s.mu.Unlock()
		wake = true
	}
	if wake {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// put is deliver's part under the stage mutex: it hands over the first
// direct of msgs and buffers the rest; false once the source is done
// delivering. The handing over runs the processors' PartitionBy, user
// code, on the source's goroutine: the mutex is released by a deferred
// call, so that one which ends the goroutine (runtime.Goexit) leaves the
// stage free, and the pipeline can stop; that call then finishes the
// delivery (directExited).
func (s *Stage[T]) put(f *Feed[T], msgs []*message.Message[T]) (direct int, ok bool) {
	s.mu.Lock()
	handing := false
	defer func() {
		if !handing {
			s.mu.Unlock()
			return
		}
		handed := s.handed
		s.keying.Store(0)
		s.mu.Unlock()
		s.directExited(f, msgs, handed)
	}()
	if s.finished {
		return 0, false
	}
	if !s.delivered && f.attempt == s.attempt {
		// The run makes progress: the failures before it no longer count.
		s.delivered = true
		s.stMu.Lock()
		s.status.ConsecutiveFailures = 0
		s.stMu.Unlock()
	}
	if s.directLocked() {
		// Nothing waits before these messages: hand over what the
		// processors have room for now, saving the dispatcher's hop. The
		// stage mutex is held throughout, so the dispatcher cannot take a
		// later delivery first; an error (closed processors) leaves the
		// rest to the dispatcher, which reports it.
		if s.exits != nil {
			handing = true
			direct, _ = s.exits.TryPublishProgress(msgs, &s.handed, &s.keying, s.epoch)
			handing = false
		} else {
			direct, _ = s.try.TryPublish(msgs)
		}
	}
	if direct < len(msgs) {
		for _, m := range msgs[direct:] {
			s.pending = append(s.pending, entry[T]{msg: m, feed: f})
		}
		s.queued.Store(int64(s.queuedLocked()))
	}
	return direct, true
}

// DeliverExitedLog is the error line a stage logs when the processors'
// PartitionBy ended the goroutine of a delivery that went straight to
// them (runtime.Goexit).
const DeliverExitedLog = "user code ended the goroutine delivering to the producer stage (runtime.Goexit) in the processors' PartitionBy; the messages not handed over fail"

// directExited finishes, in put's deferred call, a delivery whose direct
// hand-over the processors' PartitionBy ended (runtime.Goexit): the
// processors took msgs[:handed]; the others fail with
// message.ErrHandlerExited and go to their acknowledgers, as they would
// had a handler ended its goroutine; every message left the stage, so f
// is charged for them all.
func (s *Stage[T]) directExited(f *Feed[T], msgs []*message.Message[T], handed int) {
	rest := msgs[handed:]
	s.handedOver(f, len(msgs), false)
	s.log.Error(DeliverExitedLog, slog.String("feed", f.name), slog.Int("messages", len(rest)),
		slog.String("stack", string(debug.Stack())))
	s.exits.FailExited(s.stop, rest)
}

// directLocked reports whether a delivery may go straight to the
// processors: they can take messages without waiting, the buffer is empty
// and the dispatcher holds no chunk (so nothing delivered earlier is still
// on its way), there is no rate limit, and the pipeline has not been
// stopped hard. The caller holds s.mu.
func (s *Stage[T]) directLocked() bool {
	return s.try != nil && s.queuedLocked() == 0 && !s.busy && s.gate.unlimited() &&
		s.stop != nil && s.stop.Err() == nil
}

// finish marks the source as done delivering; the dispatcher exits once the
// buffer is empty.
func (s *Stage[T]) finish() {
	s.mu.Lock()
	s.finished = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatch moves buffered messages to the output until the source has
// finished and the buffer is empty, or until ctx (the pipeline's hard-stop
// context) is cancelled, in which case what is left stays unacknowledged:
// it returns how many messages it had taken out of the buffer and did not
// hand over (settle counts them with those still buffered).
//
// It takes the buffer one chunk (at most dispatchChunk messages) at a time,
// so that everything but the chunk being handed over stays in the buffer,
// where Feed.Withdraw can still remove it.
func (s *Stage[T]) dispatch(ctx context.Context, d *dispatcher[T]) (lost int) {
	for {
		s.mu.Lock()
		s.busy = false
		if s.queuedLocked() == 0 {
			s.idle.Broadcast()
		}
		for s.queuedLocked() == 0 && len(s.refills) == 0 {
			if s.finished {
				s.mu.Unlock()
				return 0
			}
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-ctx.Done():
				return 0
			}
			s.mu.Lock()
		}
		if len(s.refills) > 0 {
			refills := s.refills
			s.refills, s.spare = s.spare[:0], refills
			s.mu.Unlock()
			d.refills, d.next, d.step = refills, 0, stepRefill
			d.refill() // grants the refills that are due
			continue
		}
		want := min(dispatchChunk, s.queuedLocked())
		s.mu.Unlock()

		if ctx.Err() != nil {
			// Hard stop: an Output with room may accept messages even
			// with a cancelled ctx, so do not offer them.
			return 0
		}
		n, err := s.gate.take(ctx, want)
		if err != nil {
			return 0
		}
		// Take at most n: the buffer may have shrunk meanwhile
		// (Feed.Withdraw), never grown at its front.
		s.mu.Lock()
		k := min(n, s.queuedLocked())
		d.chunk = append(d.chunk[:0], s.pending[s.head:s.head+k]...)
		s.take(k)
		s.busy = k > 0
		s.mu.Unlock()
		if k == 0 {
			continue
		}
		msgs := d.msgs[:0]
		for _, e := range d.chunk {
			msgs = append(msgs, e.msg)
		}
		d.msgs = msgs
		if ctx.Err() != nil {
			return d.release()
		}
		d.step, d.taken = stepPublish, 0
		var got int
		if s.exits != nil {
			got, err = s.exits.PublishProgress(ctx, d.msgs, &d.taken, &s.keying, s.epoch)
		} else {
			got, err = s.out.Publish(ctx, d.msgs)
		}
		if err != nil {
			// Stopping: which messages an Output took before failing
			// need not be a prefix, and no feed will be refilled.
			return d.release() - got
		}
		d.next, d.step = 0, stepCharge
		d.charge()
		d.release()
	}
}

// dispatcher is the state of a stage's dispatching that outlives its
// goroutine: user code it calls (a feed's grant callback, the processors'
// PartitionBy) may end that goroutine with runtime.Goexit, and the next
// dispatching goroutine finishes, with it, what the ended one was doing
// (see dispatchExited). Only the dispatching goroutine of the moment
// touches it.
type dispatcher[T any] struct {
	stage   *Stage[T]
	step    dispatchStep
	chunk   []entry[T]            // the chunk taken from the buffer
	msgs    []*message.Message[T] // its messages, for Publish
	refills []*Feed[T]            // the feeds whose refill is being granted
	next    int                   // stepCharge: chunk[next:] are not charged; stepRefill: refills[next:] are not refilled
	taken   int                   // stepPublish: the processors took msgs[:taken] (Publish's progress)
}

// dispatchStep is what the dispatching goroutine is doing.
type dispatchStep uint8

const (
	stepIdle       dispatchStep = iota
	stepPublish                 // handing d.msgs to the processors
	stepFailExited              // reporting the messages of d.msgs the processors' PartitionBy kept
	stepCharge                  // charging d.chunk's permits to its feeds
	stepRefill                  // granting d.refills' refills
)

func newDispatcher[T any](s *Stage[T]) *dispatcher[T] {
	return &dispatcher[T]{
		stage: s,
		chunk: make([]entry[T], 0, dispatchChunk),
		msgs:  make([]*message.Message[T], 0, dispatchChunk),
	}
}

// charge charges one permit per entry of chunk[next:] to its feed, in runs
// of the same feed. next passes a run before its feed is charged, so that
// a grant callback that ends the goroutine is not called again for it by
// the goroutine that takes over.
func (d *dispatcher[T]) charge() {
	es := d.chunk
	for d.next < len(es) {
		i := d.next
		f := es[i].feed
		j := i + 1
		for j < len(es) && es[j].feed == f {
			j++
		}
		d.next = j
		f.charge(j - i)
	}
}

// refill grants the due refills of refills[next:], passing each feed
// before its grant as charge does.
func (d *dispatcher[T]) refill() {
	for d.next < len(d.refills) {
		f := d.refills[d.next]
		d.next++
		f.charge(0)
	}
	clear(d.refills)
	d.refills, d.step = nil, stepIdle
}

// release lets go of the chunk and returns how many messages it held.
func (d *dispatcher[T]) release() int {
	n := len(d.chunk)
	clear(d.chunk)
	clear(d.msgs)
	d.chunk, d.msgs, d.step = d.chunk[:0], d.msgs[:0], stepIdle
	return n
}

// DispatchExitedLog is the error line a stage logs when user code ended
// its dispatching goroutine (runtime.Goexit).
const DispatchExitedLog = "user code ended the producer stage's dispatching goroutine (runtime.Goexit); another goroutine takes over"

// dispatchExited finishes, on the goroutine that takes over, what the
// dispatching goroutine was doing when user code ended it. Of the chunk it
// was handing to the processors (whose PartitionBy ended it), the
// messages they had not taken fail with message.ErrHandlerExited and go
// to their acknowledgers (an acknowledger that ends this goroutine too
// leaves the rest unreported, and the next one goes on charging), and the
// chunk is charged to its feeds, as it all left the stage; the permits
// of the chunk not yet charged are charged, and the refills not yet
// granted are granted, but for the feed whose grant callback ended it.
func (d *dispatcher[T]) dispatchExited(ctx context.Context, stack []byte) {
	var where string
	attrs := make([]any, 0, 3)
	switch d.step {
	case stepPublish:
		where = "processors' PartitionBy"
		attrs = append(attrs, slog.Int("messages", len(d.msgs)-d.taken))
	case stepFailExited:
		where = "source acknowledger"
	case stepCharge, stepRefill:
		where = "feed grant callback"
	default:
		where = "dispatching"
	}
	attrs = append(attrs, slog.String("in", where), slog.String("stack", string(stack)))
	d.stage.log.Error(DispatchExitedLog, attrs...)
	switch d.step {
	case stepPublish:
		d.stage.keying.Store(0)
		d.step = stepFailExited
		if ex := d.stage.exits; ex != nil {
			ex.FailExited(ctx, d.msgs[d.taken:])
		}
		fallthrough
	case stepFailExited:
		d.next, d.step = 0, stepCharge
		fallthrough
	case stepCharge:
		d.charge()
		d.release()
	case stepRefill:
		d.refill()
	}
}

// take removes the first k queued entries (already copied out) from the
// buffer. The caller holds s.mu.
func (s *Stage[T]) take(k int) {
	clear(s.pending[s.head : s.head+k])
	s.head += k
	switch {
	case s.head == len(s.pending):
		s.pending, s.head = s.pending[:0], 0
	case s.head >= 4*dispatchChunk && s.head >= len(s.pending)/2:
		// Move the rest to the front, so the buffer does not creep
		// through ever new arrays; amortised O(1) per entry.
		n := copy(s.pending, s.pending[s.head:])
		clear(s.pending[n:])
		s.pending, s.head = s.pending[:n], 0
	}
	s.queued.Store(int64(s.queuedLocked()))
}

// withdraw removes f's queued entries, keeping the others in order, and
// appends the removed messages to dst when collect is set. Withdrawals
// that wait for the stage mutex at the same time are served together, in
// one pass over the buffer (withdrawLocked), by the first of them to get
// it: a feed's messages are the same as if each had been served alone.
func (s *Stage[T]) withdraw(f *Feed[T], collect bool, dst []*message.Message[T]) ([]*message.Message[T], int) {
	w := &withdrawal[T]{feed: f, collect: collect, dst: dst}
	s.wmu.Lock()
	s.withdrawals = append(s.withdrawals, w)
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !w.done {
		s.withdrawLocked()
	}
	return w.dst, w.n
}

// withdrawLocked serves every waiting withdrawal in one pass over the
// buffer: O(buffered + withdrawals). A feed with two withdrawals waiting
// gets its messages in the first, as if they had run one after the other.
// The caller holds s.mu.
func (s *Stage[T]) withdrawLocked() {
	s.wmu.Lock()
	ws := s.withdrawals
	s.withdrawals = nil
	s.wmu.Unlock()
	for _, w := range ws {
		if w.feed.withdrawal == nil {
			w.feed.withdrawal = w
		}
	}
	q := s.pending[s.head:]
	s.scanned += uint64(len(q))
	kept, removed := 0, 0
	for i := range q {
		if w := q[i].feed.withdrawal; w != nil {
			if w.collect {
				w.dst = append(w.dst, q[i].msg)
			}
			w.n++
			removed++
			continue
		}
		q[kept] = q[i]
		kept++
	}
	for _, w := range ws {
		w.feed.withdrawal = nil
		w.done = true
	}
	clear(ws)
	if removed == 0 {
		return
	}
	clear(q[kept:])
	s.pending = s.pending[:s.head+kept]
	if kept == 0 {
		s.pending, s.head = s.pending[:0], 0
		if !s.busy {
			s.idle.Broadcast()
		}
	}
	s.queued.Store(int64(s.queuedLocked()))
}

// settle is the stage's last step, once the source's Run and dispatch
// (which returned lost) have both returned, so that nothing is delivered
// into the buffer any more. What dispatch took and did not hand over, and
// what is still buffered (only a hard stop leaves any: what the dispatcher
// held, and what the source delivered after it stopped), stays
// unacknowledged: settle counts it in Unhandled and logs it in one
// warning, and lets go of it (a later Withdraw finds nothing).
func (s *Stage[T]) settle(lost int) {
	s.mu.Lock()
	n := lost + s.queuedLocked()
	clear(s.pending)
	s.pending, s.head = nil, 0
	s.queued.Store(0)
	s.mu.Unlock()
	if n > 0 {
		s.unhandled.Add(uint64(n))
		s.log.Warn("producer stage stopped before dispatching every buffered message; they stay unacknowledged",
			slog.Int("messages", n))
	}
}

// run calls the source's Run until ctx is cancelled, the source is
// exhausted, or it failed too often under the rules of Restart.
func (s *Stage[T]) run(ctx context.Context, src Source[T], rs Restart) error {
	defer s.finish()
	var (
		windowed    []time.Time   // failures within rs.Window
		consecutive int           // runs in a row that failed without delivering
		failing     time.Duration // time failing since the last delivery
		failedAt    time.Time     // end of the last failed run of the streak
	)
	for {
		start := time.Now()
		s.startRun(start)
		err := s.runOnce(ctx, src)
		connectedAt, delivered := s.closeFeeds()
		now := time.Now()
		if ctx.Err() != nil {
			s.setState(StateStopped, now, nil)
			return nil
		}
		if err == nil {
			s.log.Info("source exhausted")
			s.setState(StateStopped, now, nil)
			return nil
		}
		kept := windowed[:0]
		for _, t := range windowed {
			if now.Sub(t) < rs.Window {
				kept = append(kept, t)
			}
		}
		windowed = append(kept, now)
		if delivered {
			consecutive, failing, failedAt = 0, 0, time.Time{}
		} else {
			// Unconnected time: the backoff since the streak's last
			// failure, then this run until its first feed, if any.
			if !failedAt.IsZero() {
				failing += start.Sub(failedAt)
			}
			if connectedAt.IsZero() {
				connectedAt = now
			}
			failing += connectedAt.Sub(start)
			consecutive++
			failedAt = now
		}
		var rule RestartRule
		switch {
		case len(windowed) > rs.MaxRestarts:
			rule = RuleMaxRestarts
		case consecutive >= rs.MaxConsecutiveFailures:
			rule = RuleMaxConsecutiveFailures
		case consecutive > 0 && failing >= rs.MaxFailingTime:
			rule = RuleMaxFailingTime
		}
		if rule != "" {
			s.setState(StateFailed, now, func(st *StageStatus) {
				st.ConsecutiveFailures, st.LastError = consecutive, err
			})
			return &RestartError{Stage: s.name, Rule: rule, Restarts: len(windowed) - 1, Window: rs.Window,
				ConsecutiveFailures: consecutive, Failing: failing, Last: err}
		}
		backoff := rs.backoff(max(len(windowed), consecutive))
		s.log.Warn("source failed; restarting", withStack(err,
			slog.Any("error", err), slog.Int("failures_in_window", len(windowed)),
			slog.Int("consecutive_failures", consecutive), slog.Duration("failing", failing),
			slog.Duration("backoff", backoff))...)
		s.setState(StateRestarting, now, func(st *StageStatus) {
			st.Restarts++
			st.ConsecutiveFailures, st.LastError = consecutive, err
		})
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			s.setState(StateStopped, time.Now(), nil)
			return nil
		}
		// The failed run's messages still count against the window of the
		// consumers the next run registers again: let them leave first, so
		// restarts cannot stack windows in the stage buffer.
		if s.waitIdle(ctx) != nil {
			s.setState(StateStopped, time.Now(), nil)
			return nil
		}
	}
}

// waitIdle waits until every delivered message has left the stage buffer.
func (s *Stage[T]) waitIdle(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idle.Wait(ctx, &s.mu, func() bool { return s.queuedLocked() == 0 && !s.busy })
}

// runOnce calls the source's Run on a goroutine of its own (see call), so
// that a Run that ends its goroutine (runtime.Goexit) is a failed run, as
// a panic is, and the stage goes on.
func (s *Stage[T]) runOnce(ctx context.Context, src Source[T]) error {
	return call("Run", func() error { return src.Run(ctx, s) })
}

// ErrFeedClosed is returned by Feed.Acquire once the feed is closed: its Run
// returned or the source closed it.
var ErrFeedClosed = errors.New("producer: feed closed")

// ErrPushFeed is returned by Feed.Acquire on a feed registered with a grant
// callback: its permits go to the callback, not to Acquire.
var ErrPushFeed = errors.New("producer: Acquire on a feed that has a grant callback")

// ErrNilContext is what [Feed.Acquire] returns for a nil context: it takes
// no permit then.
var ErrNilContext = errors.New("producer: nil context")

// Feed is one flow-controlled consumer of a source within a producer stage.
// Its methods may be called from any goroutine. Stage.NewFeed makes it; a
// Feed it did not make (a zero value) belongs to no stage and acts as a
// closed one: Acquire returns ErrFeedClosed, TryDeliver reports false,
// Deliver drops what it is given (logging to slog.Default()), Withdraw
// finds nothing, and Close and FlushInFlight do nothing.
type Feed[T any] struct {
	stage   *Stage[T]
	name    string
	grant   func(int) // nil: pull model
	attempt int       // the stage's run that registered the feed

	mu     sync.Mutex    // serialises grants with Close; guards avail
	closed atomic.Bool   // set under mu; read without it by Deliver
	avail  int           // pull model: granted and not yet acquired
	wake   chan struct{} // pull model: signalled when avail grows
	done   chan struct{} // closed by Close

	// cmu guards the permit counters, so that Stats reads them as one
	// snapshot even while a direct hand-off charges the feed on the
	// source's goroutine. It is only ever held to update or read them,
	// never across a call out of the package, so a grant callback may call
	// Stats or Deliver.
	cmu        sync.Mutex
	remaining  int // granted and not yet charged
	granted    int
	dispatched int

	warned        atomic.Bool
	heldWarned    bool         // pull model: the held-permits warning was logged; guarded by mu
	overdelivered atomic.Int64 // high-water mark of delivered - granted
	delivered     atomic.Int64
	withdrawn     atomic.Int64

	withdrawal *withdrawal[T] // the pass over the buffer serving it; guarded by the stage's mu
}

// Name is the name the feed was registered with.
func (f *Feed[T]) Name() string { return f.name }

// Acquire waits until the feed has permits and takes up to max of them
// (a max below 1 counts as 1), returning how many (at least 1). The source
// then fetches and delivers at most that many messages. It returns ErrFeedClosed once the feed is closed,
// ctx.Err() when ctx ends first, and ErrPushFeed on a feed registered with a
// grant callback.
//
// Permits taken are the source's until it delivers a message for each:
// they do not come back to the feed, and the feed is refilled only as
// delivered messages leave the stage buffer. A source whose fetch may
// return fewer messages than it asked for keeps the rest and delivers up
// to them before it acquires again, as a GenStage producer keeps the
// demand it has not met:
//
//	have := 0
//	for {
//		if have == 0 {
//			n, err := feed.Acquire(ctx, 500)
//			if err != nil {
//				return nil
//			}
//			have = n
//		}
//		msgs := fetchUpTo(ctx, have) // may return fewer, or none
//		feed.Deliver(msgs...)
//		have -= len(msgs)
//	}
//
// A source that acquires again while it holds more undelivered permits
// than the flow's Threshold waits for ever (nothing it delivered is left
// to refill the feed): once it has waited so for HeldPermitsPatience,
// with nothing delivered meanwhile, Acquire logs one warning for the
// feed, naming how many permits the source holds.
//
// A nil ctx returns ErrNilContext at once, no permit taken.
func (f *Feed[T]) Acquire(ctx context.Context, max int) (int, error) {
	if ctx == nil {
		return 0, ErrNilContext
	}
	if f.grant != nil {
		return 0, ErrPushFeed
	}
	if f.stage == nil {
		return 0, ErrFeedClosed
	}
	// patience runs while the source waits holding undelivered permits
	// above the threshold (no timer otherwise), restarted while the feed
	// delivers; delivered is the feed's count when it last started.
	var patience *time.Timer
	var patienceC <-chan time.Time
	var delivered int64
	defer func() {
		if patience != nil {
			patience.Stop()
		}
	}()
	for {
		if n, closed := f.take(max); n > 0 || closed {
			if n == 0 {
				return 0, ErrFeedClosed
			}
			return n, nil
		}
		if patience == nil && f.heldAbove() {
			delivered = f.delivered.Load()
			patience = time.NewTimer(HeldPermitsPatience)
			patienceC = patience.C
		}
		select {
		case <-f.wake:
		case <-f.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-patienceC:
			if d := f.delivered.Load(); d != delivered {
				// Something was delivered meanwhile: wait again, from now.
				delivered = d
				patience.Reset(HeldPermitsPatience)
				continue
			}
			patienceC = nil
			f.warnHeld()
		}
	}
}

// TryAcquire takes up to max of the feed's permits (a max below 1 counts as
// 1) without waiting and returns how many (0 when it has none, is closed, or
// has a grant callback).
func (f *Feed[T]) TryAcquire(max int) int {
	if f.grant != nil {
		return 0
	}
	n, _ := f.take(max)
	return n
}

func (f *Feed[T]) take(limit int) (n int, closed bool) {
	limit = max(limit, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return 0, true
	}
	n = min(f.avail, limit)
	f.avail -= n
	if f.avail > 0 && n > 0 {
		f.signal() // another acquirer may take the rest
	}
	return n, false
}

// heldLocked is how many permits the source took and has not delivered
// (nor got back by withdrawing messages). The caller holds f.mu.
func (f *Feed[T]) heldLocked() int {
	f.cmu.Lock()
	remaining, dispatched := f.remaining, f.dispatched
	f.cmu.Unlock()
	// remaining = available + held by the source + in the stage buffer;
	// a delivery under way counts as in the buffer already, so held is
	// never overstated.
	buffered := int(f.delivered.Load()-f.withdrawn.Load()) - dispatched
	return remaining - f.avail - buffered
}

// heldAbove reports whether the source holds more undelivered permits
// than the flow's Threshold, which no delivered message is left to
// refill, and the feed has not warned of it yet.
func (f *Feed[T]) heldAbove() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.heldWarned && f.avail == 0 && f.heldLocked() > f.stage.flow.Threshold
}

// warnHeld logs HeldPermitsLog, once per feed, if the source still holds
// more undelivered permits than the threshold while it waits in Acquire.
func (f *Feed[T]) warnHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.heldLocked()
	if f.heldWarned || f.closed.Load() || f.avail > 0 || held <= f.stage.flow.Threshold {
		return
	}
	f.heldWarned = true
	f.stage.log.Warn(HeldPermitsLog, slog.String("feed", f.name), slog.Int("held", held),
		slog.Int("threshold", f.stage.flow.Threshold), slog.Duration("waited", HeldPermitsPatience))
}

// HeldPermitsPatience is how long Acquire waits, while the source holds
// more permits it acquired and has not delivered than the flow's
// Threshold and the feed delivers nothing, before it logs HeldPermitsLog.
// A source that fetches for one feed on several goroutines holds such
// permits for a while as a matter of course (one goroutine waits while
// another fetches); one that dropped them holds them for ever.
const HeldPermitsPatience = 5 * time.Second

// HeldPermitsLog is the message of the warning Feed.Acquire logs when the
// source has waited HeldPermitsPatience for permits, delivering nothing,
// while holding more it acquired and never delivered than the flow's
// Threshold (see Acquire).
const HeldPermitsLog = "feed's source waits for permits while holding ones it acquired and has not delivered; the feed is refilled only as delivered messages leave, so unless another goroutine of the source delivers them it waits for ever: deliver up to what Acquire returned before acquiring again"

func (f *Feed[T]) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Deliver puts messages into the stage buffer. It never blocks. A source
// must deliver only as many messages as it was granted permits: the window
// is not checked message by message, but a feed that over-delivers is
// logged once and shows it in FeedStats.Overdelivered. A closed feed (its Run
// returned, or the source closed it) accepts nothing: such messages are
// dropped unacknowledged and logged. A source that keeps track of what it
// delivered (to wait for its outcomes) uses TryDeliver instead.
func (f *Feed[T]) Deliver(msgs ...*message.Message[T]) {
	if !f.TryDeliver(msgs...) {
		log := slog.Default()
		if f.stage != nil {
			log = f.stage.log
		}
		log.Warn("messages delivered to a closed feed are dropped unacknowledged",
			slog.String("feed", f.name), slog.Int("messages", len(msgs)))
	}
}

// TryDeliver is Deliver for a source that keeps track of what it
// delivered: when the feed is closed (its Run returned, or the source
// closed it) it takes none of msgs, logs nothing and reports false. Those
// messages will get no outcome, and the source forgets them as it does
// withdrawn ones (see Withdraw): a Kafka partition that delivers a record
// just as the pipeline stops must not wait for its acknowledgement. It
// reports true when it took msgs, or when msgs is empty.
func (f *Feed[T]) TryDeliver(msgs ...*message.Message[T]) bool {
	if len(msgs) == 0 {
		return true
	}
	if f.closed.Load() || f.stage == nil {
		return false
	}
	d := f.delivered.Add(int64(len(msgs))) - f.withdrawn.Load()
	f.cmu.Lock()
	granted := int64(f.granted)
	f.cmu.Unlock()
	if over := d - granted; over > 0 {
		for cur := f.overdelivered.Load(); over > cur && !f.overdelivered.CompareAndSwap(cur, over); cur = f.overdelivered.Load() {
		}
		if f.warned.CompareAndSwap(false, true) {
			f.stage.log.Warn("feed delivered more messages than it was granted permits; the source does not honour the permit window",
				slog.String("feed", f.name), slog.Int64("delivered", d), slog.Int64("granted", d-over))
		}
	}
	if !f.stage.deliver(f, msgs) {
		f.delivered.Add(-int64(len(msgs)))
		return false
	}
	return true
}

// Withdraw removes the feed's messages that still wait in the stage buffer
// (delivered, not yet handed to the processors) and returns how many it
// removed. It is for a consumer that loses the right to have its messages
// handled, such as a Kafka partition revoked by a rebalance: the broker
// delivers them again to the next owner.
//
// Withdrawn messages are never dispatched and get no outcome (their
// acknowledger is not called for them). They are not charged: the permits
// they used count as unused, so the source may deliver that many messages
// again without a new grant (with a pull-model feed, Acquire does not hand
// them out again; the source keeps the count Withdraw returns). The messages
// the stage is handing to the processors at that moment (at most one chunk
// of 64) are past withdrawing and are dispatched as usual; so are the
// messages delivered after Withdraw returns. Withdraw works on open and
// closed feeds and is safe to call from any goroutine.
//
// Withdraw passes over the stage buffer once; withdrawals of several feeds
// that wait for the stage at the same time (each consumer a source lets go
// of at once withdrawing on its own goroutine) share one pass, so releasing
// n consumers costs about one pass over the buffer, not n.
func (f *Feed[T]) Withdraw() int {
	if f.stage == nil {
		return 0
	}
	_, n := f.stage.withdraw(f, false, nil)
	f.withdrawn.Add(int64(n))
	return n
}

// WithdrawAppend is Withdraw that also appends the withdrawn messages to
// dst, in the order they were delivered, and returns the extended slice
// (dst itself when nothing was withdrawn). A source uses them to learn which
// positions it must fetch again.
func (f *Feed[T]) WithdrawAppend(dst []*message.Message[T]) []*message.Message[T] {
	if f.stage == nil {
		return dst
	}
	dst, n := f.stage.withdraw(f, true, dst)
	f.withdrawn.Add(int64(n))
	return dst
}

// FlushInFlight tells the pipeline that the source releases the feed and
// waits for the outcomes of the messages it delivered (a revoked Kafka
// partition waiting for its in-flight messages before it commits): every
// batcher of the pipeline emits its open batches at once, with trigger
// flush, and until done is called emits each batch as soon as the chunk
// that filled it is taken in, as if BatchTimeout were zero. The feed's
// messages still in the processors then reach their batch handler without
// waiting out BatchTimeout. Emitting early reorders nothing: a batcher
// partition emits its batches in the order they opened, as a drain does.
// Other feeds' batches are emitted early too, and smaller, while it lasts:
// call done as soon as the wait is over; it is idempotent. Several feeds
// released at once share the early emission, which lasts until the last of
// them is done; each call wakes a batcher partition at most once, however
// many come before it runs. FlushInFlight never blocks; in a pipeline
// without batchers it does nothing.
func (f *Feed[T]) FlushInFlight() (done func()) {
	if f.stage == nil {
		return func() {}
	}
	return f.stage.release.Begin()
}

// Close stops the feed from receiving further grants, for a consumer that
// ends before Run returns; a grant in progress finishes first. Messages it
// already delivered are still dispatched, unless the source withdraws them
// first (Withdraw). Close is idempotent. The stage lets go of a closed
// feed (and of what its grant callback holds) while Run goes on, so that a
// source re-creating its feeds over many rebalances keeps only the open
// ones.
func (f *Feed[T]) Close() {
	if f.stage == nil {
		return
	}
	f.lockForClose()
	if f.closed.Load() {
		f.mu.Unlock()
		return
	}
	f.closed.Store(true)
	f.avail = 0
	close(f.done)
	f.mu.Unlock()
	f.stage.forget()
}

// forget notes that one of the run's feeds closed: once the closed feeds
// are half the list, it keeps only the open ones (in order), so that
// closing costs amortised O(1) and a closed feed, with what its grant
// callback holds, is garbage once the source lets go of it.
func (s *Stage[T]) forget() {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.closed++; 2*s.closed < len(s.feeds) {
		return
	}
	open := s.feeds[:0]
	for _, f := range s.feeds {
		if !f.closed.Load() {
			open = append(open, f)
		}
	}
	clear(s.feeds[len(open):])
	s.feeds, s.closed = open, 0
}

// grantStallWarning is how long Feed.Close waits for a grant in progress
// before it logs that the grant callback has not returned.
var grantStallWarning = 5 * time.Second

// lockForClose takes f.mu, which a grant in progress holds while its
// callback runs. A callback that blocks holds it for ever, and the stage
// cannot close the feed or return: after grantStallWarning lockForClose
// logs that, once, and goes on waiting.
func (f *Feed[T]) lockForClose() {
	if f.mu.TryLock() {
		return
	}
	logged := make(chan struct{})
	after := grantStallWarning
	t := time.AfterFunc(after, func() {
		defer close(logged)
		f.stage.log.Warn("feed cannot close: its grant callback has not returned (a grant callback must not block)",
			slog.String("feed", f.name), slog.Duration("waited", after))
	})
	f.mu.Lock()
	if !t.Stop() {
		<-logged
	}
}

// FeedStats are a feed's counters.
type FeedStats struct {
	// Remaining is the permits granted and not yet charged: how many more
	// messages the consumer may have fetched or may fetch. It never exceeds
	// Flow.MaxWindow().
	Remaining int
	// Granted is the total number of permits granted.
	Granted int
	// Delivered is the number of messages the source delivered.
	Delivered int
	// Dispatched is the number of messages that left the stage buffer.
	Dispatched int
	// Withdrawn is the number of messages the source took back out of the
	// stage buffer with Withdraw; they were neither dispatched nor charged.
	Withdrawn int
	// Overdelivered is the most messages the source was ever ahead of its
	// grants (delivered minus granted, at the time of a delivery): 0 for a
	// source that honours the window.
	Overdelivered int
}

// Stats returns the feed's counters. Remaining, Granted and Dispatched are
// one snapshot: Remaining is always Granted - Dispatched. Dispatched +
// Withdrawn never exceeds Delivered.
func (f *Feed[T]) Stats() FeedStats {
	f.cmu.Lock()
	st := FeedStats{Remaining: f.remaining, Granted: f.granted, Dispatched: f.dispatched}
	f.cmu.Unlock()
	// What left the buffer before what entered it: a message is counted
	// delivered before it can be dispatched or withdrawn.
	st.Withdrawn = int(f.withdrawn.Load())
	st.Delivered = int(f.delivered.Load())
	st.Overdelivered = int(f.overdelivered.Load())
	return st
}

// account charges n permits and returns the permits left.
func (f *Feed[T]) account(n int) int {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.dispatched += n
	f.remaining -= n
	return f.remaining
}

// chargeDirect charges n permits for messages handed over by Deliver
// itself. A pull-model feed is refilled at once; for a push-model feed it
// reports whether a refill is due, which the dispatcher then grants (a
// grant callback must not run inside the source's Deliver, which may hold
// the source's locks).
func (f *Feed[T]) chargeDirect(n int) (refillDue bool) {
	if f.grant == nil {
		f.charge(n)
		return false
	}
	return f.account(n) <= f.stage.flow.Threshold
}

// charge charges n permits and refills the feed while its remaining permits
// are at or below the threshold.
func (f *Feed[T]) charge(n int) {
	if f.account(n) > f.stage.flow.Threshold {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Decided under f.mu, which serialises grants: two charges of the same
	// feed at once (deliveries from two goroutines) refill it once, not
	// once each, so the window is never exceeded.
	for f.due() && f.giveLocked(f.stage.flow.Refill) {
	}
}

// due reports whether the feed's remaining permits are at or below the
// threshold.
func (f *Feed[T]) due() bool {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	return f.remaining <= f.stage.flow.Threshold
}

// give grants n permits unless the feed is closed, and reports whether it
// did.
func (f *Feed[T]) give(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.giveLocked(n)
}

// giveLocked is give with f.mu held.
func (f *Feed[T]) giveLocked(n int) bool {
	if f.closed.Load() {
		return false
	}
	f.cmu.Lock()
	f.remaining += n
	f.granted += n
	f.cmu.Unlock()
	if f.grant == nil {
		f.avail += n
		f.signal()
		return true
	}
	defer panics.Log(context.Background(), f.stage.log, "feed grant callback panicked", slog.String("feed", f.name))
	f.grant(n)
	return true
}

func stageName(pipeline string, i int) string { return fmt.Sprintf("%s.producer.%d", pipeline, i) }
