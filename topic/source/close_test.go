package source_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/kafkatopic"
	"github.com/boulevard-go/boulevard/topic/source"
)

// Guarantee: closing the source leaves the topic: its consumer group
// membership and broadcast subscription end.
func TestCloseLeavesTopic(t *testing.T) {
	for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
		o := topic.Options{Mode: topic.Mixed}
		h := newTopic(t, "t", o)
		src := newSource(t, h, mode)
		if st := h.Stats(); st.BalancedGroups+st.BroadcastSubscribers != 1 {
			t.Fatalf("%v: stats after New %+v, want one subscription", mode, st)
		}
		if err := src.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.Stats(); st.BalancedGroups != 0 || st.BroadcastSubscribers != 0 {
			t.Fatalf("%v: stats after Close %+v, want no subscription left", mode, st)
		}
		h.Close()
	}
}

// Guarantee: Close returns by its context's deadline, with an error
// wrapping ctx.Err(), when closing a subscription waits on a backend that
// does not answer (a group member of a Kafka topic whose cluster stopped
// responding: its leave is bounded only by kafkatopic's AdminTimeout, here
// far beyond the deadline); a later Close waits for the same closing and
// returns nil once it has ended.
func TestCloseReturnsByItsDeadlineWhenTheBackendHangs(t *testing.T) {
	c := testbroker.Kafka(t)
	b, err := kafkatopic.New(kafkatopic.Options[int]{
		Brokers:      c.ListenAddrs(),
		Config:       testbroker.SaramaConfig(),
		Codec:        topic.IntCodec{},
		AdminTimeout: 2 * time.Minute,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic[int]("hung", topic.Options{Mode: topic.Mixed}, topic.Backend[int](b))
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, h, topic.Balanced("g"))
	testbroker.HangKafka(t, c)

	testbroker.ReturnsByDeadline(t, "Close", src.Close)
	// Closing the backend past its deadline cuts every connection, so that
	// the closing left running ends before the test does.
	bctx, bcancel := context.WithTimeout(context.Background(), time.Second)
	defer bcancel()
	_ = b.Close(bctx)
	later, lcancel := context.WithTimeout(context.Background(), testbroker.HungGrace)
	defer lcancel()
	if err := src.Close(later); err != nil {
		t.Errorf("a later Close, once the backend cut its connections = %v, want nil", err)
	}
	h.Close()
}

// runWatch is a source that reports the stage index of each Run that
// returns.
type runWatch struct {
	*source.Source[int]
	returned chan int
}

func (w *runWatch) Run(ctx context.Context, st *producer.Stage[int]) error {
	defer func() { w.returned <- st.Index() }()
	return w.Source.Run(ctx, st)
}

// holdRig starts a pipeline of the given number of stages reading, in
// mode, a topic of a heldBackend made with opts, through a runWatch, with
// testbroker.HungDeadline as shutdown timeout. Every Subscribe after New's
// (which made the backend's subscription 0) waits until release is
// called, entered receiving once for each.
func holdRig(t *testing.T, opts topic.Options, mode topic.SubscriptionMode, stages int) (b *heldBackend, w *runWatch, p *pipeline.Pipeline[int, int], entered <-chan struct{}, release func()) {
	t.Helper()
	b = &heldBackend{}
	h, err := topic.NewTopic[int]("held", opts, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	w = &runWatch{Source: newSource(t, h, mode), returned: make(chan int, 16)}
	entered, release = b.holdSubscribes()
	t.Cleanup(release)
	p, err = pipeline.New(pipeline.Options[int, int]{
		Name:            "held",
		ShutdownTimeout: testbroker.HungDeadline,
		Producer:        producer.Options[int]{Source: w, Concurrency: stages},
		Processors: processor.Options[int, int]{Handle: func(_ context.Context, m *message.Message[int]) (int, error) {
			return m.Data, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, w, p, entered, release
}

// stopWhileHeld stops the pipeline of a holdRig whose subscribe waits,
// every subscription's Close returning at once, and checks that every
// stage's Run returns without waiting for that subscribe, and that
// stopping returns with the source's Close cut short by the shutdown
// timeout. It then releases the subscribe, and checks that a later Close
// returns nil and that the subscription made by the subscribe, the
// backend's subscription 1, is closed.
func stopWhileHeld(t *testing.T, b *heldBackend, w *runWatch, p *pipeline.Pipeline[int, int], release func(), stages int) {
	t.Helper()
	b.releaseAll()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*deadline)
		defer cancel()
		stopped <- p.Stop(ctx)
	}()
	timeout := time.After(deadline)
	for left := stages; left > 0; {
		select {
		case <-w.returned:
			left--
		case <-timeout:
			t.Errorf("%d of %d stages' Runs still wait for the subscribe %v after the pipeline was stopped", left, stages, deadline)
			left = 0
		}
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stopping the pipeline = %v, want the source's Close cut short by the shutdown timeout", err)
		}
	case <-time.After(deadline):
		t.Errorf("stopping the pipeline still waits for the subscribe %v after it began", deadline)
		release()
		<-stopped
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("a later Close, once the subscribe ended = %v, want nil", err)
	}
	if got := b.sub(t, 1); !isClosed(got.closed) {
		t.Error("the subscription made by the subscribe under way was never closed")
	}
}

// Guarantee: while the subscribe of a stage's group member waits on a
// backend that does not answer (a Kafka topic's Subscribe waits up to
// kafkatopic's AdminTimeout), stopping the pipeline waits for neither:
// the stage's Run returns once its context ends, and the source's Close,
// which the pipeline calls with its shutdown timeout, returns at that
// deadline with an error wrapping context.DeadlineExceeded. Once the
// subscribe ends, the subscription it made is closed and a later Close
// returns nil.
func TestRunAndCloseReturnWhileASubscribeHangs(t *testing.T) {
	b, w, p, entered, release := holdRig(t, topic.Options{}, topic.Balanced("g"), 2)
	select {
	case <-entered: // stage 1 subscribes its group member
	case <-time.After(deadline):
		t.Fatal("stage 1 never subscribed")
	}
	stopWhileHeld(t, b, w, p, release, 2)
}

// Guarantee: while the subscribe replacing a broadcast subscription the
// topic disconnected for lagging waits on a backend that does not answer,
// stopping the pipeline waits for neither: every stage's Run returns once
// its context ends (the one waiting for the subscribe, and the others
// waiting for their turn), and the source's Close returns at the shutdown
// timeout with an error wrapping context.DeadlineExceeded. The stages make
// one subscribe between them, which is not counted as a resubscribe before
// it is made; once it ends, the subscription it made is closed and a later
// Close returns nil.
func TestRunAndCloseReturnWhileAResubscribeHangs(t *testing.T) {
	b, w, p, entered, release := holdRig(t, topic.Options{Mode: topic.BroadcastOnly,
		Broadcast: topic.BroadcastPolicy{OnLag: topic.Disconnect}}, topic.Broadcast(), 2)
	b.sub(t, 0).disconnect()
	select {
	case <-entered: // a stage replaces the disconnected subscription
	case <-time.After(deadline):
		t.Fatal("no stage subscribed again after the disconnect")
	}
	if st := w.Stats(); st.LagNotices != 1 || st.Resubscribes != 0 || st.Subscriptions != 1 {
		t.Errorf("stats %+v while the resubscribe waits, want the lag notice counted and no resubscribe yet", st)
	}
	stopWhileHeld(t, b, w, p, release, 2)
	if st := w.Stats(); st.Resubscribes != 0 {
		t.Errorf("stats %+v, want no resubscribe counted: the subscription made once the source closed is not the slot's", st)
	}
	if n := len(entered); n != 0 {
		t.Errorf("the stages made %d more subscribes, want the one", n)
	}
}
